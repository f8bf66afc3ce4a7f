"""Matched benchmark launches (docs/launch.md): two runs' registered exports, one
evaluation recipe, an optional sample limit. The preview checks both sides' launches and
shows their protocol digests, equal by construction; each side starts as its own job
(starting one never starts the other), through the same gates, admission and check record
as any launch; the pair's answer links the matched view once both have finished."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from tuneplane.contract.errors import InvalidInput, NotFound, Violation
from tuneplane.contract.ids import id_problem
from tuneplane.contract.launch import LAUNCH_BODY_MAX_BYTES, LaunchInput
from tuneplane.contract.matched_launch import (
    LIMIT_PARAMETER,
    MATCHED_CONFIG_KEY,
    MODEL_PARAMETER,
    PAIR_PREFIX,
    PROTOCOL_COVERS,
    SIDES,
    MatchedInput,
    Side,
    new_pair,
    parse_matched,
    protocol_digest,
    side_run,
)
from tuneplane.launch.readiness import Report
from tuneplane.launch.recipes import Recipe
from tuneplane.server.body import read_json
from tuneplane.server.launch import _check, _submit, check_record
from tuneplane.server.responses import JSON
from tuneplane.server.state import AppState, app_state
from tuneplane.store import catalog, evaluation
from tuneplane.store import launch as store_launch
from tuneplane.store.exports import find_export

router = APIRouter(prefix="/api/v1", tags=["launch"])
MATCHED = "/projects/{project}/launch/matched"


def _recipe(state: AppState, wanted: MatchedInput) -> Recipe:
    recipe = state.recipes.get(wanted.recipe)
    if recipe is None:
        raise NotFound(f"recipe: no recipe named {wanted.recipe!r}")
    properties = recipe.parameters.get("properties", {})
    problems = []
    if recipe.kind != "evaluation":
        problems.append(
            Violation("recipe", f"{recipe.name} is a {recipe.kind} recipe, not a benchmark")
        )
    if MODEL_PARAMETER not in properties:
        problems.append(
            Violation(
                "recipe", f"{recipe.name} takes no {MODEL_PARAMETER} parameter for the export"
            )
        )
    if wanted.limit is not None and LIMIT_PARAMETER not in properties:
        problems.append(Violation("limit", f"{recipe.name} takes no {LIMIT_PARAMETER} parameter"))
    if problems:
        raise InvalidInput(tuple(problems))
    return recipe


def _side_launch(
    state: AppState, project: str, wanted: MatchedInput, pair: str, side: Side
) -> tuple[LaunchInput, dict[str, Any]]:
    """One side's launch: the export as the model, the limit, and the matched block."""
    choice = wanted.sides[side]
    with state.database.connect() as connection:
        run_id = catalog.get_run(connection, project, choice.run).id
        export = find_export(connection, run_id, choice.export)
    if export is None:
        raise NotFound(
            f"{side}.export: {project}/{choice.run} registered no export {choice.export!r}"
        )
    parameters = {**wanted.parameters, MODEL_PARAMETER: export["uri"]}
    if wanted.limit is not None:
        parameters[LIMIT_PARAMETER] = wanted.limit
    block = {"pair": pair, "side": side, "run": choice.run, "export": export}
    config = {**wanted.config, MATCHED_CONFIG_KEY: block}
    return LaunchInput(wanted.recipe, parameters, config, side_run(pair, side)), export


def _shown(
    report: Report, export: dict[str, Any], run: str, pair: str, side: Side
) -> dict[str, Any]:
    return {
        "run": run,
        "export": export,
        "job_run": side_run(pair, side),
        "protocol": protocol_digest(report.recipe.spec(), report.parameters, report.config),
        "report": report.to_json(),
    }


@router.post(MATCHED + "/preview")
async def preview_matched(request: Request, project: str) -> Response:
    """Both sides' readiness checks and their protocol digests (equal by construction:
    only the model differs), and the pair's ID to start each side with. Starts nothing."""
    wanted = parse_matched(await read_json(request, LAUNCH_BODY_MAX_BYTES), starting=False)
    state = app_state(request)
    recipe = _recipe(state, wanted)
    pair = wanted.pair or new_pair()
    sides = {}
    for side in SIDES:
        launch, export = _side_launch(state, project, wanted, pair, side)
        report = await run_in_threadpool(_check, state, recipe, launch, None)
        sides[side] = _shown(report, export, wanted.sides[side].run, pair, side)
    protocols = {shown["protocol"] for shown in sides.values()}
    return JSON(
        {
            "pair": pair,
            "recipe": recipe.name,
            "ready": all(shown["report"]["ready"] for shown in sides.values()),
            "same_protocol": len(protocols) == 1,
            "protocol_covers": PROTOCOL_COVERS,
            "sides": sides,
            "submitted": False,
        }
    )


