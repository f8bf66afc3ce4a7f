"""Properties of the outcome arithmetic."""

import math
import random
from fractions import Fraction

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


def population_codes(c: RoundCounts, rate: bool = True) -> tuple[str, ...]:
    """The codes a withheld coverage (``rate``) or not-yet-reported must carry: every one
    that holds. 0 declared trials is an empty denominator only for the rate."""
    if c.expected is None:
        return ("unknown_population",)
    codes = ("empty_denominator",) if c.expected == 0 and rate else ()
    return codes + (("excess_trials",) if c.reported > c.expected else ())


@given(counts)
def test_rates_are_honest_or_missing_with_every_code(c: RoundCounts) -> None:
    rate = success_rate(c)
    if c.scored == 0:
        assert isinstance(rate, Missing)
        assert rate.codes == ("empty_denominator",)
    else:  # withheld only for an empty denominator, excess trials or not
        assert isinstance(rate, Rate)
        assert rate.value == c.success / (c.success + c.failure)
        assert rate.low <= rate.value <= rate.high
    codes = population_codes(c)
    coverage, remaining = scoring_coverage(c), not_yet_reported(c)
    if codes:
        assert isinstance(coverage, Missing)
        assert coverage.codes == codes
        assert coverage.reason
    else:
        assert isinstance(coverage, Rate)
        assert coverage.value == c.scored / c.expected  # type: ignore[operator]
    if population_codes(c, rate=False):
        assert isinstance(remaining, Missing)
        assert remaining.codes == population_codes(c, rate=False)
        assert remaining.reason
    else:
        assert remaining == c.expected - c.reported  # type: ignore[operator]


def test_a_population_of_zero_with_reports_carries_both_codes() -> None:
    coverage = scoring_coverage(RoundCounts(success=2, expected=0))
    assert isinstance(coverage, Missing)
    assert coverage.codes == ("empty_denominator", "excess_trials")
    assert "declares 0 trials" in coverage.reason
    assert "2 distinct trials" in coverage.reason
    assert not_yet_reported(RoundCounts(expected=0)) == 0  # 0 - 0 is a count, not a rate
    excess = not_yet_reported(RoundCounts(success=2, expected=0))
    assert isinstance(excess, Missing)
    assert excess.codes == ("excess_trials",)


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
    for (execution, trial), current in current_outcomes(reported).items():
        mine = [a for a in reported if (a.execution_attempt, a.trial_id) == (execution, trial)]
        assert current.trial_attempt == max(a.trial_attempt for a in mine)


def test_a_restart_never_supersedes_the_old_execution() -> None:
    reported = [
        TrialAttempt("t1", 1, 4, "failure"),
        TrialAttempt("t1", 2, 0, "success"),
    ]
    current = current_outcomes(reported)
    assert (current[(1, "t1")].status, current[(2, "t1")].status) == ("failure", "success")
    assert count_round([current[(1, "t1")]], expected=2).failure == 1


def test_transitions_cover_both_sides() -> None:
    left = {"a": "failure", "b": "success", "c": "success", "d": "failure", "e": "unscored"}
    right = {"a": "success", "b": "failure", "c": "success", "e": "success", "f": "success"}
    left |= {"g": "success", "h": "failure", "i": "infra_error", "j": "unscored"}
    right |= {"g": "infra_error", "h": "unscored", "i": "failure", "j": "infra_error"}
    moves = transitions(left, right)  # type: ignore[arg-type]
    assert (moves.failure_to_success, moves.success_to_failure) == (1, 1)
    assert (moves.success_to_success, moves.failure_to_failure) == (1, 0)
    # Losing a verdict and gaining one are counted apart, never as a pass or a fail.
    assert (moves.scored_to_unscored, moves.unscored_to_scored, moves.unscored_both) == (2, 2, 1)
    assert (moves.missing_left, moves.missing_right) == (1, 1)


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
    assert shown.exact == Fraction(1, 5)
    other = {**digests, "verifier": "e" * 64}
    partial = RoundCounts(success=6, failure=3, infra_error=1, expected=10)
    refused = matched_difference(partial, right, other, digests, moves)
    assert isinstance(refused, list)
    assert [(r.code, r.side, r.reason) for r in refused] == [
        ("verifier_digest_mismatch", "both", "verifier digests differ"),
        (
            "left_incomplete_coverage",
            "left",
            "left round is not completely scored (9 of 10 trials scored)",
        ),
    ]
    unknown = matched_difference(left, RoundCounts(success=1), digests, {}, moves)
    assert isinstance(unknown, list)
    assert [r.code for r in unknown] == [
        *(f"right_{name}_digest_undeclared" for name in digests),
        "right_undeclared",
    ]


def test_a_round_declaring_no_trials_is_never_complete() -> None:
    empty, moves = RoundCounts(expected=0), transitions({}, {})
    refused = matched_difference(empty, empty, {}, {}, moves)
    assert isinstance(refused, list)
    codes = [r.code for r in refused]
    assert "left_empty_population" in codes
    assert "right_empty_population" in codes
    excess = matched_difference(RoundCounts(success=3, expected=2), empty, {}, {}, moves)
    assert isinstance(excess, list)
    assert "left_excess_trials" in [r.code for r in excess]


@given(st.integers(1, 60), st.integers(1, 60), st.data())
def test_the_exact_difference_is_the_fraction_of_the_counts(
    n_left: int, n_right: int, data: st.DataObject
) -> None:
    s_left, s_right = data.draw(st.integers(0, n_left)), data.draw(st.integers(0, n_right))
    left = RoundCounts(success=s_left, failure=n_left - s_left, expected=n_left)
    right = RoundCounts(success=s_right, failure=n_right - s_right, expected=n_right)
    shown = matched_difference(left, right, {}, {}, transitions({}, {}))
    assert isinstance(shown, list)  # no digests declared: never shown
    digests = dict.fromkeys(("dataset", "cohort", "verifier", "settings"), "a" * 64)
    shown = matched_difference(left, right, digests, digests, transitions({}, {}))
    assert isinstance(shown, Difference)
    assert shown.exact == Fraction(s_right, n_right) - Fraction(s_left, n_left)
    assert shown.difference == float(shown.exact)
