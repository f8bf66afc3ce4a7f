"""Matched evidence between two evaluation rounds (one chosen on each side).

Transitions are always shown over the union of trials. The success-rate difference is shown
only when the protocols match (dataset, cohort, verifier and settings digests) and both
rounds are completely scored; otherwise the answer names each failed condition as a code
with its side (``left_undeclared``, ``right_incomplete_coverage``, ``dataset_digest_mismatch``
…, see :class:`Condition`). A round declaring 0 trials is never complete. The difference is
also given as an exact fraction. The exact McNemar test on the discordant pairs is offered
beside it, labelled as what it is.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Final, Literal

from tuneplane.evaluation.outcomes import Missing, Rate, RoundCounts, Status, success_rate

DIGESTS: Final = ("dataset", "cohort", "verifier", "settings")


_SCORED: Final = frozenset({"success", "failure"})
_NOT_SCORED: Final = frozenset({"infra_error", "unscored"})
_ANY: Final = _SCORED | _NOT_SCORED
#: A pair of sides' statuses; ``None``: the trial is missing on that side.
Pair = tuple[frozenset[str] | None, frozenset[str] | None]
#: Each transition as the union of (left statuses, right statuses) pairs: the one rule the
#: counts and the store's trial lists both follow.
TRANSITION_RULES: Final[dict[str, tuple[Pair, ...]]] = {
    "failure_to_success": ((frozenset({"failure"}), frozenset({"success"})),),
    "success_to_failure": ((frozenset({"success"}), frozenset({"failure"})),),
    "success_to_success": ((frozenset({"success"}), frozenset({"success"})),),
    "failure_to_failure": ((frozenset({"failure"}), frozenset({"failure"})),),
    # Not scored on a side (an execution error or unscored) is never a pass or a fail there:
    # which way it went is kept apart, since losing verdicts and gaining them differ.
    "scored_to_unscored": ((_SCORED, _NOT_SCORED),),
    "unscored_to_scored": ((_NOT_SCORED, _SCORED),),
    "unscored_both": ((_NOT_SCORED, _NOT_SCORED),),
    "missing_left": ((None, _ANY),),
    "missing_right": ((_ANY, None),),
}
TRANSITION_NAMES: Final = tuple(TRANSITION_RULES)


@dataclass(frozen=True, slots=True)
class Transitions:
    failure_to_success: int
    success_to_failure: int
    success_to_success: int
    failure_to_failure: int
    #: Present in both, scored (success or failure) on the left only.
    scored_to_unscored: int
    #: Present in both, scored on the right only.
    unscored_to_scored: int
    #: Present in both, scored on neither side.
    unscored_both: int
    missing_left: int
    missing_right: int


def _holds(statuses: frozenset[str] | None, status: str | None) -> bool:
    return status is None if statuses is None else status in statuses


def transition_of(left: str | None, right: str | None) -> str:
    """The transition of one trial from its left status to its right (None: missing)."""
    for name, pairs in TRANSITION_RULES.items():
        if any(_holds(a, left) and _holds(b, right) for a, b in pairs):
            return name
    raise ValueError(f"a trial missing on both sides has no transition: {left!r}, {right!r}")


def transitions(left: Mapping[str, Status], right: Mapping[str, Status]) -> Transitions:
    """Per-trial changes from ``left`` to ``right`` (each: trial id -> current status)."""
    counts = Counter(transition_of(left.get(t), right.get(t)) for t in left.keys() | right.keys())
    return Transitions(**{name: counts[name] for name in TRANSITION_NAMES})


def mcnemar_exact(failure_to_success: int, success_to_failure: int) -> float:
    """Two-sided exact McNemar p-value: a binomial test of the discordant pairs at 1/2."""
    n = failure_to_success + success_to_failure
    if n == 0:
        return 1.0
    k = min(failure_to_success, success_to_failure)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / (1 << n)
    return min(1.0, 2 * tail)


Side = Literal["left", "right", "both"]


@dataclass(frozen=True, slots=True)
class Condition:
    """One failed condition of the difference. Codes:

    - ``{side}_undeclared``: the round has no population declaration;
    - ``{side}_empty_population``: it declares 0 trials (never complete);
    - ``{side}_excess_trials``: more distinct trials reported than declared;
    - ``{side}_incomplete_coverage``: not every declared trial is scored;
    - ``{side}_{digest}_digest_undeclared``: that side declares no such digest;
    - ``{digest}_digest_mismatch`` (side ``both``): both declare it, differently.
    """

    code: str
    side: Side
    reason: str


@dataclass(frozen=True, slots=True)
class Difference:
    """An observed difference of success rates, not a statistical proof."""

    left: Rate
    right: Rate
    difference: float
    #: right - left exactly: success_r / scored_r - success_l / scored_l.
    exact: Fraction
    mcnemar_p: float


def _digest_conditions(
    left: Mapping[str, str | None], right: Mapping[str, str | None]
) -> list[Condition]:
    found: list[Condition] = []
    for name in DIGESTS:
        a, b = left.get(name), right.get(name)
        for side, value in (("left", a), ("right", b)):
            if value is None:
                found.append(
                    Condition(
                        f"{side}_{name}_digest_undeclared",
                        side,  # type: ignore[arg-type]
                        f"{side} round declares no {name} digest",
                    )
                )
        if a is not None and b is not None and a != b:
            found.append(Condition(f"{name}_digest_mismatch", "both", f"{name} digests differ"))
    return found


def _coverage_conditions(side: Side, counts: RoundCounts) -> list[Condition]:
    if counts.expected is None:
        return [Condition(f"{side}_undeclared", side, f"{side} round has no declared population")]
    found: list[Condition] = []
    if counts.expected == 0:
        found.append(
            Condition(
                f"{side}_empty_population",
                side,
                f"{side} round declares 0 trials, so it is never complete",
            )
        )
    if counts.reported > counts.expected:
        found.append(
            Condition(
                f"{side}_excess_trials",
                side,
                f"{side} round reports {counts.reported} distinct trials but declares "
                f"{counts.expected}",
            )
        )
    elif counts.scored != counts.expected:
        found.append(
            Condition(
                f"{side}_incomplete_coverage",
                side,
                f"{side} round is not completely scored ({counts.scored} of "
                f"{counts.expected} trials scored)",
            )
        )
    return found


def matched_difference(
    left: RoundCounts,
    right: RoundCounts,
    left_digests: Mapping[str, str | None],
    right_digests: Mapping[str, str | None],
    moves: Transitions,
) -> Difference | list[Condition]:
    """The difference, or every condition that keeps it from being shown."""
    conditions = _digest_conditions(left_digests, right_digests)
    conditions += _coverage_conditions("left", left) + _coverage_conditions("right", right)
    if conditions:
        return conditions
    left_rate, right_rate = success_rate(left), success_rate(right)
    # Complete coverage of at least one declared trial: both sides have scored trials.
    assert not isinstance(left_rate, Missing)
    assert not isinstance(right_rate, Missing)
    exact = Fraction(right.success, right.scored) - Fraction(left.success, left.scored)
    return Difference(
        left=left_rate,
        right=right_rate,
        difference=float(exact),
        exact=exact,
        mcnemar_p=mcnemar_exact(moves.failure_to_success, moves.success_to_failure),
    )
