"""Counts, success rate, scoring coverage and current outcomes of an evaluation round.

success rate = success / (success + failure)
scoring coverage = (success + failure) / expected
not yet reported = expected - distinct trials reported

An unknown population, an empty denominator or more distinct trials than expected never
yield a percentage: they yield a ``Missing`` with the reason. Every rate carries its Wilson
95% interval.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

Status = Literal["success", "failure", "infra_error", "unscored"]
STATUSES: Final[tuple[Status, ...]] = ("success", "failure", "infra_error", "unscored")
#: The normal quantile for a two-sided 95% interval.
Z95: Final = 1.959963984540054


@dataclass(frozen=True, slots=True)
class Rate:
    value: float
    numerator: int
    denominator: int
    low: float
    high: float


@dataclass(frozen=True, slots=True)
class Missing:
    """Why there is no number."""

    reason: str


@dataclass(frozen=True, slots=True)
class TrialAttempt:
    """One terminal attempt of a trial, as reported."""

    trial_id: str
    execution_attempt: int
    trial_attempt: int
    status: Status


@dataclass(frozen=True, slots=True)
class RoundCounts:
    success: int = 0
    failure: int = 0
    infra_error: int = 0
    unscored: int = 0
    #: Trials the population declares; None while no declaration has arrived.
    expected: int | None = None

    @property
    def reported(self) -> int:
        """Distinct trials with a current outcome."""
        return self.success + self.failure + self.infra_error + self.unscored

    @property
    def scored(self) -> int:
        return self.success + self.failure


def wilson_interval(successes: int, trials: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion."""
    if trials <= 0 or not 0 <= successes <= trials:
        raise ValueError("need 0 <= successes <= trials and trials > 0")
    p = successes / trials
    z2 = z * z
    centre = (p + z2 / (2 * trials)) / (1 + z2 / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / (1 + z2 / trials)
    # At 0 or all successes the bound is exactly 0 or 1; rounding must not move it.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
    return low, high


def _rate(numerator: int, denominator: int) -> Rate:
    low, high = wilson_interval(numerator, denominator)
    return Rate(numerator / denominator, numerator, denominator, low, high)


def _population_problem(counts: RoundCounts) -> Missing | None:
    if counts.expected is None:
        return Missing("unknown population: the round declared no expected trial count")
    if counts.reported > counts.expected:
        return Missing(
            f"{counts.reported} distinct trials reported but the population declares "
            f"{counts.expected}"
        )
    return None


def success_rate(counts: RoundCounts) -> Rate | Missing:
    """success / (success + failure); execution errors and unscored trials are not failures.

    It needs no population, but more distinct trials than declared means the results are
    not the declared evaluation, so there is no rate then either."""
    if counts.scored == 0:
        return Missing("no scored trials: success + failure is 0")
    if counts.expected is not None and counts.reported > counts.expected:
        problem = _population_problem(counts)
        assert problem is not None
        return problem
    return _rate(counts.success, counts.scored)


def scoring_coverage(counts: RoundCounts) -> Rate | Missing:
    """(success + failure) / expected."""
    problem = _population_problem(counts)
    if problem is not None:
        return problem
    assert counts.expected is not None
    if counts.expected == 0:
        return Missing("the population declares 0 trials")
    return _rate(counts.scored, counts.expected)


def not_yet_reported(counts: RoundCounts) -> int | Missing:
    """expected - distinct trials reported."""
    problem = _population_problem(counts)
    if problem is not None:
        return problem
    assert counts.expected is not None
    return counts.expected - counts.reported


def current_outcomes(attempts: Iterable[TrialAttempt]) -> dict[str, TrialAttempt]:
    """Each trial's current outcome: its highest (execution attempt, trial attempt), whatever
    order the attempts arrived in."""
    current: dict[str, TrialAttempt] = {}
    for attempt in attempts:
        held = current.get(attempt.trial_id)
        key = (attempt.execution_attempt, attempt.trial_attempt)
        if held is None or key > (held.execution_attempt, held.trial_attempt):
            current[attempt.trial_id] = attempt
    return current


def count_round(current: Iterable[TrialAttempt], expected: int | None) -> RoundCounts:
    tally = dict.fromkeys(STATUSES, 0)
    for outcome in current:
        tally[outcome.status] += 1
    return RoundCounts(expected=expected, **tally)
