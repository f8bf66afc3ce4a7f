"""The Trackio protocol: tuneplane answers a Trackio client (0.40.0 to 0.43.0) as its
self-hosted server.

``TRACKIO_SERVER_URL=http://tuneplane:8000 TRACKIO_WRITE_TOKEN=tpk_…`` and unchanged
``trackio.init/log/alert/finish`` code (or ``report_to="trackio"``) log into tuneplane. The
write token is a tuneplane API key, held to the access model like any other use of it: a
project the key's account may not write is refused (403); a new one is created as the run
API creates it (``TUNEPLANE_DEFAULT_VISIBILITY``, owned by the account). The Arena secret is
not a write token: it authorizes ``POST /ingest`` alone, and owns no project.

Refusals keep the client's data: it keeps a failed call on its disk, says so when the run
finishes, and sends it again with the same event IDs. ``GET /version`` answers whoever asks,
because a client it fails falls back to Gradio and never reaches these routes to hear why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple, TypeVar

from fastapi import APIRouter, Request
from sqlalchemy import Connection
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from tuneplane.contract.access import Actor, decide
from tuneplane.contract.arena import ArenaBatch
from tuneplane.contract.environment import API_KEY_PREFIX
from tuneplane.contract.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    Unauthorized,
    Violation,
)
from tuneplane.contract.json_body import decode_json_body
from tuneplane.contract.run_meta import RunMeta
from tuneplane.contract.trackio import (
    MEDIA_RULE,
    TRACKIO_API_VERSION,
    TRACKIO_BODY_MAX_BYTES,
    TRACKIO_RELEASE,
    WRITE_TOKEN_HEADER,
    JSONObject,
    ParsedCall,
    RunWrite,
    call_arguments,
    chunked,
    config_group,
    entries_of,
    name_argument,
    parse_bulk_alert,
    parse_bulk_log,
    parse_bulk_log_system,
    run_key,
)
from tuneplane.contract.version import __version__
from tuneplane.server.access import api_key_actor
from tuneplane.server.body import read_body
from tuneplane.server.guard import GuardedRoute
from tuneplane.server.responses import JSON
from tuneplane.server.state import AppState, app_state
from tuneplane.store import access, catalog, points, scalars
from tuneplane.store.runs import ProjectSetup, create_or_resume, mark_end_unknown

router = APIRouter(tags=["trackio"], route_class=GuardedRoute)
T = TypeVar("T")

_TOKEN_HELP = "set TRACKIO_WRITE_TOKEN (or write_token in the server URL) to a tuneplane API key"  # noqa: S105


def _actor(connection: Connection, request: Request) -> Actor:
    """The holder of the call's write token: an API key, personal or the admin key."""
    token = request.headers.get(WRITE_TOKEN_HEADER, "").strip()
    if not token:
        raise Unauthorized(f"{WRITE_TOKEN_HEADER}: required; {_TOKEN_HELP} ({API_KEY_PREFIX}…)")
    actor = api_key_actor(connection, token)
    if actor is None:
        raise Unauthorized(
            f"{WRITE_TOKEN_HEADER}: not a valid tuneplane API key (unknown, revoked, or not "
            f"{API_KEY_PREFIX}…); {_TOKEN_HELP}"
        )
    return actor


def _require_write(connection: Connection, actor: Actor, project: str) -> None:
    """Writing into ``project``: ``write-run`` where it exists, ``create-project`` where not.
    A project the key may not see is a 403 here, not the 404 of the rest of the API: the
    Trackio client reads any 404 as "this server lacks the route" and says so instead."""
    facts = access.project_facts(connection, actor, project)
    decision = decide(actor, "create-project" if facts is None else "write-run", facts)
    if not decision.allowed:
        reason = decision.reason if decision.status != 404 else "it is private to its members"
        raise Forbidden(f"project {project!r}: this API key may not write to it ({reason})")


def _may_read(connection: Connection, actor: Actor, project: str) -> bool:
    facts = access.project_facts(connection, actor, project)
    return facts is not None and decide(actor, "read-run", facts).allowed


