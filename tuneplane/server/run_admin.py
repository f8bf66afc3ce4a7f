"""Managing runs: ``PATCH`` a run's display name, group, tags and note (editors), and
``DELETE`` a run or a whole project (owners). Deletion answers at once (the name is free
and reads answer 404 from then on); the purger removes the rows and trajectory bodies in
the background (server/purger.py, store/purge.py)."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from starlette.responses import Response

from tuneplane.contract.run_meta import parse_patch
from tuneplane.server.access import permissions
from tuneplane.server.body import read_json
from tuneplane.server.guard import GuardedRoute
from tuneplane.server.models import Deleted, RunOut
from tuneplane.server.responses import JSON
from tuneplane.server.run_json import run_json
from tuneplane.server.state import app_state
from tuneplane.store import catalog, purge
from tuneplane.store.run_meta import apply_meta

router = APIRouter(prefix="/api/v1", tags=["runs"], route_class=GuardedRoute)

RUN = "/projects/{project}/runs/{run}"
#: A PATCH body: a note of 10,000 characters, escaped, and the rest.
PATCH_MAX_BYTES = 128 * 1024


@router.patch(RUN, response_model=RunOut)
async def update_run(request: Request, project: str, run: str) -> Response:
    """Change a run's ``display_name``, ``group``, ``tags`` (the whole list) or ``note``;
    an empty string (list) clears one, an absent field stays. The run's ID and config
    never change."""
    meta = parse_patch(await read_json(request, PATCH_MAX_BYTES))
    database = app_state(request).database
    with database.connect() as connection:
        run_id = catalog.get_run(connection, project, run).id
    await database.write(apply_meta, run_id, meta, time.time(), key=run_id)
    with database.connect() as connection:
        row = catalog.get_run(connection, project, run)
        you = permissions(request, connection, project, row.id)
    return JSON({**run_json(project, row), "you": you})


@router.delete(RUN, response_model=Deleted)
async def delete_run(request: Request, project: str, run: str) -> Response:
    """Delete a run and everything it holds: points, events, alerts, logs, outcomes,
    trajectories and their bodies, diagnoses, share links, attempts. From this answer on,
    the run is not found and its name can be used again; the data goes in the background."""
    state = app_state(request)
    with state.database.connect() as connection:
        run_id = catalog.get_run(connection, project, run).id
    await state.database.write(purge.mark_run_deleted, run_id, key=run_id)
    state.arena.forget(project, run)
    state.purge_wanted.set()
    return JSON({"project": project, "run": run, "deleted": True})


@router.delete("/projects/{project}", response_model=Deleted)
async def delete_project(request: Request, project: str) -> Response:
    """Delete a project with all its runs (as ``DELETE …/runs/{run}`` does each), its
    members and settings. The name can be used again at once."""
    state = app_state(request)
    with state.database.connect() as connection:
        project_id = catalog.project_id(connection, project)
    await state.database.write(purge.mark_project_deleted, project_id)
    state.arena.forget(project)
    state.purge_wanted.set()
    return JSON({"project": project, "run": None, "deleted": True})
