"""Server-side alert rules, judged as pure functions: new points, a series' last arrival,
a run's heartbeat or an evaluation round's difference go in; the episodes that open or
resolve come out. The server feeds them and the store records what they say.

A rule watches each of its subjects (a series, or the run itself) separately, with a
:class:`Watch`: whether an episode is open, and for ``change`` rules the window's first
point. A condition that holds while its episode is open changes nothing (no storm); one
that clears resolves it.

>>> rule = Rule(1, RuleSpec(kind="threshold", name="low", level="warn", metric="reward",
...                         op="below", value=0.0))
>>> [t.opens for t in judge_points(rule, "reward", Watch(), [(1, 0.5), (2, -1.0), (3, -2.0)])]
[True]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from tuneplane.contract.alert_rules import Rule, RuleSpec, Transition

#: A point as rules see it: (step, value), the value None when NaN or infinite.
Point = tuple[int, float | None]


@dataclass(slots=True)
class Watch:
    """What one rule remembers of one subject."""

    open: bool = False
    anchor_step: int | None = None
    anchor_value: float | None = None


def matches(pattern: str, name: str) -> bool:
    """Whether a rule's metric pattern (a glob: ``*``, ``?``, ``[…]``) names a series."""
    return fnmatchcase(name, pattern)


def _fmt(value: float) -> str:
    return f"{value:.6g}"


def _change(
    spec: RuleSpec, watch: Watch, step: int, value: float
) -> tuple[float, int, float] | None:
    """The change in percent from the window's first point (and that point), or None when
    this point cannot say; starts the next window when this one is over."""
    assert spec.window is not None
    if watch.anchor_step is None or watch.anchor_value is None:
        watch.anchor_step, watch.anchor_value = step, value
        return None
    anchor_step, anchor = watch.anchor_step, watch.anchor_value
    if step <= anchor_step:
        return None  # a late or repeated step says nothing about the window
    if step - anchor_step >= spec.window:
        watch.anchor_step, watch.anchor_value = step, value  # the next window starts here
    if anchor == 0:
        return None  # a change relative to 0 is not a percentage
    return 100 * (value - anchor) / abs(anchor), anchor_step, anchor


def _changed(spec: RuleSpec, change: float) -> bool:
    assert spec.percent is not None
    if spec.direction == "up":
        return change > spec.percent
    if spec.direction == "down":
        return -change > spec.percent
    return abs(change) > spec.percent


def _words(spec: RuleSpec, value: float | None, change: tuple[float, int, float] | None) -> str:
    """Why the condition holds or not, for the alert's text (only when one is stored)."""
    if value is None:
        return "NaN or infinite"
    if spec.kind == "threshold":
        assert spec.value is not None
        return f"{_fmt(value)} ({spec.op} {_fmt(spec.value)})"
    if spec.kind == "change" and change is not None:
        percent, anchor_step, anchor = change
        return (
            f"{percent:+.1f}% from {_fmt(anchor)} at step {anchor_step} to {_fmt(value)} "
            f"(more than {spec.percent:g}% {spec.direction} within {spec.window} steps)"
        )
    return f"{_fmt(value)}"


def _transition(
    rule: Rule, subject: str, opens: bool, step: int, value: float | None, change: Any
) -> Transition:
    spec = rule.spec
    words = _words(spec, value, change)
    if not opens:
        title = f"resolved: {spec.name} ({subject} at step {step})"
        return Transition(rule.id, subject, False, title[:200], f"{subject}: {words}", step)
    if spec.kind == "nan":
        title = f"{subject} is NaN or infinite at step {step}"
    elif spec.kind == "threshold":
        title = f"{subject} {spec.op} {_fmt(spec.value or 0.0)} at step {step}"
    else:
        title = f"{subject} changed sharply at step {step}"
    text = f"rule {spec.name!r}: {subject} {words}"
    return Transition(rule.id, subject, True, title[:200], text, step)


def judge_points(
    rule: Rule, subject: str, watch: Watch, points: Iterable[Point]
) -> list[Transition]:
    """Judge new points of one series (in the order they arrived); ``watch`` is updated.
    Only ``nan``, ``threshold`` and ``change`` rules open episodes here; a ``stall`` episode
    resolves when its series receives a point. Words are made only for what is stored:
    this runs for every point a rule watches."""
    spec = rule.spec
    kind, limit, above = spec.kind, spec.value, spec.op == "above"
    found: list[Transition] = []
    for step, value in points:
        change = None
        if kind == "nan":
            held = value is None
        elif kind == "stall":
            held = False
        elif value is None:
            continue
        elif kind == "threshold":
            held = value > limit if above else value < limit  # type: ignore[operator]
        else:
            change = _change(spec, watch, step, value)
            if change is None:
                continue
            held = _changed(spec, change[0])
        if held != watch.open:
            watch.open = held
            found.append(_transition(rule, subject, held, step, value, change))
    return found


