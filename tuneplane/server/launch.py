"""Launching jobs: the recipes, the readiness preview, submission and the jobs it made
(docs/launch.md). Who may call each route is in ``server/access.py``: recipes are read by
any signed-in caller, previews and launches need write access to the project."""

from __future__ import annotations

import asyncio
import secrets
import shutil
import uuid
from pathlib import Path as FilePath
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Request
from sqlalchemy import Connection
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from tuneplane.contract import environment
from tuneplane.contract.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    Unauthorized,
    Unavailable,
    Violation,
)
from tuneplane.contract.ids import id_problem
from tuneplane.contract.launch import (
    ACTIVE_JOB_STATES,
    CHECK_RECORD_KEY,
    LAUNCH_BODY_MAX_BYTES,
    LaunchInput,
    parse_launch,
)
from tuneplane.contract.limits import ROW_ID_MAX
from tuneplane.launch.engines.base import Engine, EngineUnavailable, JobSpec, StateChange
from tuneplane.launch.engines.local import LocalEngine
from tuneplane.launch.engines.slurm import SlurmEngine
from tuneplane.launch.readiness import Report, check_readiness, read_secrets
from tuneplane.launch.recipes import Recipe
from tuneplane.server.access import caller_of
from tuneplane.server.body import read_json
from tuneplane.server.responses import JSON
from tuneplane.server.settings import Settings
from tuneplane.server.state import AppState, app_state
from tuneplane.store import launch as store_launch
from tuneplane.store.launch import Launched

router = APIRouter(prefix="/api/v1", tags=["launch"])


def _signed_in(request: Request) -> None:
    """Recipes name commands, paths and environments of the server's machine: they are
    for the people who use it, not for anonymous readers of public projects."""
    actor = caller_of(request).actor
    if not (actor.signed_in or actor.is_admin):
        raise Unauthorized("authorization: sign in first (recipes are for signed-in users)")


def _recipe(request: Request, name: str) -> Recipe:
    recipe = app_state(request).recipes.get(name)
    if recipe is None:
        raise NotFound(f"recipe: no recipe named {name!r}")
    return recipe


@router.get("/recipes")
def list_recipes(request: Request) -> Response:
    """The server's recipes (read from TUNEPLANE_RECIPES_DIR at start), by name."""
    _signed_in(request)
    recipes = app_state(request).recipes
    return JSON([recipes[name].spec() for name in sorted(recipes)])


@router.get("/recipes/{recipe}")
def get_recipe(request: Request, recipe: str) -> Response:
    """One recipe: its command, parameter schema, source, runtime, resources and rules."""
    _signed_in(request)
    return JSON(_recipe(request, recipe).spec())


async def _read_launch(request: Request) -> tuple[LaunchInput, Recipe]:
    wanted = parse_launch(await read_json(request, LAUNCH_BODY_MAX_BYTES))
    return wanted, _recipe(request, wanted.recipe)


@router.post("/projects/{project}/launch/preview")
async def preview_launch(request: Request, project: str) -> Response:
    """The readiness checks of a launch, each passed, failed or not checked with its
    reason, and what is never checked. Submits nothing and allocates nothing; a git source
    is fetched into a temporary directory that is removed before the answer."""
    wanted, recipe = await _read_launch(request)
    report = await run_in_threadpool(_check, app_state(request), recipe, wanted, None)
    return JSON({**report.to_json(), "submitted": False})


def _check(state: AppState, recipe: Recipe, wanted: LaunchInput, keep: FilePath | None) -> Report:
    """The readiness checks against what the recipe's engine reports now (none when the
    server has no such engine: the recipe check fails). An engine that does not answer is
    a 503 naming it: a report without its word would pass what was not checked."""
    engine = state.engines.get(recipe.engine)
    try:
        capacity = None if engine is None else engine.capacity()
    except EngineUnavailable as exc:
        raise Unavailable(f"engine: the {recipe.engine} engine did not answer: {exc}") from exc
    return check_readiness(recipe, wanted.parameters, wanted.config, capacity, keep)


def check_record(report: Report, parent: str | None = None) -> dict[str, Any]:
    """What a submission keeps in its run's config: evidence of that decision, and the
    run it re-runs (``parent``, when it does)."""
    shown = report.to_json()
    record = {
        "recipe": report.recipe.name,
        "engine": report.recipe.engine,
        "checked_at": report.checked_at,
        "checks": shown["checks"],
        "not_checked": shown["not_checked"],
        "fingerprint": shown["fingerprint"],
    }
    return record if parent is None else {**record, "parent": parent}


