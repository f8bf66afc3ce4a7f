"""Observation events on the SDK side: IDs, histograms counted from raw values, and the
check every event passes before it is queued or sent.

The check is the server's own (``tuneplane.contract.observations.parse_observation``), run
on the caller's thread: an event the SDK accepts is one the server accepts, and a refused
event is refused at the call, where the caller can still be told. Before the check, values
from NumPy or PyTorch (a scalar, a one-element tensor, an integer step) are read as plain
Python numbers, so that a tensor changed in place later does not change what was reported.
"""

from __future__ import annotations

import bisect
import itertools
import math
import operator
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tuneplane.client.errors import InvalidObservation
from tuneplane.client.queue import step_value
from tuneplane.contract.errors import Violation
from tuneplane.contract.observations import bounds_problem, parse_observation


class EventIds:
    """Event IDs unique across processes and execution attempts, so that only a retry of
    the same event is a duplicate on the server: ``a<attempt>-<12 random hex>-<n>``."""

    def __init__(self, attempt: int | None) -> None:
        self._prefix = f"a{attempt or 0}-{secrets.token_hex(6)}"
        self._counter = itertools.count()

    def next(self) -> str:
        # next() on itertools.count is atomic under the GIL: no lock needed.
        return f"{self._prefix}-{next(self._counter)}"


@dataclass(frozen=True, slots=True)
class ObservationsSent:
    """What ``Reporter.observations()`` delivered: ``new`` events stored, ``duplicate``
    ones the server already had (a retry, or an ``event_id`` sent before), and every
    event's ID in the order given."""

    new: int
    duplicate: int
    event_ids: tuple[str, ...]


def histogram(values: Iterable[float], bounds: Sequence[float]) -> dict[str, list[Any]]:
    """Count ``values`` into the buckets ``(-inf, b0], (b0, b1], …, (bn-1, +inf)`` of
    ``bounds`` (1-64 finite, strictly increasing numbers): every value is counted, nothing
    is estimated. Raises ValueError for bad bounds and for NaN or infinite values.

    >>> histogram([0.5, 1.0, 3.0, 9.0], bounds=[0, 1, 2, 4, 8])
    {'bounds': [0, 1, 2, 4, 8], 'counts': [0, 2, 0, 1, 0, 1]}
    """
    edges = _numbers(bounds)
    problem = bounds_problem(edges)
    if problem is not None:
        raise ValueError(f"bounds {problem}")
    as_list = getattr(values, "tolist", None)  # a NumPy array or a tensor, read at once
    items: Iterable[Any] = as_list() if callable(as_list) else values
    counts = [0] * (len(edges) + 1)
    for value in items:
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(
                f"values: {number} cannot be counted in a histogram; leave NaN and "
                "infinities out and report how many there were apart"
            )
        counts[bisect.bisect_left(edges, number)] += 1
    return {"bounds": edges, "counts": counts}


def prepare(event: object, ids: EventIds, path: str = "event") -> dict[str, Any]:
    """The event as it will be sent: a copy without None values, numbers read as plain
    Python numbers, an ``event_id`` given when it has none. Raises
    :class:`InvalidObservation` naming every rule it breaks."""
    if not isinstance(event, Mapping):
        raise InvalidObservation((Violation(path, "must be a mapping"),))
    item: dict[str, Any] = {key: value for key, value in event.items() if value is not None}
    if "event_id" not in item:
        item["event_id"] = ids.next()
    for key in ("step", "trial_attempt", "expected"):
        if key in item:
            item[key] = step_value(item[key])
    if "reward" in item:
        item["reward"] = _scalar(item["reward"])
    fields = item.get("fields")
    if isinstance(fields, Mapping):
        if not all(isinstance(key, str) for key in fields):
            raise InvalidObservation((Violation(f"{path}.fields", "names must be strings"),))
        item["fields"] = {key: _scalar(value) for key, value in fields.items()}
    shape = item.get("histogram")
    if isinstance(shape, Mapping):
        item["histogram"] = {
            "bounds": _or_as_is(_numbers, shape.get("bounds")),
            "counts": _or_as_is(_integers, shape.get("counts")),
        }
    try:
        _, violations = parse_observation(path, item)
    except Exception as exc:  # e.g. an integer beyond 64 bits that JSON cannot carry
        violations = [Violation(path, f"cannot be sent as JSON ({type(exc).__name__}: {exc})")]
    if violations:
        raise InvalidObservation(tuple(violations))
    return item


def _scalar(value: object) -> object:
    """A field value as ``str``, ``bool``, ``int`` or ``float`` where it can be one; else
    as it is, for the check to refuse."""
    if value.__class__ in (str, bool, int, float):
        return value
    if isinstance(value, str):
        return str(value)
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        pass
    try:
        return float(value)  # type: ignore[arg-type]
    except Exception:
        return value


def _numbers(values: Iterable[Any]) -> list[Any]:
    return [v if v.__class__ in (int, float) else float(v) for v in values]


def _integers(values: Iterable[Any]) -> list[object]:
    return [step_value(value) for value in values]


def _or_as_is(convert: Callable[[Any], object], value: object) -> object:
    """``convert(value)``, or ``value`` unchanged when it cannot be converted (the check
    then names the rule it breaks)."""
    try:
        return convert(value)
    except Exception:
        return value