class Extent:
    """What the quick tests of every rule over one series' new values need, each part
    computed once per series (at C speed) and only when a rule asks for it: a batch known to
    hold no NaN (``invalid=False``, as every Arena batch) costs a ``nan`` rule nothing."""

    __slots__ = ("_finite", "_hi", "_lo", "_values", "invalid")

    def __init__(self, values: Sequence[float | None], invalid: bool | None = None) -> None:
        self._values = values
        #: Some value is NaN or infinite (None).
        self.invalid: bool = None in values if invalid is None else invalid
        self._finite: Sequence[float] | None = None
        # NaN: not computed yet (a least or greatest finite value is never NaN).
        self._lo: float | None = math.nan
        self._hi: float | None = math.nan

    def _numbers(self) -> Sequence[float]:
        if self._finite is not None:
            return self._finite
        finite: Sequence[float] = (
            [value for value in self._values if value is not None] if self.invalid else self._values  # type: ignore[assignment]
        )
        self._finite = finite
        return finite

    @property
    def all_invalid(self) -> bool:
        return self.invalid and not self._numbers()

    @property
    def lo(self) -> float | None:
        """The least finite value (None: no finite value)."""
        if self._lo != self._lo:
            self._lo = min(self._numbers(), default=None)
        return self._lo

    @property
    def hi(self) -> float | None:
        """The greatest finite value (None: no finite value)."""
        if self._hi != self._hi:
            self._hi = max(self._numbers(), default=None)
        return self._hi


#: A series' quick test pays from this many new points on: fewer are quicker judged.
QUICK_TEST_MIN_POINTS = 3


@dataclass(frozen=True, slots=True)
class SeriesRules:
    """The rules that watch one series name, with its project-wide ``nan`` and
    ``threshold`` rules folded into bounds: while none of those has an episode open on the
    run, new values inside the bounds leave all of them quiet, so a series watched by many
    such rules costs one test instead of one per rule."""

    rules: tuple[Rule, ...]
    #: The rules the bounds stand for, and the others (always judged one by one).
    folded: frozenset[int]
    rest: tuple[Rule, ...]
    nan: bool  # a folded nan rule
    above: float  # the least limit of the folded "above" thresholds (inf: none)
    below: float  # the greatest limit of the folded "below" thresholds (-inf: none)

    @classmethod
    def of(cls, rules: tuple[Rule, ...]) -> SeriesRules:
        # Folding costs nothing more than the rules' own quick tests: they share the extent.
        foldable = [r for r in rules if r.run_id is None and r.spec.kind in ("nan", "threshold")]
        limits = [(r.spec.op, r.spec.value) for r in foldable if r.spec.kind == "threshold"]
        return cls(
            rules,
            frozenset(r.id for r in foldable),
            tuple(r for r in rules if r not in foldable),
            any(r.spec.kind == "nan" for r in foldable),
            min((v for op, v in limits if op == "above" and v is not None), default=math.inf),
            max((v for op, v in limits if op == "below" and v is not None), default=-math.inf),
        )

    def extent_of(self, values: Sequence[float | None], invalid: bool) -> Extent | None:
        """The extent of new ``values`` (``invalid``: some is None) when the bounds or the
        rules' quick tests need one, else None (a point or two are quicker judged)."""
        if self.folded or len(values) >= QUICK_TEST_MIN_POINTS:
            return Extent(values, invalid)
        return None

    def to_judge(self, extent: Extent | None, open_rules: set[int]) -> tuple[Rule, ...]:
        """The rules that must judge new values of this ``extent`` (from :meth:`extent_of`)
        on a run whose rules with an open episode are ``open_rules``."""
        if extent is None or not self.folded or not self.folded.isdisjoint(open_rules):
            return self.rules
        if self.nan and extent.invalid:
            return self.rules
        # A threshold holds at a finite value only: None lo/hi (no finite value) is quiet.
        if self.above < math.inf and (hi := extent.hi) is not None and hi > self.above:
            return self.rules
        if self.below > -math.inf and (lo := extent.lo) is not None and lo < self.below:
            return self.rules
        return self.rest