def _own_url(settings: Settings) -> str:
    """Where a job on this machine reaches this server."""
    if settings.ingest_url:
        return settings.ingest_url.rstrip("/")
    host = {"0.0.0.0": "127.0.0.1", "::": "[::1]"}.get(settings.host, settings.host)  # noqa: S104
    host = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{host}:{settings.port}{settings.root_path}"


def _job_spec(
    state: AppState, project: str, report: Report, launched: Launched, checkout: FilePath | None
) -> JobSpec:
    assert launched.token is not None, "a new job's attempt has its token"
    assert report.workdir is not None, "a ready report has its source"
    recipe = report.recipe
    attempt_env = {
        environment.JOB_ENDPOINT: _own_url(state.settings),
        environment.JOB_RUN_ID: f"{project}/{launched.run}",
        environment.JOB_TOKEN: launched.token,
        environment.JOB_ATTEMPT: str(launched.attempt),
        environment.JOB_NEXT_STEP: "0",
    }
    log = state.settings.data_dir / "launch" / "logs" / f"job-{launched.job_id}.log"
    return JobSpec(
        job_id=launched.job_id,
        command=report.command,
        project=project,
        run=launched.run,
        cwd=report.workdir,
        attempt_env=attempt_env,
        python_env=recipe.runtime.python,
        cpus=recipe.resources.cpus,
        gpus=recipe.resources.gpus,
        memory_gb=recipe.resources.memory_gb,
        log_path=log,
        checkout=checkout,
        time_minutes=recipe.resources.time_minutes,
        secrets=read_secrets(recipe),
    )


def _set_state(connection: Connection, change: StateChange) -> None:
    store_launch.set_state(
        connection, change.job_id, change.state, change.exit_code, change.reason, change.engine_id
    )


async def record_changes(state: AppState, changes: list[StateChange]) -> None:
    for change in changes:
        await state.database.write(_set_state, change)


def _refused(report: Report) -> InvalidInput:
    failed = [
        Violation(f"checks.{c.name}", c.reason) for c in report.checks if c.status == "failed"
    ]
    return InvalidInput(tuple(failed))


async def _submit(
    request: Request, project: str, wanted: LaunchInput, recipe: Recipe, key: str | None
) -> tuple[Report, Launched]:
    state = app_state(request)
    checkout = None
    if recipe.source.git is not None:
        checkout = state.settings.data_dir / "launch" / "checkouts" / uuid.uuid4().hex
    report = await run_in_threadpool(_check, state, recipe, wanted, checkout)
    if not report.ready:  # the authoritative gates, whatever a preview said
        _remove(checkout)  # a checkout kept for a job that will not run
        raise _refused(report)
    submission = store_launch.Submission(
        project=project,
        run=wanted.run or f"{recipe.name[:100]}-{secrets.token_hex(4)}",
        recipe=recipe.name,
        engine=recipe.engine,
        config={
            "parameters": report.parameters,
            "config": report.config,
            CHECK_RECORD_KEY: check_record(report, wanted.parent),
        },
        cpus=recipe.resources.cpus,
        gpus=recipe.resources.gpus,
        request_key=key,
        created_by=caller_of(request).actor.user_id,
        token_days=state.settings.ingest_token_days,
        parent=wanted.parent,
    )
    policy = store_launch.Admission(state.settings.launch_max_jobs, state.settings.launch_max_gpus)
    try:
        launched = await state.database.write(store_launch.submit, submission, policy)
    except BaseException:
        _remove(checkout)
        raise
    if launched.created:
        engine = state.engines[recipe.engine]  # a ready report: the server has it
        spec = _job_spec(state, project, report, launched, checkout)
        await run_in_threadpool(engine.submit, spec)
        await record_changes(state, await run_in_threadpool(_poll, engine))
    else:
        _remove(checkout)  # a retry that lost the race: the first one's job stands
    return report, launched


def _remove(path: FilePath | None) -> None:
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)


JobId = Annotated[int, Path(ge=1, le=ROW_ID_MAX, description="the job's id")]
IdempotencyKey = Annotated[
    str | None,
    Header(
        description="a retried submission with the same key answers the job the first "
        "made, and starts nothing"
    ),
]


