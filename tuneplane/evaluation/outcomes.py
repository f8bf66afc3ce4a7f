"""Counts, success rate, scoring coverage and current outcomes of an evaluation round.

success rate = success / (success + failure)
scoring coverage = (success + failure) / expected
not yet reported = expected - distinct trials reported
reward coverage = distinct trials with a reward / expected
mean reward = the sum of the current outcomes' rewards / how many have one

An unknown population, an empty denominator or more distinct trials than expected never
yield a percentage: they yield a ``Missing`` with every code that applies and the sentence
shown to people. Every rate carries its Wilson 95% interval.

Codes (machine-readable, documented in docs/evaluation.md):

- ``empty_denominator``: the success rate's success + failure is 0, or the population
  declares 0 trials (coverage: not-yet-reported is a count, not a rate, and a round of 0
  declared trials with none reported has 0 not yet reported);
- ``unknown_population``: no declaration has arrived for the round;
- ``excess_trials``: more distinct trials reported than the population declares;
- ``no_verdicts``: the producer declared that it gives rewards, no success or failure
  verdict (a NeMo-RL validation log): success rate and scoring coverage do not apply;
- ``no_rewards``: no current outcome of the round has a reward (mean reward).
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
class Mean:
    """A mean of ``count`` values summing to ``total`` (no interval: rewards are no
    proportion)."""

    value: float
    total: float
    count: int


@dataclass(frozen=True, slots=True)
class Missing:
    """Why there is no number: every code that applies, and the sentence for people."""

    reason: str
    codes: tuple[str, ...] = ()


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
    #: False when the declaration says the producer gives only rewards, no verdicts.
    verdicts: bool = True
    #: Current outcomes with a reward, and the sum of their rewards.
    rewarded: int = 0
    reward_sum: float = 0.0

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


def _population_problem(counts: RoundCounts, rate: bool = True) -> Missing | None:
    """Why coverage (``rate``) or not-yet-reported cannot be figured: every condition that
    holds. 0 declared trials is an empty denominator only for the rate."""
    if counts.expected is None:
        return Missing(
            "unknown population: the round declared no expected trial count",
            ("unknown_population",),
        )
    codes: list[str] = []
    sentences: list[str] = []
    if counts.expected == 0 and rate:
        codes.append("empty_denominator")
        sentences.append("the population declares 0 trials")
    if counts.reported > counts.expected:
        codes.append("excess_trials")
        sentences.append(
            f"{counts.reported} distinct trials reported but the population declares "
            f"{counts.expected}"
        )
    if not codes:
        return None
    return Missing("; ".join(sentences), tuple(codes))


NO_VERDICTS: Final = Missing(
    "the producer gives rewards, no success or failure verdicts (every trial is unscored "
    "by design): see the reward coverage and mean reward",
    ("no_verdicts",),
)


def success_rate(counts: RoundCounts) -> Rate | Missing:
    """success / (success + failure); execution errors and unscored trials are not failures.

    It needs no population, and it is withheld only when success + failure is 0: excess
    trials withhold coverage, not the rate of the trials that were scored."""
    if not counts.verdicts and counts.scored == 0:
        return NO_VERDICTS
    if counts.scored == 0:
        return Missing("no scored trials: success + failure is 0", ("empty_denominator",))
    return _rate(counts.success, counts.scored)


def _share_of_population(counts: RoundCounts, numerator: int) -> Rate | Missing:
    problem = _population_problem(counts)
    if problem is not None:
        return problem
    assert counts.expected is not None
    return _rate(numerator, counts.expected)


def scoring_coverage(counts: RoundCounts) -> Rate | Missing:
    """(success + failure) / expected; withheld, not 0%, for a producer of no verdicts."""
    if not counts.verdicts and counts.scored == 0:
        return NO_VERDICTS
    return _share_of_population(counts, counts.scored)


def reward_coverage(counts: RoundCounts) -> Rate | Missing:
    """Distinct trials with a reward / expected: how much of the population the rewards
    cover (a NaN or missing reward in a log is no reward)."""
    return _share_of_population(counts, counts.rewarded)


def mean_reward(counts: RoundCounts) -> Mean | Missing:
    """The mean reward of the current outcomes that have one, whatever their status."""
    if counts.rewarded == 0:
        return Missing("no trial of the round has a reward", ("no_rewards",))
    return Mean(counts.reward_sum / counts.rewarded, counts.reward_sum, counts.rewarded)


def not_yet_reported(counts: RoundCounts) -> int | Missing:
    """expected - distinct trials reported (0 - 0 is 0: a count needs no denominator)."""
    problem = _population_problem(counts, rate=False)
    if problem is not None:
        return problem
    assert counts.expected is not None
    return counts.expected - counts.reported


def current_outcomes(attempts: Iterable[TrialAttempt]) -> dict[tuple[int, str], TrialAttempt]:
    """Each trial's current outcome in each execution attempt: its highest trial attempt,
    whatever order the attempts arrived in. Executions never supersede each other: a
    restart's trial attempt 0 is its own round's, beside the earlier execution's attempt 3."""
    current: dict[tuple[int, str], TrialAttempt] = {}
    for attempt in attempts:
        key = (attempt.execution_attempt, attempt.trial_id)
        held = current.get(key)
        if held is None or attempt.trial_attempt > held.trial_attempt:
            current[key] = attempt
    return current


def count_round(current: Iterable[TrialAttempt], expected: int | None) -> RoundCounts:
    tally = dict.fromkeys(STATUSES, 0)
    for outcome in current:
        tally[outcome.status] += 1
    return RoundCounts(
        tally["success"], tally["failure"], tally["infra_error"], tally["unscored"], expected
    )