def _change_quiet(spec: RuleSpec, watch: Watch, last_step: int, extent: Extent) -> bool:
    """Whether no point can change a closed ``change`` watch: the window's first point
    stays for every step (no new window starts) and the least and greatest values are no
    change (the change is monotonic in the value, computed as :func:`_change` does)."""
    anchor_step, anchor = watch.anchor_step, watch.anchor_value
    if watch.open or anchor_step is None or anchor is None or anchor == 0:
        return False
    assert spec.window is not None
    if last_step - anchor_step >= spec.window:
        return False
    lo, hi = extent.lo, extent.hi
    if lo is None or hi is None:
        return True  # no finite value: a change rule passes over the others
    return not any(_changed(spec, 100 * (value - anchor) / abs(anchor)) for value in (lo, hi))


def _quiet(rule: Rule, watch: Watch, steps: Sequence[int], extent: Extent) -> bool:
    """Whether no new point can change the watch, from the values' extent alone: a watched
    series costs little while nothing happens."""
    spec = rule.spec
    kind = spec.kind
    if kind == "nan":
        return extent.all_invalid if watch.open else not extent.invalid
    if kind == "change":
        return _change_quiet(spec, watch, max(steps), extent)
    if kind != "threshold":
        return False  # a stall rule is judged by judge_series itself
    limit = spec.value
    assert limit is not None
    # A threshold passes over NaN and infinite values: no finite value (None) is quiet.
    if spec.op == "above":
        if watch.open:
            return (lo := extent.lo) is None or lo > limit
        return (hi := extent.hi) is None or hi <= limit
    if watch.open:
        return (hi := extent.hi) is None or hi < limit
    return (lo := extent.lo) is None or lo >= limit


def judge_series(
    rule: Rule,
    subject: str,
    watch: Watch,
    steps: Sequence[int],
    values: Sequence[float | None],
    extent: Extent | None = None,
) -> list[Transition]:
    """:func:`judge_points` over a series' new points given as steps and values (in the
    order they arrived), of which ``extent`` may be given when the caller has it."""
    if not steps or (rule.spec.kind == "stall" and not watch.open):
        return []  # points only resolve a stall
    if len(steps) >= QUICK_TEST_MIN_POINTS and _quiet(rule, watch, steps, extent or Extent(values)):
        return []
    return judge_points(rule, subject, watch, zip(steps, values, strict=True))


def judge_stall(
    rule: Rule, subject: str, watch: Watch, last_arrival: float, now: float
) -> Transition | None:
    """A ``stall`` rule over a series whose last point arrived at ``last_arrival``."""
    assert rule.spec.seconds is not None
    quiet = now - last_arrival
    if watch.open or quiet <= rule.spec.seconds:
        return None
    watch.open = True
    title = f"{subject}: no point for {quiet:.0f} s"
    text = (
        f"rule {rule.spec.name!r}: {subject} received no point for more than "
        f"{rule.spec.seconds:g} s"
    )
    return Transition(rule.id, subject, True, title[:200], text)


def judge_heartbeat(
    rule: Rule, watch: Watch, health_at: float, ended: bool, now: float
) -> Transition | None:
    """A ``heartbeat`` rule over a run whose last heartbeat came at ``health_at``; a run that
    ended has no heartbeat to wait for."""
    assert rule.spec.seconds is not None
    quiet = now - health_at
    stale = not ended and quiet > rule.spec.seconds
    if stale == watch.open:
        return None
    watch.open = stale
    if stale:
        title = f"heartbeat stale for {quiet:.0f} s"
        text = f"rule {rule.spec.name!r}: no heartbeat for more than {rule.spec.seconds:g} s"
    else:
        title = f"resolved: {rule.spec.name}"
        text = "the run ended" if ended else f"a heartbeat arrived ({quiet:.0f} s ago)"
    return Transition(rule.id, "", stale, title, text)


def judge_eval_drop(
    rule: Rule, watch: Watch, round_label: str, difference: float | None
) -> Transition | None:
    """An ``eval_drop`` rule over a round whose success rate minus the baseline's is
    ``difference`` (a fraction), or None when matched evidence does not allow the comparison
    (digests differ, a round is not completely scored…): then nothing changes."""
    if difference is None:
        return None
    assert rule.spec.points is not None
    assert rule.spec.baseline is not None
    drop = -100 * difference
    held = drop > rule.spec.points
    if held == watch.open:
        return None
    watch.open = held
    base = rule.spec.baseline
    versus = f"baseline {base.run}/{base.round_id}"
    if held:
        title = f"round {round_label}: success rate {drop:.1f} points below {versus}"
        text = f"rule {rule.spec.name!r}: a drop of more than {rule.spec.points:g} points"
    else:
        title = f"resolved: {rule.spec.name} (round {round_label})"
        text = f"round {round_label} is {-drop:+.1f} points against {versus}"
    return Transition(rule.id, "", held, title[:200], text)
