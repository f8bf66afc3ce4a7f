"""Properties of the outcome arithmetic."""

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tuneplane.evaluation.matched import (
    Difference,
    matched_difference,
    mcnemar_exact,
    transitions,
)
from tuneplane.evaluation.outcomes import (
    STATUSES,
    Missing,
    Rate,
    RoundCounts,
    TrialAttempt,
    count_round,
    current_outcomes,
    not_yet_reported,
    scoring_coverage,
    success_rate,
    wilson_interval,
)

counts = st.builds(
    RoundCounts,
    success=st.integers(0, 50),
    failure=st.integers(0, 50),
    infra_error=st.integers(0, 50),
    unscored=st.integers(0, 50),
    expected=st.none() | st.integers(0, 250),
)


@given(counts)
def test_rates_are_honest_or_missing(c: RoundCounts) -> None:
    rate = success_rate(c)
    if c.scored == 0 or (c.expected is not None and c.reported > c.expected):
        assert isinstance(rate, Missing)
    else:
        assert isinstance(rate, Rate)
        assert rate.value == c.success / (c.success + c.failure)
        assert rate.low <= rate.value <= rate.high
    coverage = scoring_coverage(c)
    if c.expected is None or c.expected == 0 or c.reported > c.expected:
        assert isinstance(coverage, Missing)
    else:
        assert isinstance(coverage, Rate)
        assert coverage.value == c.scored / c.expected
    remaining = not_yet_reported(c)
    if c.expected is None or c.reported > c.expected:
        assert isinstance(remaining, Missing)
    else:
        assert remaining == c.expected - c.reported


def test_execution_errors_are_not_model_failures() -> None:
    rate = success_rate(RoundCounts(success=3, failure=1, infra_error=10, unscored=5, expected=19))
    assert isinstance(rate, Rate)
    assert rate.value == 0.75
    assert isinstance(success_rate(RoundCounts(infra_error=4, expected=4)), Missing)
    reason = scoring_coverage(RoundCounts(success=3))
    assert isinstance(reason, Missing)
    assert "unknown population" in reason.reason
    excess = scoring_coverage(RoundCounts(success=6, expected=5))
    assert isinstance(excess, Missing)
    assert "6 distinct trials" in excess.reason


@given(st.integers(1, 500), st.data())
def test_wilson_interval_contains_the_estimate(n: int, data: st.DataObject) -> None:
    k = data.draw(st.integers(0, n))
    low, high = wilson_interval(k, n)
    assert 0.0 <= low <= k / n <= high <= 1.0


def test_wilson_interval_known_value() -> None:
    low, high = wilson_interval(8, 10)
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)


attempts = st.lists(
    st.builds(
        TrialAttempt,
        trial_id=st.sampled_from(["t1", "t2", "t3", "t4"]),
        execution_attempt=st.integers(1, 3),
        trial_attempt=st.integers(0, 5),
        status=st.sampled_from(STATUSES),
    ),
    unique_by=lambda a: (a.trial_id, a.execution_attempt, a.trial_attempt),
)


@given(attempts, st.randoms())
def test_any_arrival_order_gives_the_same_current_outcomes(
    reported: list[TrialAttempt], rng: random.Random
) -> None:
    shuffled = list(reported)
    rng.shuffle(shuffled)
    assert current_outcomes(reported) == current_outcomes(shuffled)
    for trial, current in current_outcomes(reported).items():
        mine = [a for a in reported if a.trial_id == trial]
        assert (current.execution_attempt, current.trial_attempt) == max(
            (a.execution_attempt, a.trial_attempt) for a in mine
        )


def test_a_restart_supersedes_higher_trial_attempts_of_the_old_execution() -> None:
    reported = [
        TrialAttempt("t1", 1, 4, "failure"),
        TrialAttempt("t1", 2, 0, "success"),
    ]
    assert current_outcomes(reported)["t1"].status == "success"
    assert count_round(current_outcomes(reported).values(), expected=2).success == 1


def test_transitions_cover_both_sides() -> None:
    left = {"a": "failure", "b": "success", "c": "success", "d": "failure", "e": "unscored"}
    right = {"a": "success", "b": "failure", "c": "success", "e": "success", "f": "success"}
    moves = transitions(left, right)  # type: ignore[arg-type]
    assert (moves.failure_to_success, moves.success_to_failure) == (1, 1)
    assert (moves.success_to_success, moves.failure_to_failure) == (1, 0)
    assert (moves.unscored_either, moves.missing_left, moves.missing_right) == (1, 1, 1)


@pytest.mark.parametrize(
    ("b", "c", "p"),
    [(0, 0, 1.0), (5, 5, 1.0), (10, 0, 2 / 1024), (8, 2, 0.109375), (1, 0, 1.0)],
)
def test_mcnemar_exact(b: int, c: int, p: float) -> None:
    assert math.isclose(mcnemar_exact(b, c), p)


def test_matched_difference_only_when_everything_matches() -> None:
    digests = {"dataset": "a" * 64, "cohort": "b" * 64, "verifier": "c" * 64, "settings": "d" * 64}
    left = RoundCounts(success=6, failure=4, expected=10)
    right = RoundCounts(success=8, failure=2, expected=10)
    moves = transitions({"t": "failure"}, {"t": "success"})
    shown = matched_difference(left, right, digests, digests, moves)
    assert isinstance(shown, Difference)
    assert math.isclose(shown.difference, 0.2)
    other = {**digests, "verifier": "e" * 64}
    partial = RoundCounts(success=6, failure=3, infra_error=1, expected=10)
    refused = matched_difference(partial, right, other, digests, moves)
    assert isinstance(refused, list)
    reasons = [r.reason for r in refused]
    assert reasons == [
        "verifier digests differ",
        "left round is not completely scored (9 of 10 trials scored)",
    ]
    unknown = matched_difference(left, RoundCounts(success=1), digests, {}, moves)
    assert isinstance(unknown, list)
    assert "right round has no declared population" in [r.reason for r in unknown]