@router.post(MATCHED, status_code=201)
async def start_matched_side(request: Request, project: str) -> Response:
    """Start one side (``side``) of the pair (``pair``, from the preview) as its own job:
    every readiness check again, admission, its run ``<pair>-<side>`` with the check
    record and the matched block in its config. The other side is not started. Starting
    a side again answers its job (200) and starts nothing."""
    wanted = parse_matched(await read_json(request, LAUNCH_BODY_MAX_BYTES), starting=True)
    assert wanted.pair is not None, "parse_matched's rule"
    assert wanted.side is not None, "parse_matched's rule"
    state = app_state(request)
    recipe = _recipe(state, wanted)
    key = side_run(wanted.pair, wanted.side)
    with state.database.connect() as connection:
        found = store_launch.find_job(connection, project, key)
    if found is not None:
        return JSON({"job": found, "created": False}, status_code=200)
    launch, _export = _side_launch(state, project, wanted, wanted.pair, wanted.side)
    report, launched = await _submit(request, project, launch, recipe, key)
    with state.database.connect() as connection:
        job = store_launch.get_job(connection, project, launched.job_id)
    answer: dict[str, Any] = {"job": job, "created": launched.created}
    if launched.created:
        answer["check_record"] = check_record(report)
    return JSON(answer, status_code=201 if launched.created else 200)


@router.get(MATCHED + "/{pair}")
def read_pair(request: Request, project: str, pair: str) -> Response:
    """The pair's two sides: each side's job (null until started) and the evaluation
    rounds its run reported; once both jobs succeeded, ``matched`` pairs their rounds by
    task, each with the address of its matched view."""
    if id_problem(pair) is not None or not pair.startswith(PAIR_PREFIX):
        raise NotFound(f"pair: {pair!r} is no pair's ID ({PAIR_PREFIX}…)")
    with app_state(request).database.connect() as connection:
        sides = {side: _side_state(connection, project, pair, side) for side in SIDES}
    finished = all(
        s["job"] is not None and s["job"]["state"] == "succeeded" for s in sides.values()
    )
    matched = _matched(project, sides) if finished else []
    return JSON({"pair": pair, "sides": sides, "finished": finished, "matched": matched})


def _side_state(connection: Any, project: str, pair: str, side: Side) -> dict[str, Any]:
    run = side_run(pair, side)
    job = store_launch.find_job(connection, project, run)
    rounds: list[dict[str, Any]] = []
    attempt = None
    if job is not None:
        run_id = catalog.get_run(connection, project, run).id
        attempts = evaluation.execution_attempts(connection, run_id)
        attempt = attempts[-1] if attempts else None
        for state in [] if attempt is None else evaluation.rounds(connection, run_id, attempt):
            task = state.declaration.task_name if state.declaration is not None else None
            rounds.append({"round_id": state.round_id, "task": task})
    return {"run": run, "job": job, "attempt": attempt, "rounds": rounds}


def _matched(project: str, sides: dict[Side, dict[str, Any]]) -> list[dict[str, Any]]:
    """Rounds of the same task on both sides, each with its matched view's address."""
    left, right = sides["left"], sides["right"]
    by_task = {r["task"]: r["round_id"] for r in right["rounds"] if r["task"] is not None}
    pairs = []
    for found in left["rounds"]:
        other = by_task.get(found["task"])
        if found["task"] is None or other is None:
            continue
        left_spec = f"{project}/{left['run']}/{found['round_id']}"
        right_spec = f"{project}/{right['run']}/{other}"
        url = (
            f"/matched?left={left_spec}&left_attempt={left['attempt']}"
            f"&right={right_spec}&right_attempt={right['attempt']}"
        )
        pairs.append({"task": found["task"], "left": left_spec, "right": right_spec, "url": url})
    return pairs
