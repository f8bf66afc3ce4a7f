"""Matched evidence between two evaluation rounds (one chosen on each side).

Transitions are always shown over the union of trials. The success-rate difference is shown
only when the protocols match (dataset, cohort, verifier and settings digests) and both
rounds are completely scored; otherwise the answer names each failed condition. The exact
McNemar test on the discordant pairs is offered beside it, labelled as what it is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from tuneplane.evaluation.outcomes import Missing, Rate, RoundCounts, Status, success_rate

DIGESTS: Final = ("dataset", "cohort", "verifier", "settings")


@dataclass(frozen=True, slots=True)
class Transitions:
    failure_to_success: int
    success_to_failure: int
    success_to_success: int
    failure_to_failure: int
    #: Present in both but not scored (success/failure) on at least one side.
    unscored_either: int
    missing_left: int
    missing_right: int


def transitions(left: Mapping[str, Status], right: Mapping[str, Status]) -> Transitions:
    """Per-trial changes from ``left`` to ``right`` (each: trial id -> current status)."""
    pairs = {"ff": 0, "fs": 0, "sf": 0, "ss": 0}
    unscored = 0
    for trial in left.keys() & right.keys():
        a, b = left[trial], right[trial]
        if a in ("success", "failure") and b in ("success", "failure"):
            pairs[a[0] + b[0]] += 1
        else:
            unscored += 1
    return Transitions(
        failure_to_success=pairs["fs"],
        success_to_failure=pairs["sf"],
        success_to_success=pairs["ss"],
        failure_to_failure=pairs["ff"],
        unscored_either=unscored,
        missing_left=len(right.keys() - left.keys()),
        missing_right=len(left.keys() - right.keys()),
    )


def mcnemar_exact(failure_to_success: int, success_to_failure: int) -> float:
    """Two-sided exact McNemar p-value: a binomial test of the discordant pairs at 1/2."""
    n = failure_to_success + success_to_failure
    if n == 0:
        return 1.0
    k = min(failure_to_success, success_to_failure)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / (1 << n)
    return min(1.0, 2 * tail)


@dataclass(frozen=True, slots=True)
class Difference:
    """An observed difference of success rates, not a statistical proof."""

    left: Rate
    right: Rate
    difference: float
    mcnemar_p: float


def matched_difference(
    left: RoundCounts,
    right: RoundCounts,
    left_digests: Mapping[str, str | None],
    right_digests: Mapping[str, str | None],
    moves: Transitions,
) -> Difference | list[Missing]:
    """The difference, or every reason it cannot be shown."""
    reasons: list[Missing] = []
    for name in DIGESTS:
        a, b = left_digests.get(name), right_digests.get(name)
        if a is None or b is None:
            reasons.append(Missing(f"{name} digest not declared on both sides"))
        elif a != b:
            reasons.append(Missing(f"{name} digests differ"))
    for side, counts in (("left", left), ("right", right)):
        if counts.expected is None:
            reasons.append(Missing(f"{side} round has no declared population"))
        elif counts.scored != counts.expected or counts.reported != counts.expected:
            reasons.append(
                Missing(
                    f"{side} round is not completely scored ({counts.scored} of "
                    f"{counts.expected} trials scored)"
                )
            )
    if reasons:
        return reasons
    left_rate, right_rate = success_rate(left), success_rate(right)
    if isinstance(left_rate, Missing) or isinstance(right_rate, Missing):
        return [r for r in (left_rate, right_rate) if isinstance(r, Missing)]
    return Difference(
        left=left_rate,
        right=right_rate,
        difference=right_rate.value - left_rate.value,
        mcnemar_p=mcnemar_exact(moves.failure_to_success, moves.success_to_failure),
    )
