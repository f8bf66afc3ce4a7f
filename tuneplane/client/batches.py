"""From queued ``report()`` calls to ``POST /api/v1/ingest/scalars`` bodies.

Runs on the sender thread, never on the caller's: validation happens here, so ``report()``
stays a dictionary copy and an append. A point is one metric at one step. Points that cannot
be sent are counted by reason, never dropped silently; NaN and ±inf are not errors but the
protocol's ``invalid`` entries.
"""

from __future__ import annotations

import math
import operator
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from tuneplane.contract.ids import metric_name_problem
from tuneplane.contract.limits import RUN_MAX_SERIES, SCALAR_BATCH_MAX_POINTS, STEP_MAX

#: Drop reasons counted before anything is sent.
BAD_STEP: Final = "invalid step"
BAD_NAME: Final = "invalid metric name"
NOT_A_NUMBER: Final = "not a number"
TOO_MANY_SERIES: Final = f"over {RUN_MAX_SERIES} series"

_FLOAT: Final = {float}


@dataclass(frozen=True, slots=True)
class Batch:
    """One request body: ``points`` (valid and invalid, ``invalid`` of them NaN/inf) plus
    ``merged`` points that a later report of the same metric and step replaced."""

    body: dict[str, object]
    points: int
    invalid: int
    merged: int

    @property
    def settles(self) -> int:
        """Queued points this batch accounts for."""
        return self.points + self.merged


def _kind(value: float) -> str:
    if math.isnan(value):
        return "nan"
    return "inf" if value > 0 else "-inf"


def _as_float(value: object) -> float | None:
    if isinstance(value, float):
        return value
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None


def _as_step(step: object) -> int | None:
    if step.__class__ is bool:
        return None
    try:
        value = operator.index(step)  # type: ignore[arg-type]
    except TypeError:
        return None
    return value if 0 <= value <= STEP_MAX else None


class BatchBuilder:
    """Accumulates points into batches of at most ``max_points``.

    Within one batch a ``(metric, step)`` reported twice is sent once, with the value
    reported last: the server would have replaced the first by the second anyway, and the
    protocol wants distinct steps within a series entry; the replaced point shares the fate
    of its replacement (``Batch.merged``). Metric names are checked once each; at most
    ``max_series`` distinct names are sent over the builder's life, because a request that
    would take a run past the server's series limit is refused whole, with every good point
    in it.
    """

    def __init__(
        self, max_points: int = SCALAR_BATCH_MAX_POINTS, max_series: int = RUN_MAX_SERIES
    ) -> None:
        self._max_points = max_points
        self._max_series = max_series
        self._names: set[str] = set()
        self._bad_names: dict[object, str] = {}
        self._pending: dict[str, dict[int, float | str]] = {}
        self._count = 0
        self._invalid = 0
        self._merged = 0
        #: The highest step in the batch: a call past it cannot repeat a (metric, step).
        self._last_step = -1
        #: When each step of the batch was reported (its last call's time).
        self._times: dict[int, float] = {}
        #: Points that will not be sent, by reason, until ``take_dropped``.
        self.dropped: Counter[str] = Counter()
        #: The first problem seen of each reason, for a log line.
        self.examples: dict[str, str] = {}

    def add(
        self, step: object, metrics: Mapping[object, object], at: float | None = None
    ) -> Iterator[Batch]:
        """Take one ``report()`` call, made at ``at`` (UNIX seconds; None: unsaid); yield
        every batch that became full."""
        checked = _as_step(step)
        if checked is None:
            self._drop(BAD_STEP, len(metrics), f"step {step!r} is not an integer 0..2**63-1")
            return
        if at is not None:
            self._times[checked] = at
        values = metrics.values()
        if (
            checked > self._last_step
            and self._count + len(metrics) <= self._max_points
            and self._names.issuperset(metrics)
            and set(map(type, values)) == _FLOAT
            and all(map(math.isfinite, values))  # type: ignore[arg-type]
        ):
            # The usual call, known names with finite floats at a new step: no check per
            # point is left to do.
            pending = self._pending
            for name, value in metrics.items():
                series = pending.get(name)  # type: ignore[call-overload]
                if series is None:
                    series = pending[name] = {}  # type: ignore[index]
                series[checked] = value
            self._count += len(metrics)
            self._last_step = checked
            if self._count >= self._max_points:
                yield self._take()
            return
        for name, value in metrics.items():
            if name not in self._names and not self._admit(name):
                continue
            number = _as_float(value)
            if number is None:
                self._drop(NOT_A_NUMBER, 1, f"{name}: {type(value).__name__} is not a number")
                continue
            series = self._pending.get(name)  # type: ignore[call-overload]
            if series is None:
                series = self._pending[name] = {}  # type: ignore[index]
            if checked in series:
                self._merged += 1
                if series[checked].__class__ is str:
                    self._invalid -= 1
            else:
                self._count += 1
            if math.isfinite(number):
                series[checked] = number
            else:
                series[checked] = _kind(number)
                self._invalid += 1
            if self._count >= self._max_points:
                yield self._take()
                if at is not None:  # the rest of this call is in the new batch
                    self._times[checked] = at
        # After any batch taken above: the points left of this call are in the new one.
        self._last_step = max(self._last_step, checked)

    def finish(self) -> Batch | None:
        """The partly filled batch, if any."""
        return self._take() if self._count else None

    def take_dropped(self) -> Counter[str]:
        """The points dropped since the last call, by reason."""
        dropped, self.dropped = self.dropped, Counter()
        return dropped

    def _admit(self, name: object) -> bool:
        """Check a name not seen before; remember good ones, count the rest."""
        if name in self._bad_names:
            self._drop(BAD_NAME, 1, self._bad_names[name])
            return False
        problem = metric_name_problem(name) if isinstance(name, str) else "must be a string"
        if problem is not None:
            message = f"{name!r}: {problem}"
            if len(self._bad_names) < 1_000:
                self._bad_names[name] = message
            self._drop(BAD_NAME, 1, message)
            return False
        if len(self._names) >= self._max_series:
            self._drop(TOO_MANY_SERIES, 1, f"{name!r}: a run holds at most {RUN_MAX_SERIES}")
            return False
        self._names.add(name)  # type: ignore[arg-type]
        return True

    def _drop(self, reason: str, points: int, example: str) -> None:
        self.dropped[reason] += points
        self.examples.setdefault(reason, example)

    def _take(self) -> Batch:
        series: list[dict[str, object]] = []
        invalid: list[dict[str, object]] = []
        for name, points in self._pending.items():
            steps: list[int] = []
            values: list[float] = []
            bad_steps: list[int] = []
            kinds: list[str] = []
            for step, value in points.items():
                if isinstance(value, float):
                    steps.append(step)
                    values.append(value)
                else:
                    bad_steps.append(step)
                    kinds.append(value)
            if steps:
                series.append({"name": name, "steps": steps, "values": values})
            if bad_steps:
                invalid.append({"name": name, "steps": bad_steps, "kinds": kinds})
        body: dict[str, object] = {"series": series}
        if invalid:
            body["invalid"] = invalid
        if self._times:
            body["reported_at"] = {"steps": list(self._times), "times": list(self._times.values())}
            self._times = {}
        batch = Batch(body, self._count, self._invalid, self._merged)
        self._pending = {}
        self._count = 0
        self._invalid = 0
        self._merged = 0
        self._last_step = -1
        return batch