async def _read(request: Request, fn: Callable[..., T], *args: Any) -> T:
    """``fn(connection, actor, *args)`` on a worker thread, with the call's caller."""

    def work() -> T:
        with app_state(request).database.connect() as connection:
            return fn(connection, _actor(connection, request), *args)

    return await run_in_threadpool(work)


async def _arguments(request: Request, names: Sequence[str]) -> JSONObject:
    body = await read_body(request, TRACKIO_BODY_MAX_BYTES)
    return call_arguments(decode_json_body(body), names)


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat()


@router.get("/version")
async def version() -> Response:
    """What a Trackio client asks first: ``api_version`` 1 means "speak HTTP to me".
    ``writes_paused`` (0.43.0's servers add it) is false: tuneplane never pauses writes for an
    upgrade, so a Trackio tool that waits for it to clear does not wait."""
    return JSON(
        {
            "version": TRACKIO_RELEASE,
            "api_version": TRACKIO_API_VERSION,
            "api_transport": "http",
            "mcp_enabled": False,
            "mcp_path": None,
            "writes_paused": False,
            "server": f"tuneplane {__version__}",
        }
    )


def _runs(connection: Connection, actor: Actor, project: str) -> list[JSONObject]:
    if not _may_read(connection, actor, project):
        return []  # hidden or missing: the same answer, and a new run is made on write
    # A run is named by its name here, so Trackio's run id is the name too.
    return [
        {"id": row.name, "name": row.display_name or row.name, "created_at": _iso(row.created_at)}
        for row in catalog.list_runs(connection, project)
    ]


@router.post("/api/get_runs_for_project")
async def get_runs_for_project(request: Request) -> Response:
    """The project's runs, as ``trackio.init`` looks for the one to resume."""
    arguments = await _arguments(request, ("project",))
    project = name_argument(arguments, "project")
    return JSON({"data": await _read(request, _runs, project)})


def _summary(connection: Connection, actor: Actor, project: str, run: str) -> JSONObject:
    empty = {"project": project, "run": run, "run_id": run, "num_logs": 0}
    if not _may_read(connection, actor, project):
        return {**empty, "metrics": [], "config": None, "last_step": None}
    try:
        row = catalog.get_run(connection, project, run)
    except NotFound:
        return {**empty, "metrics": [], "config": None, "last_step": None}
    names = [summary.name for summary in points.list_summaries(connection, row.id)]
    return {
        **empty,
        "num_logs": row.point_count,
        "metrics": names,
        "config": row.config,
        "last_step": row.last_step,
    }


@router.post("/api/get_run_summary")
async def get_run_summary(request: Request) -> Response:
    """A run's summary: a resumed ``trackio.init`` continues after its ``last_step``."""
    arguments = await _arguments(request, ("project", "run", "run_id"))
    project = name_argument(arguments, "project")
    run = name_argument(arguments, "run_id", required=False) or name_argument(arguments, "run")
    return JSON({"data": await _read(request, _summary, project, run)})


def _writable(connection: Connection, actor: Actor, projects: set[str]) -> Actor:
    for project in sorted(projects):
        _require_write(connection, actor, project)
    return actor


class _Stored(NamedTuple):
    exists: bool
    config: JSONObject | None = None
    last_step: int | None = None
    status: str | None = None


def _stored_configs(
    connection: Connection, _actor: Actor, keys: list[tuple[str, str]]
) -> dict[tuple[str, str], _Stored]:
    """What each run holds already."""
    found: dict[tuple[str, str], _Stored] = {}
    for project, run in keys:
        try:
            row = catalog.get_run(connection, project, run)
        except NotFound:
            found[project, run] = _Stored(exists=False)
        else:
            found[project, run] = _Stored(True, row.config, row.last_step, row.status)
    return found


async def _open_run(state: AppState, actor: Actor, write: RunWrite, call: ParsedCall) -> None:
    """Create the run (and its project, set up as the run API does) with its config. A run
    that exists keeps the config it has: Trackio sends one on every ``init``, a resumed
    run's carrying a new ``_Created`` time, and a refusal would block its points forever."""
    setup = ProjectSetup(
        state.settings.default_visibility, actor.user_id, write.project_display_name
    )
    key = (write.project, write.run)
    meta = RunMeta(display_name=write.display_name, group=config_group(write.config))
    try:
        await state.database.write(create_or_resume, *key, write.config, setup, meta, key=key)
    except Conflict:
        await state.database.write(create_or_resume, *key, None, setup, meta, key=key)
        call.drop(write.config_path, "the run exists with another config, which it keeps")


