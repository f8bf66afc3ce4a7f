"""What an ``eval_drop`` rule compares: an evaluation round against its baseline round, as
matched evidence allows (``evaluation.matched``): the difference of success rates only
when the protocol digests match and both rounds are completely scored."""

from __future__ import annotations

from sqlalchemy import Connection

from tuneplane.contract.alert_rules import Rule
from tuneplane.evaluation.matched import Difference, matched_difference, transitions
from tuneplane.evaluation.outcomes import RoundCounts
from tuneplane.store import evaluation
from tuneplane.store.alert_rules import run_id_of
from tuneplane.store.evaluation import RoundState


def _counts(state: RoundState) -> RoundCounts:
    return RoundCounts(
        success=state.tally.get("success", 0),
        failure=state.tally.get("failure", 0),
        infra_error=state.tally.get("infra_error", 0),
        unscored=state.tally.get("unscored", 0),
        expected=None if state.declaration is None else state.declaration.expected,
    )


def _side(
    connection: Connection, run_id: int, attempt: int | None, round_id: str
) -> tuple[RoundState, dict[str, str]] | None:
    if attempt is None:
        attempts = evaluation.execution_attempts(connection, run_id)
        if not attempts:
            return None
        attempt = attempts[-1]
    found = evaluation.rounds(connection, run_id, attempt, round_id)
    if not found:
        return None
    return found[0], evaluation.current_statuses(connection, run_id, attempt, round_id)


def round_difference(
    connection: Connection, project_id: int, run_id: int, attempt: int, round_id: str, rule: Rule
) -> float | None:
    """The round's success rate minus its baseline's (a fraction), or None when the matched
    conditions do not hold or either round is unknown."""
    baseline = rule.spec.baseline
    assert baseline is not None
    baseline_run = run_id_of(connection, project_id, baseline.run)
    if baseline_run is None:
        return None
    if (baseline_run, baseline.round_id) == (run_id, round_id) and baseline.attempt in (
        None,
        attempt,
    ):
        return None  # the baseline itself
    left = _side(connection, baseline_run, baseline.attempt, baseline.round_id)
    right = _side(connection, run_id, attempt, round_id)
    if left is None or right is None:
        return None
    (left_state, left_statuses), (right_state, right_statuses) = left, right
    result = matched_difference(
        _counts(left_state),
        _counts(right_state),
        left_state.declaration.digests if left_state.declaration else {},
        right_state.declaration.digests if right_state.declaration else {},
        transitions(left_statuses, right_statuses),  # type: ignore[arg-type]
    )
    return result.difference if isinstance(result, Difference) else None
