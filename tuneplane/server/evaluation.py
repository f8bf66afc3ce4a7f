"""The Validation tab's API: observation events, evaluation rounds with honest counts and
rates, trial pages with retry histories, and matched evidence between two runs."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from sqlalchemy import Connection
from starlette.responses import Response

from tuneplane.contract.errors import InvalidInput, NotFound, Violation
from tuneplane.contract.limits import RECENT_OBSERVATIONS
from tuneplane.contract.observations import OBSERVATION_TYPES, TRIAL_STATUSES
from tuneplane.evaluation.matched import Difference, matched_difference, transitions
from tuneplane.evaluation.outcomes import (
    Missing,
    Rate,
    RoundCounts,
    not_yet_reported,
    scoring_coverage,
    success_rate,
)
from tuneplane.server.responses import JSON
from tuneplane.server.state import app_state
from tuneplane.store import catalog, evaluation
from tuneplane.store.evaluation import RoundState
from tuneplane.store.observations import recent_observations

router = APIRouter(prefix="/api/v1", tags=["evaluation"])
RUN = "/projects/{project}/runs/{run}"


def _counts(state: RoundState) -> RoundCounts:
    return RoundCounts(
        success=state.tally.get("success", 0),
        failure=state.tally.get("failure", 0),
        infra_error=state.tally.get("infra_error", 0),
        unscored=state.tally.get("unscored", 0),
        expected=None if state.declaration is None else state.declaration.expected,
    )


def _number(value: Rate | Missing | int) -> dict[str, Any]:
    if isinstance(value, Missing):
        return {"value": None, "reason": value.reason}
    if isinstance(value, int):
        return {"value": value}
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
        "success_rate": _number(success_rate(counts)),
        "scoring_coverage": _number(scoring_coverage(counts)),
    }


def _run_id(connection: Connection, project: str, run: str) -> int:
    return catalog.get_run(connection, project, run).id


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
def list_rounds(request: Request, project: str, run: str) -> Response:
    """Per round: successes, model failures, execution errors, unscored, not yet reported;
    success rate and scoring coverage with Wilson 95% intervals, or the reason there is
    none. ``state`` is ``unknown`` for a run that never sent an outcome event."""
    with app_state(request).database.connect() as connection:
        run_id = _run_id(connection, project, run)
        states = evaluation.rounds(connection, run_id)
    return JSON(
        {
            "state": "reported" if states else "unknown",
            "rounds": [_round_json(state) for state in states],
        }
    )


@router.get(RUN + "/evaluation/{round_id}/trials")
def list_trials(
    request: Request,
    project: str,
    run: str,
    round_id: str,
    status: str | None = None,
    after: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Response:
    """Current outcomes of every reported trial, by trial id, optionally of one status;
    pass ``next`` as ``after`` for the next page."""
    if status is not None and status not in TRIAL_STATUSES:
        raise InvalidInput((Violation("status", f"must be one of {', '.join(TRIAL_STATUSES)}"),))
    with app_state(request).database.connect() as connection:
        run_id = _run_id(connection, project, run)
        rows = evaluation.trial_page(connection, run_id, round_id, status, after, limit)
    return JSON(
        {
            "trials": [
                {
                    "trial_id": r.trial_id,
                    "status": r.status,
                    "eligible": r.eligible,
                    "reward": r.reward,
                    "execution_attempt": r.execution_attempt,
                    "trial_attempt": r.trial_attempt,
                    "attempts": r.attempts,
                }
                for r in rows
            ],
            "next": rows[-1].trial_id if len(rows) == limit else None,
        }
    )


@router.get(RUN + "/evaluation/{round_id}/trials/{trial_id}")
def trial_history(
    request: Request, project: str, run: str, round_id: str, trial_id: str
) -> Response:
    """A trial's retry history, current attempt first (at most 100 attempts)."""
    with app_state(request).database.connect() as connection:
        run_id = _run_id(connection, project, run)
        rows = evaluation.trial_history(connection, run_id, round_id, trial_id)
    if not rows:
        raise NotFound(f"trial {trial_id!r} has no reported attempt in round {round_id!r}")
    return JSON(
        [
            {
                "execution_attempt": r.execution_attempt,
                "trial_attempt": r.trial_attempt,
                "status": r.status,
                "eligible": r.eligible,
                "reward": r.reward,
                "error_type": r.error_type,
                "received_at": r.received_at,
            }
            for r in rows
        ]
    )


def _side(connection: Connection, spec: str, name: str) -> tuple[RoundState, dict[str, str]]:
    project, _, rest = spec.partition("/")
    run, _, round_id = rest.partition("/")
    if not (project and run and round_id):
        raise InvalidInput((Violation(name, "must be project/run/round_id"),))
    run_id = _run_id(connection, project, run)
    found = evaluation.rounds(connection, run_id, round_id)
    if not found:
        raise NotFound(
            f"{name}: round {round_id!r} has no declaration or result in {project}/{run}"
        )
    return found[0], evaluation.current_statuses(connection, run_id, round_id)


@router.get("/evaluation/matched")
def matched(request: Request, left: str, right: str) -> Response:
    """Matched evidence for one explicitly chosen round on each side
    (``left=project/run/round``). Transitions are always shown; the success-rate difference
    only when the protocol digests match and both rounds are completely scored. It is an
    observed difference, not statistical proof; the exact McNemar p-value is given beside."""
    with app_state(request).database.connect() as connection:
        left_round, left_status = _side(connection, left, "left")
        right_round, right_status = _side(connection, right, "right")
    moves = transitions(left_status, right_status)  # type: ignore[arg-type]
    result = matched_difference(
        _counts(left_round),
        _counts(right_round),
        left_round.declaration.digests if left_round.declaration else {},
        right_round.declaration.digests if right_round.declaration else {},
        moves,
    )
    difference: dict[str, Any]
    if isinstance(result, Difference):
        difference = {
            "shown": True,
            "label": "observed difference (right - left), not statistical proof",
            "left": _number(result.left),
            "right": _number(result.right),
            "value": result.difference,
            "mcnemar_exact_p": result.mcnemar_p,
            "mcnemar_label": "exact McNemar test on discordant trial pairs (two-sided)",
        }
    else:
        difference = {"shown": False, "reasons": [reason.reason for reason in result]}
    return JSON(
        {
            "left": _round_json(left_round),
            "right": _round_json(right_round),
            "transitions": {
                "failure_to_success": moves.failure_to_success,
                "success_to_failure": moves.success_to_failure,
                "success_to_success": moves.success_to_success,
                "failure_to_failure": moves.failure_to_failure,
                "unscored_either": moves.unscored_either,
                "missing_left": moves.missing_left,
                "missing_right": moves.missing_right,
                "label": "observed trial transitions, not proof of improvement",
            },
            "difference": difference,
        }
    )
