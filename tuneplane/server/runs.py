"""Creating runs and execution attempts: for project editors and owners (an API key or a
signed-in browser); who may is decided by the guard (``server/access.py``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Request
from starlette.responses import Response

from tuneplane.contract.errors import InvalidInput, Violation
from tuneplane.contract.ids import id_problem
from tuneplane.contract.json_body import decode_json_body
from tuneplane.contract.limits import RUN_CONFIG_MAX_BYTES
from tuneplane.contract.protocol import parse_attempt_start, parse_run_create
from tuneplane.server.access import caller_of
from tuneplane.server.body import read_body, read_json
from tuneplane.server.guard import GuardedRoute
from tuneplane.server.models import AttemptOut, RunOut
from tuneplane.server.responses import JSON
from tuneplane.server.run_json import run_json
from tuneplane.server.state import app_state
from tuneplane.store import catalog
from tuneplane.store.runs import ProjectSetup, create_or_resume, start_attempt_with_config

router = APIRouter(prefix="/api/v1", tags=["runs"], route_class=GuardedRoute)


@router.post("/projects/{project}/runs", response_model=RunOut, status_code=201)
async def create_run(request: Request, project: str) -> Response:
    """Create a run (201), or resume it (200). A different config for an existing run is
    refused (409): a run's config is fixed when it is created. ``display_name``, ``group``,
    ``tags`` and ``note`` are stored with a new run (``PATCH`` changes them later)."""
    problem = id_problem(project)
    if problem:
        raise InvalidInput((Violation("project", problem),))
    wanted = parse_run_create(await read_json(request, RUN_CONFIG_MAX_BYTES + 4096))
    state = app_state(request)
    database = state.database
    created = await database.write(
        create_or_resume,
        project,
        wanted.run,
        wanted.config,
        ProjectSetup(
            state.settings.default_visibility,
            caller_of(request).actor.user_id,
            wanted.project_display_name,
        ),
        wanted.meta,
    )
    with database.connect() as connection:
        row = catalog.get_run(connection, project, wanted.run)
    return JSON(run_json(project, row), status_code=201 if created else 200)


@router.post("/projects/{project}/runs/{run}/attempts", response_model=AttemptOut, status_code=201)
async def start_attempt(
    request: Request,
    project: str,
    run: str,
    idempotency_key: Annotated[
        str | None,
        Header(description="a retry with the same key returns the same attempt, new token"),
    ] = None,
) -> Response:
    """Start the run's next execution attempt and issue its ingest token (shown once). An
    optional body ``{"config": {...}}`` records the attempt's own config (a resumed run
    keeps its own; the run's answer lists the attempts whose config differs)."""
    if idempotency_key is not None and (problem := id_problem(idempotency_key)):
        raise InvalidInput((Violation("Idempotency-Key", problem),))
    raw = await read_body(request, RUN_CONFIG_MAX_BYTES + 4096)
    config = parse_attempt_start(decode_json_body(raw) if raw.strip() else None)
    state = app_state(request)
    with state.database.connect() as connection:
        run_id = catalog.get_run(connection, project, run).id
    issued = await state.database.write(
        start_attempt_with_config,
        run_id,
        state.settings.ingest_token_days,
        idempotency_key,
        config,
        key=run_id,
    )
    return JSON(
        {
            "project": project,
            "run": run,
            "attempt": issued.attempt,
            "token": issued.token,
            "expires_at": issued.expires_at,
            "ingest_url": state.settings.ingest_url,
        },
        status_code=201,
    )
