"""``POST /ingest``: the Arena worker-ingestion route."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from tuneplane.contract.arena import decode_json_body, parse_arena_batch
from tuneplane.contract.errors import PayloadTooLarge, Unauthorized, Unavailable
from tuneplane.contract.limits import ARENA_BODY_MAX_BYTES
from tuneplane.server.models import IngestResult
from tuneplane.server.responses import JSON
from tuneplane.server.state import app_state

router = APIRouter()


def _authorize(request: Request) -> None:
    secret = app_state(request).settings.ingest_secret
    if secret is None:
        raise Unavailable(
            "ingestion is disabled: set TUNEPLANE_INGEST_SECRET (or TRACKIO_INGEST_TOKEN) "
            "on the server; reading stored runs keeps working"
        )
    header = request.headers.get("authorization", "")
    scheme, _, credential = header.partition(" ")
    if scheme.lower() != "bearer" or not credential:
        raise Unauthorized("authorization: send 'Authorization: Bearer <ingest secret>'")
    if not secret.matches(credential.strip()):
        raise Unauthorized("authorization: the ingest secret is not valid")


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


@router.post(
    "/ingest",
    response_model=IngestResult,
    summary="Arena worker ingestion: log events and alerts of one run",
    tags=["ingest"],
)
async def ingest(request: Request) -> Response:
    """Store a batch of 1-128 log events and alerts for one run (see docs/ingest.md).

    Requires ``Authorization: Bearer <TUNEPLANE_INGEST_SECRET>``. Retried ``log_id`` and
    ``alert_id`` values are acknowledged as duplicates and change nothing.
    """
    _authorize(request)
    body = await read_body(request, ARENA_BODY_MAX_BYTES)
    batch = parse_arena_batch(decode_json_body(body))
    outcome = await app_state(request).arena.ingest(batch)
    return JSON(outcome.to_json())
