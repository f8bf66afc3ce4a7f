"""Reading a run's live log lines: pages by cursor, and a Server-Sent Events stream that
resumes from ``Last-Event-ID`` after a disconnect."""

from __future__ import annotations

import base64
import time
from collections.abc import AsyncIterator
from typing import Annotated

import orjson
from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response, StreamingResponse

from tuneplane.contract.errors import InvalidInput, Violation
from tuneplane.contract.limits import QUERY_INTEGER_MAX
from tuneplane.server.guard import GuardedRoute
from tuneplane.server.models import LogPage
from tuneplane.server.responses import JSON
from tuneplane.server.state import app_state
from tuneplane.store import catalog, runlogs
from tuneplane.store.runlogs import StoredLine

router = APIRouter(prefix="/api/v1", tags=["read"], route_class=GuardedRoute)
RUN = "/projects/{project}/runs/{run}"
#: A line cursor, as ``next_cursor`` and ``id:`` give it.
Cursor = Annotated[int, Query(ge=0, le=QUERY_INTEGER_MAX)]
SomeCursor = Annotated[int | None, Query(ge=0, le=QUERY_INTEGER_MAX)]
#: Seconds between comment lines that keep idle connections (and proxies) open.
KEEPALIVE_SECONDS = 15.0


def _line_json(line: StoredLine) -> dict[str, object]:
    return {
        "cursor": line.cursor,
        "attempt": line.attempt,
        "seq": line.seq,
        "stream": line.stream,
        "time": line.time,
        "text": line.text,
        "data": base64.b64encode(line.data).decode() if line.data is not None else None,
    }


def _run_id(request: Request, project: str, run: str) -> int:
    with app_state(request).database.connect() as connection:
        return catalog.get_run(connection, project, run).id


@router.get(RUN + "/logs", response_model=LogPage)
def read_logs(
    request: Request,
    project: str,
    run: str,
    after: Cursor = 0,
    limit: Annotated[int, Query(ge=1, le=5000)] = 500,
) -> Response:
    """Lines in arrival order after the cursor ``after``; ``next_cursor`` continues."""
    database = app_state(request).database
    with database.connect() as connection:
        run_id = catalog.get_run(connection, project, run).id
        lines = runlogs.read_lines(connection, run_id, after, limit)
    return JSON(
        {
            "lines": [_line_json(line) for line in lines],
            "next_cursor": lines[-1].cursor if lines else after,
        }
    )


def _resume_cursor(request: Request, after: int | None) -> int:
    last_event = request.headers.get("last-event-id")
    if last_event is not None:
        if not (
            last_event.isascii() and last_event.isdigit() and int(last_event) <= QUERY_INTEGER_MAX
        ):
            raise InvalidInput((Violation("Last-Event-ID", "must be a cursor"),))
        return int(last_event)
    return after or 0


@router.get(RUN + "/logs/stream", response_class=StreamingResponse)
async def stream_logs(
    request: Request,
    project: str,
    run: str,
    after: SomeCursor = None,
) -> Response:
    """Server-Sent Events: ``event: line`` with ``id: <cursor>``; reconnecting with
    ``Last-Event-ID`` (browsers do it themselves) resumes without loss or repeats."""
    state = app_state(request)
    run_id = await run_in_threadpool(_run_id, request, project, run)
    cursor = _resume_cursor(request, after)

    def page(after_cursor: int) -> list[StoredLine]:
        with state.database.connect() as connection:
            return runlogs.read_lines(connection, run_id, after_cursor, 500)

    async def events() -> AsyncIterator[bytes]:
        nonlocal cursor
        yield b"retry: 2000\n\n"
        quiet_since = time.monotonic()
        while True:
            lines = await run_in_threadpool(page, cursor)
            for line in lines:
                yield (
                    f"id: {line.cursor}\nevent: line\ndata: ".encode()
                    + orjson.dumps(_line_json(line))
                    + b"\n\n"
                )
                cursor = line.cursor
            if lines:
                quiet_since = time.monotonic()
                continue
            if time.monotonic() - quiet_since > KEEPALIVE_SECONDS:
                yield b": keepalive\n\n"
                quiet_since = time.monotonic()
            await state.live.wait(run_id)

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
