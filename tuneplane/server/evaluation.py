"""The Validation tab's API: observation events, evaluation rounds with honest counts and
rates, trial pages with retry histories, and matched evidence between two runs.

A round is (run, execution attempt, round_id). Every evaluation read takes ``attempt`` (the
execution attempt; by default the latest that reported outcomes) and answers which
attempts have rounds. A round that does not exist is a 404 on every route."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from sqlalchemy import Connection
from starlette.responses import Response

from tuneplane.contract.errors import InvalidInput, NotFound, Violation
from tuneplane.contract.limits import RECENT_OBSERVATIONS
from tuneplane.contract.observations import OBSERVATION_TYPES, TRIAL_STATUSES
from tuneplane.evaluation.matched import Difference, matched_difference, transitions
from tuneplane.evaluation.outcomes import (
    Mean,
    Missing,
    Rate,
    RoundCounts,
    mean_reward,
    not_yet_reported,
    reward_coverage,
    scoring_coverage,
    success_rate,
)
from tuneplane.evaluation.repeats import TaskOutcomes, by_task, clustered_rate, pass_at
from tuneplane.server import declared
from tuneplane.server.responses import JSON
from tuneplane.server.state import app_state
from tuneplane.store import catalog, evaluation
from tuneplane.store.evaluation import RoundState
from tuneplane.store.observations import recent_observations

router = APIRouter(prefix="/api/v1", tags=["evaluation"])
RUN = "/projects/{project}/runs/{run}"
#: An execution attempt: attempts are numbered from 1 in a 32-bit column.
Attempt = Annotated[
    int | None,
    Query(ge=1, le=2**31 - 1, description="execution attempt (default: latest with outcomes)"),
]


def _counts(state: RoundState) -> RoundCounts:
    return RoundCounts(
        success=state.tally.get("success", 0),
        failure=state.tally.get("failure", 0),
        infra_error=state.tally.get("infra_error", 0),
        unscored=state.tally.get("unscored", 0),
        expected=None if state.declaration is None else state.declaration.expected,
        verdicts=state.declaration is None or state.declaration.verdicts,
        rewarded=state.rewarded,
        reward_sum=state.reward_sum,
    )


def _number(value: Rate | Mean | Missing | int) -> dict[str, Any]:
    if isinstance(value, Missing):
        return {"value": None, "codes": list(value.codes), "reason": value.reason}
    if isinstance(value, int):
        return {"value": value}
    if isinstance(value, Mean):
        return {"value": value.value, "numerator": value.total, "denominator": value.count}
    return {
        "value": value.value,
        "numerator": value.numerator,
        "denominator": value.denominator,
        "wilson95": [value.low, value.high],
    }


def _round_json(state: RoundState) -> dict[str, Any]:
    counts = _counts(state)
    declaration = state.declaration
    return {
        "round_id": state.round_id,
        "declared": declaration is not None,
        "expected": counts.expected,
        "digests": None if declaration is None else declaration.digests,
        "task": None
        if declaration is None
        else {"name": declaration.task_name, "version": declaration.task_version},
        "counts": {
            "success": counts.success,
            "failure": counts.failure,
            "infra_error": counts.infra_error,
            "unscored": counts.unscored,
            "reported": counts.reported,
        },
        "not_yet_reported": _number(not_yet_reported(counts)),
        "verdicts": counts.verdicts,
        "success_rate": _number(success_rate(counts)),
        "scoring_coverage": _number(scoring_coverage(counts)),
        "reward_coverage": _number(reward_coverage(counts)),
        "mean_reward": _number(mean_reward(counts)),
        "trajectories_not_stored": state.unstored,
    }


def _run_id(connection: Connection, project: str, run: str) -> int:
    return catalog.get_run(connection, project, run).id


def _attempt(
    connection: Connection, run_id: int, wanted: int | None, where: str, field: str = "attempt"
) -> tuple[int | None, list[int]]:
    """The execution attempt to read (the latest with outcomes unless ``wanted``) and every
    attempt that has rounds; an attempt without rounds is unknown."""
    attempts = evaluation.execution_attempts(connection, run_id)
    if wanted is None:
        return (attempts[-1] if attempts else None), attempts
    if wanted not in attempts:
        having = ", ".join(map(str, attempts)) or "none"
        raise NotFound(
            f"{field}: execution attempt {wanted} of {where} reported no evaluation outcome "
            f"(attempts with rounds: {having})"
        )
    return wanted, attempts


def _round(
    connection: Connection, project: str, run: str, round_id: str, wanted: int | None
) -> tuple[int, int, RoundState, list[int]]:
    """(run id, execution attempt, the round, attempts with rounds), or 404."""
    run_id = _run_id(connection, project, run)
    attempt, attempts = _attempt(connection, run_id, wanted, f"{project}/{run}")
    found = [] if attempt is None else evaluation.rounds(connection, run_id, attempt, round_id)
    if not found:
        raise NotFound(
            f"round_id: round {round_id!r} has no declaration or result in {project}/{run}"
            + ("" if attempt is None else f" (execution attempt {attempt})")
        )
    return run_id, attempt, found[0], attempts  # type: ignore[return-value]


@router.get(RUN + "/observations")
def list_observations(
    request: Request,
    project: str,
    run: str,
    type: str | None = None,
    limit: Annotated[int, Query(ge=1, le=RECENT_OBSERVATIONS)] = RECENT_OBSERVATIONS,
) -> Response:
    """The latest observation events, newest first; ``type=health`` finds health snapshots
    however many other events came after them."""
    if type is not None and type not in OBSERVATION_TYPES:
        raise InvalidInput((Violation("type", f"must be one of {', '.join(OBSERVATION_TYPES)}"),))
    with app_state(request).database.connect() as connection:
        rows = recent_observations(connection, _run_id(connection, project, run), type, limit)
    return JSON(
        [
            {
                "event_id": o.event_id,
                "attempt": o.attempt,
                "type": o.type,
                "name": o.name,
                "step": o.step,
                "received_at": o.received_at,
                **o.body,
            }
            for o in rows
        ]
    )


@router.get(RUN + "/evaluation")
def list_rounds(request: Request, project: str, run: str, attempt: Attempt = None) -> Response:
    """Per round of one execution attempt: successes, model failures, execution errors,
    unscored, not yet reported; success rate and scoring coverage with Wilson 95%
    intervals, or the codes and reason there is none. ``state`` is ``unknown`` for a run
    that never sent an outcome event; ``execution_attempts`` lists those with rounds."""
    with app_state(request).database.connect() as connection:
        run_id = _run_id(connection, project, run)
        chosen, attempts = _attempt(connection, run_id, attempt, f"{project}/{run}")
        states = [] if chosen is None else evaluation.rounds(connection, run_id, chosen)
        marks = {} if chosen is None else evaluation.checkpoints(connection, run_id, chosen)
    return JSON(
        {
            "state": "reported" if states else "unknown",
            "execution_attempt": chosen,
            "execution_attempts": attempts,
            "rounds": [
                {**_round_json(state), "checkpoint": marks.get(state.round_id)} for state in states
            ],
        }
    )


@router.get(RUN + "/evaluation/{round_id}")
def read_round(
    request: Request, project: str, run: str, round_id: str, attempt: Attempt = None
) -> Response:
    """One round of one execution attempt, as in the list; 404 when it does not exist."""
    with app_state(request).database.connect() as connection:
        run_id, chosen, state, attempts = _round(connection, project, run, round_id, attempt)
        scored = evaluation.scored_trials(connection, run_id, chosen, round_id)
        checkpoint = evaluation.checkpoints(connection, run_id, chosen).get(round_id)
        record = declared.records(connection, run_id, chosen, round_id)
        not_run = declared.planned_not_reported(connection, run_id, chosen, state, record)
    return JSON(
        {
            **_round_json(state),
            "checkpoint": checkpoint,
            "planned_not_reported": not_run,
            "execution_attempt": chosen,
            "execution_attempts": attempts,
            "repeats": repeats_json(by_task(scored)),
        }
    )


def repeats_json(tasks: dict[str, TaskOutcomes]) -> dict[str, Any] | None:
    """pass@k and the clustered interval of a round whose tasks ran more than once; null
    when none did (every number of the round is then the plain success rate's)."""
    passes = pass_at(tasks)
    if not passes:
        return None
    clustered = clustered_rate(tasks)
    return {
        "tasks": len(tasks),
        "most_repeats": max(passes),
        "pass_at": [{"k": k, "value": value, "tasks": n} for k, (value, n) in passes.items()],
        "clustered_rate": None
        if clustered is None
        else {
            "value": clustered.rate,
            "interval95": [clustered.low, clustered.high],
            "method": clustered.method,
        },
    }


@router.get(RUN + "/evaluation/{round_id}/trials")
def list_trials(
    request: Request,
    project: str,
    run: str,
    round_id: str,
    attempt: Attempt = None,
    status: str | None = None,
    after: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Response:
    """Current outcomes of every reported trial of the round, by trial id, optionally of
    one status; pass ``next`` as ``after`` for the next page."""
    if status is not None and status not in TRIAL_STATUSES:
        raise InvalidInput((Violation("status", f"must be one of {', '.join(TRIAL_STATUSES)}"),))
    with app_state(request).database.connect() as connection:
        run_id, chosen, _, _ = _round(connection, project, run, round_id, attempt)
        rows = evaluation.trial_page(connection, run_id, chosen, round_id, status, after, limit)
    return JSON(
        {
            "execution_attempt": chosen,
            "trials": [
                {
                    "trial_id": r.trial_id,
                    "status": r.status,
                    "eligible": r.eligible,
                    "reward": r.reward,
                    "execution_attempt": chosen,
                    "trial_attempt": r.trial_attempt,
                    "attempts": r.attempts,
                    "error_type": r.error_type,
                    "reason_code": r.reason_code,
                    "reason": r.reason,
                }
                for r in rows
            ],
            "next": rows[-1].trial_id if len(rows) == limit else None,
        }
    )


@router.get(RUN + "/evaluation/{round_id}/trials/{trial_id}")
def trial_history(
    request: Request,
    project: str,
    run: str,
    round_id: str,
    trial_id: str,
    attempt: Attempt = None,
) -> Response:
    """A trial's retry history in the round, current attempt first: at most 100 attempts
    shown, ``total_attempts`` counting all of them."""
    with app_state(request).database.connect() as connection:
        run_id, chosen, _, _ = _round(connection, project, run, round_id, attempt)
        history = evaluation.trial_history(connection, run_id, chosen, round_id, trial_id)
    if not history.attempts:
        raise NotFound(
            f"trial_id: trial {trial_id!r} has no reported attempt in round {round_id!r} "
            f"(execution attempt {chosen})"
        )
    return JSON(
        {
            "trial_id": trial_id,
            "round_id": round_id,
            "execution_attempt": chosen,
            "total_attempts": history.total,
            "shown": len(history.attempts),
            "attempts": [
                {
                    "execution_attempt": chosen,
                    "trial_attempt": r.trial_attempt,
                    "status": r.status,
                    "eligible": r.eligible,
                    "reward": r.reward,
                    "error_type": r.error_type,
                    "reason_code": r.reason_code,
                    "reason": r.reason,
                    "received_at": r.received_at,
                }
                for r in history.attempts
            ],
        }
    )


@dataclass(frozen=True, slots=True)
class ChosenRound:
    """One side of a matched view: ``project/run/round_id`` and its execution attempt."""

    project: str
    run: str
    run_id: int
    state: RoundState
    attempt: int
    attempts: list[int]


def chosen_round(
    connection: Connection, spec: str, name: str, wanted: int | None, counts: bool = True
) -> ChosenRound:
    """The round ``spec`` names (``name``: the query parameter), or 422/404 naming it;
    without ``counts``, its state holds the round's ID alone (one query fewer per table)."""
    project, _, rest = spec.partition("/")
    run, _, round_id = rest.partition("/")
    if not (project and run and round_id):
        raise InvalidInput((Violation(name, "must be project/run/round_id"),))
    run_id = _run_id(connection, project, run)
    attempt, attempts = _attempt(
        connection, run_id, wanted, f"{project}/{run}", field=f"{name}_attempt"
    )
    found: list[RoundState] = []
    if attempt is not None and counts:
        found = evaluation.rounds(connection, run_id, attempt, round_id)
    elif attempt is not None and evaluation.has_round(connection, run_id, attempt, round_id):
        found = [RoundState(round_id)]
    if not found:
        where = "" if attempt is None else f" (execution attempt {attempt})"
        raise NotFound(
            f"{name}: round {round_id!r} has no declaration or result in {project}/{run}{where}"
        )
    assert attempt is not None
    return ChosenRound(project, run, run_id, found[0], attempt, attempts)


@dataclass(frozen=True, slots=True)
class _Side:
    state: RoundState
    statuses: dict[str, str]
    attempt: int
    attempts: list[int]
    checkpoint: dict[str, Any] | None
    #: What its declaration recorded beside its digests (protocol settings, planned IDs).
    record: dict[str, Any]


def _side(connection: Connection, spec: str, name: str, wanted: int | None) -> _Side:
    chosen = chosen_round(connection, spec, name, wanted)
    statuses = evaluation.current_statuses(
        connection, chosen.run_id, chosen.attempt, chosen.state.round_id
    )
    checkpoint = evaluation.checkpoints(connection, chosen.run_id, chosen.attempt).get(
        chosen.state.round_id
    )
    record = declared.records(connection, chosen.run_id, chosen.attempt, chosen.state.round_id)
    return _Side(chosen.state, statuses, chosen.attempt, chosen.attempts, checkpoint, record)


@router.get("/evaluation/matched")
def matched(
    request: Request,
    left: str,
    right: str,
    left_attempt: Attempt = None,
    right_attempt: Attempt = None,
) -> Response:
    """Matched evidence for one explicitly chosen round on each side
    (``left=project/run/round``, ``left_attempt`` its execution attempt, by default the
    latest with outcomes). Transitions are always shown; the success-rate difference only
    when the protocol digests match and both rounds are completely scored, as a decimal
    and an exact fraction; otherwise every failed condition as a code with its side. It is
    an observed difference, not statistical proof; the exact McNemar p-value is beside."""
    with app_state(request).database.connect() as connection:
        left_side = _side(connection, left, "left", left_attempt)
        right_side = _side(connection, right, "right", right_attempt)
    left_round, right_round = left_side.state, right_side.state
    moves = transitions(left_side.statuses, right_side.statuses)  # type: ignore[arg-type]
    result = matched_difference(
        _counts(left_round),
        _counts(right_round),
        left_round.declaration.digests if left_round.declaration else {},
        right_round.declaration.digests if right_round.declaration else {},
        moves,
    )
    keys = declared.settings_differences(
        left_round, right_round, left_side.record, right_side.record
    )
    difference: dict[str, Any]
    if isinstance(result, Difference):
        difference = {
            "shown": True,
            "label": "observed difference (right - left), not statistical proof",
            "left": _number(result.left),
            "right": _number(result.right),
            "value": result.difference,
            "exact": {
                "numerator": result.exact.numerator,
                "denominator": result.exact.denominator,
            },
            "mcnemar_exact_p": result.mcnemar_p,
            "mcnemar_label": "exact McNemar test on discordant trial pairs (two-sided)",
        }
    else:
        conditions = [
            {"code": c.code, "side": c.side, "reason": _named_keys(c.code, c.reason, keys)}
            for c in result
        ]
        difference = {
            "shown": False,
            "conditions": conditions,
            "reasons": [c["reason"] for c in conditions],
        }
    return JSON(
        {
            "left": {
                **_round_json(left_round),
                "checkpoint": left_side.checkpoint,
                "execution_attempt": left_side.attempt,
                "execution_attempts": left_side.attempts,
            },
            "right": {
                **_round_json(right_round),
                "checkpoint": right_side.checkpoint,
                "execution_attempt": right_side.attempt,
                "execution_attempts": right_side.attempts,
            },
            "transitions": {
                "failure_to_success": moves.failure_to_success,
                "success_to_failure": moves.success_to_failure,
                "success_to_success": moves.success_to_success,
                "failure_to_failure": moves.failure_to_failure,
                "scored_to_unscored": moves.scored_to_unscored,
                "unscored_to_scored": moves.unscored_to_scored,
                "unscored_both": moves.unscored_both,
                "missing_left": moves.missing_left,
                "missing_right": moves.missing_right,
                "label": "observed trial transitions, not proof of improvement",
            },
            "difference": difference,
            "settings_differences": keys,
        }
    )


def _named_keys(code: str, reason: str, keys: dict[str, Any] | None) -> str:
    """A settings mismatch's sentence, naming the keys that differ where they are known."""
    if code != "settings_digest_mismatch" or keys is None:
        return reason
    paths = [d["path"] for d in keys["differences"]]
    if not paths:
        return f"{reason}: {keys['reason']}"
    more = f" and {keys['total'] - 5} more" if keys["total"] > 5 else ""
    return f"{reason}: {', '.join(paths[:5])}{more}"
