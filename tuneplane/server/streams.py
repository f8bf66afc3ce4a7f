"""Following runs as they change, as Server-Sent Events.

``…/runs/{run}/stream`` follows one run, ``/projects/{project}/stream?runs=a,b`` several runs
of a project on one connection (a browser holds only six per server). Each sends
``event: run`` with the run object whenever the run changes. With ``points=1`` it also sends,
before that, ``event: points`` with the summary of every metric that changed and its points
after the last step the stream had sent, so a live chart draws a new point without asking
for it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Annotated

import orjson
from fastapi import APIRouter, Query, Request
from sqlalchemy import Connection
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response, StreamingResponse

from tuneplane.contract.limits import LIVE_POINTS_MAX
from tuneplane.server.guard import GuardedRoute
from tuneplane.server.reads import RunNames, metric_json, run_names
from tuneplane.server.run_json import run_json
from tuneplane.server.state import AppState, app_state
from tuneplane.store import catalog, points

router = APIRouter(prefix="/api/v1", tags=["read"], route_class=GuardedRoute)
#: Seconds between comment lines that keep idle connections (and proxies) open.
KEEPALIVE_SECONDS = 15.0
#: After a quiet spell, how long a stream waits for more writes before it reads what changed:
#: the workers of a comparison's runs reporting the same step arrive as one message.
GATHER_SECONDS = 0.05
#: Least time between two messages of a stream: a run written to many times a second, or many
#: runs one after another, is sent as at most four messages a second, so a live page lays out
#: and draws their changes together.
MESSAGE_INTERVAL_SECONDS = 0.25

PointsFlag = Annotated[
    bool, Query(description="also send each changed metric's summary and new points")
]


@dataclass
class _Followed:
    """A followed run and what its stream has sent of it."""

    name: str
    id: int
    sent: dict[str, object]
    #: The metric summaries new points are counted from (``points=1`` only).
    summaries: dict[str, points.MetricSummary] = field(default_factory=dict)


@router.get("/projects/{project}/runs/{run}/stream", response_class=StreamingResponse)
async def stream_run(
    request: Request, project: str, run: str, points: PointsFlag = False
) -> Response:
    """``event: run`` with the run object (as ``GET …/runs/{run}``) whenever the run changes:
    new points or alerts, status, heartbeat, observation events and evaluation outcomes
    (``last_observation_id``). With ``points=1``, ``event: points`` first (see the module).
    A client without ``points=1`` fetches only what is new, e.g.
    ``…/points?metric=…&start=<last step seen + 1>``."""
    return await _stream(request, project, [run], points)


@router.get("/projects/{project}/stream", response_class=StreamingResponse)
async def stream_runs(
    request: Request,
    project: str,
    runs: RunNames,
    points: PointsFlag = False,
) -> Response:
    """``…/runs/{run}/stream`` for each named run (1-64) on one connection; every event's
    data names its run. An unknown run is a 404."""
    return await _stream(request, project, run_names(runs), points)


async def _stream(request: Request, project: str, names: list[str], with_points: bool) -> Response:
    state = app_state(request)
    followed = await run_in_threadpool(_start, state, project, names, with_points)

    async def events() -> AsyncIterator[bytes]:
        yield b"retry: 2000\n\n" + b"".join(_event("run", f.sent) for f in followed)
        quiet_since = time.monotonic()
        sent_at = -MESSAGE_INTERVAL_SECONDS
        ids = [f.id for f in followed]
        while True:
            await state.live.wait_any(ids)
            now = time.monotonic()
            await asyncio.sleep(max(GATHER_SECONDS, sent_at + MESSAGE_INTERVAL_SECONDS - now))
            news = await run_in_threadpool(_news, state, project, followed, with_points)
            if news:
                yield news
                quiet_since = sent_at = time.monotonic()
            elif time.monotonic() - quiet_since > KEEPALIVE_SECONDS:
                yield b": keepalive\n\n"
                quiet_since = time.monotonic()

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _event(name: str, data: object) -> bytes:
    return f"event: {name}\ndata: ".encode() + orjson.dumps(data) + b"\n\n"


def _start(state: AppState, project: str, names: list[str], with_points: bool) -> list[_Followed]:
    """Every named run as it is now (a 404 for an unknown one, before the stream starts)."""
    followed = []
    with state.database.connect() as connection:
        for name in names:
            row = catalog.get_run(connection, project, name)
            entry = _Followed(name, row.id, run_json(project, row))
            if with_points:
                entry.summaries = {s.name: s for s in points.list_summaries(connection, row.id)}
            followed.append(entry)
    return followed


def _news(state: AppState, project: str, followed: list[_Followed], with_points: bool) -> bytes:
    """The events for what changed since the stream last sent each run."""
    out = []
    with state.database.connect() as connection:
        if len(followed) == 1:
            rows = [catalog.get_run(connection, project, followed[0].name)]
        else:
            rows = catalog.list_runs(connection, project)
        current = {row.name: row for row in rows}
        for entry in followed:
            row = current.get(entry.name)
            if row is None:
                continue
            run = run_json(project, row)
            stored = _stored(run) != _stored(entry.sent)
            if not stored and _health(run) == _health(entry.sent):
                continue
            if stored and with_points:
                changed = _changed_metrics(connection, entry)
                if changed:
                    out.append(_event("points", {"run": entry.name, "metrics": changed}))
            out.append(_event("run", run))
            entry.sent = run
    return b"".join(out)


def _changed_metrics(connection: Connection, entry: _Followed) -> list[dict[str, object]]:
    """Each metric whose summary moved, with its points after the last step sent (at most
    ``LIVE_POINTS_MAX``; ``more`` says there are others, to be read from ``…/points``)."""
    changed = []
    summaries = points.list_summaries(connection, entry.id)
    for summary in summaries:
        before = entry.summaries.get(summary.name)
        if before is not None and _moved(before) == _moved(summary):
            continue
        after = before.last_step if before is not None else -1
        page = (
            points.read_page(
                connection, summary.id, after=None, start=after + 1, end=None, limit=LIVE_POINTS_MAX
            )
            if summary.last_step > after
            else []
        )
        changed.append(
            {
                **metric_json(summary),
                "points": [[p.step, p.value, p.time] for p in page],
                "more": len(page) == LIVE_POINTS_MAX,
            }
        )
    entry.summaries = {s.name: s for s in summaries}
    return changed


def _moved(summary: points.MetricSummary) -> object:
    """What a write changes in a summary: new points, corrections, NaN/inf steps."""
    return summary.count, summary.invalid_count, summary.corrected, summary.last_step


def _stored(run: dict[str, object]) -> object:
    """What a write changes: points, alerts and status move ``updated_at``; observation
    events and evaluation outcomes move ``last_observation_id``."""
    return run["updated_at"], run["last_observation_id"]


def _health(run: dict[str, object]) -> object:
    """Transport health ages with the clock; only a new heartbeat or state is news."""
    transport = run["transport"]
    assert isinstance(transport, dict)
    return transport.get("heartbeat_at"), transport.get("state")
