"""Reading request bodies within a size limit, before they are parsed."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from tuneplane.contract.errors import PayloadTooLarge
from tuneplane.contract.json_body import decode_json_body


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 as soon as it is known to exceed ``limit``."""
    too_large = PayloadTooLarge(f"body: larger than the {limit // 1024} KiB limit")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(request: Request, limit: int) -> Any:
    return decode_json_body(await read_body(request, limit))
