"""``/api/v1/ingest/*``: what the runner and the SDK send, authorized by an ingest token
scoped to one run and one execution attempt."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from tuneplane.contract.arena import parse_alerts
from tuneplane.contract.limits import INGEST_BODY_MAX_BYTES, RUN_CONFIG_MAX_BYTES
from tuneplane.contract.observations import parse_observations
from tuneplane.contract.protocol import (
    parse_attempt_config,
    parse_heartbeat,
    parse_log_lines,
    parse_scalars,
    parse_status,
)
from tuneplane.server.auth import require_ingest_token
from tuneplane.server.body import read_json
from tuneplane.server.diagnoses import start_diagnosis
from tuneplane.server.models import LogResult, ScalarResult
from tuneplane.server.responses import JSON
from tuneplane.server.state import app_state
from tuneplane.store import alert_episodes, arena, observations, runlogs, runs, scalars
from tuneplane.store.credentials import TokenScope, write_as

router = APIRouter(prefix="/api/v1/ingest", tags=["ingest"])
Scope = Annotated[TokenScope, Depends(require_ingest_token)]


@router.post("/scalars", response_model=ScalarResult)
async def ingest_scalars(request: Request, scope: Scope) -> Response:
    """Columnar points per series (at most 2,048); a step reported again is a correction."""
    batch = parse_scalars(await read_json(request, INGEST_BODY_MAX_BYTES), now=time.time())
    state = app_state(request)
    outcome = await state.database.write(
        write_as, scope, scalars.write_scalars, scope.run_id, batch, key=scope.run_id
    )
    state.live.notify(scope.run_id)
    state.alerts.after_scalars(scope.project, scope.run_id, batch)
    return JSON(outcome.to_json())


@router.post("/logs", response_model=LogResult)
async def ingest_logs(request: Request, scope: Scope) -> Response:
    """Output lines of the attempt; an (attempt, seq) already stored is a duplicate."""
    lines = parse_log_lines(await read_json(request, INGEST_BODY_MAX_BYTES))
    state = app_state(request)
    new = await state.database.write(
        write_as, scope, runlogs.write_lines, scope, lines, key=scope.run_id
    )
    if new:
        state.live.notify(scope.run_id)
    return JSON({"new": new, "duplicate": len(lines) - new})


@router.post("/status")
async def ingest_status(request: Request, scope: Scope) -> Response:
    """The attempt's lifecycle: running, then succeeded, failed or cancelled (final)."""
    report = parse_status(await read_json(request, 4096))
    state = app_state(request)
    # A final status that arrived late ends the heartbeat watch from the time it names.
    await state.database.write(
        write_as, scope, alert_episodes.status_reported, scope, report, key=scope.run_id
    )
    state.live.notify(scope.run_id)
    if report.status == "failed":
        start_diagnosis(state, scope.run_id, scope.attempt, "failed")
    return JSON({"status": report.status, "exit_code": report.exit_code})


@router.post("/observations")
async def ingest_observations(request: Request, scope: Scope) -> Response:
    """Up to 32 observation events (events, distributions, health snapshots, population
    declarations, trial results); an event_id already stored is a duplicate."""
    batch = parse_observations(await read_json(request, INGEST_BODY_MAX_BYTES))
    state = app_state(request)
    outcome = await state.database.write(
        write_as, scope, observations.write_observations, scope, batch, key=scope.run_id
    )
    if outcome.new:
        state.live.notify(scope.run_id)
        state.alerts.after_observations(scope.project, scope.run_id, scope.attempt, batch)
    return JSON(outcome.to_json())


@router.post("/heartbeat")
async def ingest_heartbeat(request: Request, scope: Scope) -> Response:
    """Transport health of the sender: queued, sent, dropped, failed sends, occupancy."""
    health = parse_heartbeat(await read_json(request, 4096))
    state = app_state(request)
    await state.database.write(
        write_as, scope, runs.record_heartbeat, scope, health, key=scope.run_id
    )
    state.live.notify(scope.run_id)
    return JSON({"ok": True})


@router.post("/alerts")
async def ingest_alerts(request: Request, scope: Scope) -> Response:
    """Up to 32 alerts (``alert_id``, ``title``, ``text``, ``level``, ``step``) of the run,
    stored as the Arena route stores them; an ``alert_id`` already stored is a duplicate."""
    alerts = parse_alerts(await read_json(request, INGEST_BODY_MAX_BYTES))
    state = app_state(request)
    new = await state.database.write(
        write_as, scope, arena.write_alerts, scope.run_id, alerts, key=scope.run_id
    )
    if new:
        state.live.notify(scope.run_id)
    return JSON({"new": new, "duplicate": len(alerts) - new})


@router.post("/config")
async def ingest_config(request: Request, scope: Scope) -> Response:
    """The config the attempt's training code declared once it started (``init(config=…)``
    or a Trainer's arguments under ``tuneplane run``): written once per attempt (the same
    again is fine, another is a 409), and the run's config while the run has none. With
    ``"add": true``, keys added to it (``run.config.update()``): a key already there with
    another value is a 409 naming it."""
    config = parse_attempt_config(await read_json(request, RUN_CONFIG_MAX_BYTES + 4096))
    state = app_state(request)
    recorded = await state.database.write(
        write_as, scope, runs.record_attempt_config, scope, config, key=scope.run_id
    )
    state.live.notify(scope.run_id)
    return JSON({"attempt": scope.attempt, "recorded": recorded})