@router.post("/projects/{project}/launch", status_code=201)
async def launch(
    request: Request, project: str, idempotency_key: IdempotencyKey = None
) -> Response:
    """Run every readiness check again, admit the job (TUNEPLANE_LAUNCH_MAX_JOBS and
    _MAX_GPUS per project), create its run, with the check record in its config, and its
    attempt, and submit it to the recipe's engine (201). A failed check is a 422 naming
    each (``checks.<name>``), and nothing is stored or started. The same Idempotency-Key
    again answers the first submission's job (200) without checking or starting anything."""
    if idempotency_key is not None and (problem := id_problem(idempotency_key)):
        raise InvalidInput((Violation("Idempotency-Key", problem),))
    wanted, recipe = await _read_launch(request)
    state = app_state(request)
    if idempotency_key is not None:
        with state.database.connect() as connection:
            found = store_launch.find_job(connection, project, idempotency_key)
        if found is not None:
            return JSON({"job": found, "created": False}, status_code=200)
    report, launched = await _submit(request, project, wanted, recipe, idempotency_key)
    with state.database.connect() as connection:
        job = store_launch.get_job(connection, project, launched.job_id)
    answer = {"job": job, "created": launched.created}
    if launched.created:
        answer["check_record"] = check_record(report, wanted.parent)
    return JSON(answer, status_code=201 if launched.created else 200)


RunFilter = Annotated[
    str | None, Query(max_length=128, description="only the jobs of this run (its ID)")
]


@router.get("/projects/{project}/launch/jobs")
def list_jobs(request: Request, project: str, run: RunFilter = None) -> Response:
    """The project's launched jobs (``?run=``: one run's), newest first: the engine's
    state of each, beside its attempt's own status."""
    with app_state(request).database.connect() as connection:
        return JSON(store_launch.list_jobs(connection, project, run))


@router.post("/projects/{project}/launch/jobs/{job_id}/cancel")
async def cancel_job(request: Request, project: str, job_id: JobId) -> Response:
    """Cancel a job: a queued one at once, a running one by SIGTERM to its runner, which
    passes it to the command and reports the attempt cancelled (SIGKILL after a grace)."""
    state = app_state(request)
    with state.database.connect() as connection:
        job = store_launch.get_job(connection, project, job_id)
    if job["state"] not in ACTIVE_JOB_STATES:
        raise Conflict(f"job: {job_id} has ended already ({job['state']})")
    engine = state.engines.get(job["engine"])
    if engine is None:
        raise Conflict(f"job: {job_id} runs on the {job['engine']} engine, not configured here")
    try:
        cancelled = await run_in_threadpool(engine.cancel, job_id)
    except EngineUnavailable as exc:
        raise Unavailable(f"engine: the {engine.name} engine did not answer: {exc}") from exc
    if not cancelled:
        raise Conflict(f"job: {job_id} is not run by this server process")
    await record_changes(state, await run_in_threadpool(_poll, engine))
    with state.database.connect() as connection:
        return JSON(store_launch.get_job(connection, project, job_id))


def open_engines(settings: Settings) -> dict[str, Engine]:
    """The engines this server drives, by name: local always, the others when the
    settings configure them."""
    engines: dict[str, Engine] = {"local": LocalEngine()}
    if settings.slurm is not None:
        engines["slurm"] = SlurmEngine(settings.slurm.conf, settings.slurm.partition)
    if settings.ray_address is not None:
        # Imported only here: the ray package is an extra, and heavy to import.
        from tuneplane.launch.engines.ray import RayEngine

        engines["ray"] = RayEngine(settings.ray_address)
    return engines


async def watch_jobs(state: AppState, interval: float = 0.5) -> None:
    """Record the engines' states of the jobs as they change, for the app's life. First,
    each engine is handed the jobs the store holds pending or running on it: local ones
    belong to a server process that stopped without ending them (they are lost), while an
    engine whose jobs outlive the server (Slurm) finds them again."""
    for engine in state.engines.values():
        with state.database.connect() as connection:
            left = store_launch.active_jobs(connection, engine.name)
        await record_changes(state, await asyncio.to_thread(_recover, engine, left))
    while True:
        await asyncio.sleep(interval)
        for engine in state.engines.values():
            await record_changes(state, await asyncio.to_thread(_poll, engine))


def _recover(engine: Engine, jobs: dict[int, str | None]) -> list[StateChange]:
    try:
        return engine.recover(jobs)
    except EngineUnavailable:
        return []  # its jobs stay as recorded; polling finds them when it answers


def _poll(engine: Engine) -> list[StateChange]:
    try:
        return engine.poll()
    except EngineUnavailable:
        return []  # unknown for now is not an outcome: the next poll asks again


def stop_jobs(state: AppState) -> None:
    """The server stops: its local jobs stop with it, and the store says so."""
    for engine in state.engines.values():
        for change in engine.stop():
            state.database.run_write(_set_state, change)