async def _store(request: Request, call: ParsedCall) -> Response:
    state = app_state(request)
    actor = await _read(request, _writable, {project for project, _ in call.runs})
    known = await _read(request, _stored_configs, list(call.runs))
    new = duplicate = created = 0
    for key, write in call.runs.items():
        stored = known[key]
        if not stored.exists:
            await _open_run(state, actor, write, call)
            created += 1
        elif write.config is not None and write.config != stored.config:
            call.drop(write.config_path, "the run exists with another config, which it keeps")
        if stored.status is None:
            # No Trackio release says when a run ends: finish() only sends what is queued.
            await state.database.write(mark_end_unknown, *key, key=key)
        for logs, alerts in chunked(write):
            outcome = await state.arena.ingest(ArenaBatch(*key, None, tuple(logs), tuple(alerts)))
            new += outcome.logs_new + outcome.alerts_new
            duplicate += outcome.logs_duplicate + outcome.alerts_duplicate
            if outcome.points or outcome.alerts_new:
                state.live.notify(outcome.run.id)
        new += await _store_invalid(request, write)
    data = {"new": new, "duplicate": duplicate, "runs_created": created}
    return JSON({"data": {**data, "dropped": call.dropped_json()}})


def _run_id(connection: Connection, _actor: Actor, project: str, run: str) -> int:
    return catalog.get_run(connection, project, run).id


async def _store_invalid(request: Request, write: RunWrite) -> int:
    """The call's NaN and infinities of one run, stored as the SDK's are (a re-sent one is
    the same point again) and judged by the run's alert rules; how many."""
    batch = write.invalid_batch()
    if batch is None:
        return 0
    state = app_state(request)
    run_id = await _read(request, _run_id, write.project, write.run)
    await state.database.write(scalars.write_scalars, run_id, batch, key=(write.project, write.run))
    state.live.notify(run_id)
    state.alerts.after_scalars(write.project, run_id, batch)
    return len(write.invalid)


@router.post("/api/bulk_log")
async def bulk_log(request: Request) -> Response:
    """Metrics of one or more runs; a resent ``log_id`` is a duplicate that changes nothing."""
    arguments = await _arguments(request, ("logs", "hf_token"))
    return await _store(request, parse_bulk_log(entries_of(arguments, "logs")))


@router.post("/api/bulk_log_system")
async def bulk_log_system(request: Request) -> Response:
    """System metrics, as ``system/…`` series at the step each run has reached."""
    arguments = await _arguments(request, ("logs", "hf_token"))
    entries = entries_of(arguments, "logs")
    keys = sorted({key for key in map(run_key, entries) if key is not None})
    known = await _read(request, _stored_configs, keys)
    steps = {key: stored.last_step or 0 for key, stored in known.items()}
    return await _store(request, parse_bulk_log_system(entries, steps))


@router.post("/api/bulk_alert")
async def bulk_alert(request: Request) -> Response:
    """Alerts; a resent ``alert_id`` is a duplicate that changes nothing."""
    arguments = await _arguments(request, ("alerts", "hf_token"))
    return await _store(request, parse_bulk_alert(entries_of(arguments, "alerts")))


async def _refuse_media(request: Request, field: str) -> Response:
    await _read(request, lambda _connection, actor: actor)  # a bad token hears that first
    raise InvalidInput((Violation(field, MEDIA_RULE),))


@router.post("/api/upload")
async def upload(request: Request) -> Response:
    """Media files: refused (422). The client keeps them on its disk and logs on."""
    return await _refuse_media(request, "files")


@router.post("/api/bulk_upload_media")
async def bulk_upload_media(request: Request) -> Response:
    """Media entries: refused (422), as ``/api/upload``."""
    return await _refuse_media(request, "uploads")
