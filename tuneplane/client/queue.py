"""The bounded queues between the training thread and the sender thread, and their
counters: points from ``report()``, observation events from ``event()`` and its kin.

``put`` is the caller's hot path: a lock, a capacity check, an append. Everything that
costs more (validation, batching, JSON, HTTP) happens on the sender thread after ``take``.
A point stays counted in ``queue_size`` from ``put`` until the sender ``settle``s it as sent
or dropped, so the capacity bounds the memory of queued and in-flight points together.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from typing import Final

from tuneplane.client.health import Health
from tuneplane.contract.limits import STEP_MAX

_clock: Final = time.time
#: Drop reasons decided at the door.
QUEUE_FULL: Final = "queue full"
CLOSED: Final = "reporter closed"

#: Queued ``report()`` calls, as three parallel lists: the steps (checked later), private
#: copies of the metrics and when each call was made (UNIX seconds).
Taken = tuple[list[object], list[dict[object, object]], list[float]]


class Ledger:
    """Counts of what was admitted (points or events) until each reached its end: sent or
    dropped, by reason. ``pending`` covers what waits and what is being sent, so that the
    capacity bounds both; ``mark``/``wait_settled`` let ``flush()`` wait for an end."""

    def __init__(self, capacity: int, what: str) -> None:
        if capacity < 1:
            raise ValueError(f"queue capacity must be at least 1 {what}")
        self.capacity = capacity
        self._lock = threading.Lock()
        self._settled_changed = threading.Condition(self._lock)
        self._pending = 0  # admitted and not settled, waiting or being sent
        self._settled = 0  # admitted, then sent or dropped
        self._limit = capacity  # -1 once closed: one comparison refuses both cases
        self._closed = False
        self._abandoned = False
        self._sent = 0
        self._invalid = 0
        self._dropped: Counter[str] = Counter()
        self._spooled = 0  # journaled (durable spool), not yet acknowledged by the server

    def _discard_waiting(self) -> None:
        """Forget what waits to be taken (its count stays pending); called under the lock."""
        raise NotImplementedError

    def refuse(self, reason: str, count: int = 1) -> None:
        """Count what was refused before queueing (bad input)."""
        with self._lock:
            self._dropped[reason] += count

    def settle(
        self,
        *,
        sent: int = 0,
        invalid: int = 0,
        dropped: Mapping[str, int] | None = None,
        spooled: int = 0,
    ) -> None:
        """What was taken earlier reached its end: sent (``invalid`` of the points as
        NaN/inf entries), dropped, by reason, or ``spooled``: journaled on disk, where it
        waits for the server's answer (:meth:`resolve`) or for ``tuneplane sync``."""
        with self._lock:
            if self._abandoned:
                return
            lost = 0
            if dropped:
                for reason, count in dropped.items():
                    if count:
                        self._dropped[reason] += count
                        lost += count
            self._sent += sent
            self._invalid += invalid
            self._spooled += spooled
            self._pending -= sent + lost + spooled
            self._settled += sent + lost + spooled
            self._settled_changed.notify_all()

    def resolve(
        self, *, sent: int = 0, invalid: int = 0, dropped: Mapping[str, int] | None = None
    ) -> None:
        """Spooled items the server has now answered: stored, or refused by rule."""
        with self._lock:
            lost = sum(dropped.values()) if dropped else 0
            if dropped:
                self._dropped.update(dropped)
            self._sent += sent
            self._invalid += invalid
            self._spooled -= sent + lost

    def close(self) -> None:
        """Refuse anything further (it counts as dropped: reporter closed)."""
        with self._lock:
            self._closed = True
            self._limit = -1

    def drain_as_dropped(self, reason: str, *, abandon: bool = False) -> None:
        """Give up on everything pending (the sender broke, or is out of time). With
        ``abandon``, later settlements are ignored: the sender outlived its deadline and
        whatever it still does is not waited for."""
        with self._lock:
            self._abandoned = self._abandoned or abandon
            self._discard_waiting()
            if self._pending:
                self._dropped[reason] += self._pending
                self._settled += self._pending
                self._pending = 0
            self._settled_changed.notify_all()

    @property
    def pending(self) -> int:
        return self._pending

    def mark(self) -> int:
        """A position to flush up to: everything queued until now."""
        with self._lock:
            return self._settled + self._pending

    def wait_settled(self, mark: int, timeout: float) -> bool:
        """Wait until everything queued before ``mark`` was sent or dropped."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._settled < mark:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._settled_changed.wait(remaining)
            return True


class PointQueue(Ledger):
    def __init__(
        self, capacity: int, wake_at: int, wake: threading.Event, next_step: int = 0
    ) -> None:
        super().__init__(capacity, "point")
        self._wake_at = wake_at
        self._wake = wake
        # Two lists rather than one of (step, metrics) tuples: a tuple holding a dict stays
        # tracked by the garbage collector, and a full queue of them made full collections
        # both more frequent and longer (tens of ms on the training thread). A dict of
        # floats is not tracked at all.
        self._steps: list[object] = []
        self._metrics: list[dict[object, object]] = []
        # The time of each call, sent with its points: a batch delivered late (after an
        # outage, or by `tuneplane sync`) keeps the time its points were reported at.
        self._times: list[float] = []
        self._waiting = 0  # points in the two lists
        self._next_step = next_step
        self._woken = False
        self._failed_sends = 0

    def put(self, metrics: dict[object, object], step: object) -> bool:
        """Queue one call's points; False when they were dropped instead (full, closed).

        The training thread's hot path: keep it to a few attribute updates."""
        points = len(metrics)
        now = _clock()
        with self._lock:
            if step is None:
                step = self._next_step
                self._next_step = step + 1
            elif step.__class__ is int and 0 <= step <= STEP_MAX:
                self._next_step = step + 1
            else:
                step = self._unusual_step(step)
            if self._pending + points > self._limit:
                self._dropped[CLOSED if self._closed else QUEUE_FULL] += points
                return False
            self._pending += points
            self._waiting += points
            self._steps.append(step)
            self._metrics.append(metrics)
            self._times.append(now)
            if self._waiting < self._wake_at or self._woken:
                return True
            self._woken = True
        self._wake.set()
        return True

    def reached_step(self) -> int:
        """The step the run has reached: that of the last point queued, or the one before
        the first automatic step (-1 on a new run)."""
        with self._lock:
            return self._next_step - 1

    def put_at(self, metrics: dict[object, object], step: int) -> bool:
        """Queue points at ``step`` without moving the automatic step (system metrics)."""
        now = _clock()
        with self._lock:
            if self._pending + len(metrics) > self._limit:
                self._dropped[CLOSED if self._closed else QUEUE_FULL] += len(metrics)
                return False
            self._pending += len(metrics)
            self._waiting += len(metrics)
            self._steps.append(step)
            self._metrics.append(metrics)
            self._times.append(now)
        return True

    def _unusual_step(self, step: object) -> object:
        """A numpy or torch integer as an ``int``. A step that is no valid integer is queued
        as it is and refused, counted, by the sender; the automatic counter carries on from
        the last good one."""
        value = step_value(step)
        if value.__class__ is int and 0 <= value <= STEP_MAX:
            self._next_step = value + 1
        return value

    def take(self) -> Taken:
        """Everything queued so far, for the sender; the points stay pending until settled."""
        with self._lock:
            taken = (self._steps, self._metrics, self._times)
            self._steps, self._metrics, self._times = [], [], []
            self._waiting = 0
            self._woken = False
        return taken

    def count_failed_send(self) -> None:
        with self._lock:
            self._failed_sends += 1

    def _discard_waiting(self) -> None:
        self._steps, self._metrics, self._times = [], [], []
        self._waiting = 0

    def health(self) -> Health:
        with self._lock:
            return Health(
                queued=self._settled + self._pending,
                sent=self._sent,
                dropped=sum(self._dropped.values()),
                failed_sends=self._failed_sends,
                queue_size=self._pending,
                queue_capacity=self.capacity,
                invalid=self._invalid,
                dropped_by_reason=dict(self._dropped),
                spooled=self._spooled,
            )


class EventQueue(Ledger):
    """Observation events, already validated and given their IDs, waiting for the sender.

    Small and bounded (``OBSERVATION_QUEUE_MAX`` events of at most 16 KiB each): events are
    rare next to points, so one lock and one list are plenty."""

    def __init__(self, capacity: int, wake_at: int, wake: threading.Event) -> None:
        super().__init__(capacity, "event")
        self._wake_at = wake_at
        self._wake = wake
        self._events: list[dict[str, object]] = []

    def put(self, event: dict[str, object]) -> bool:
        """Queue one event; False when it was dropped instead (full, closed)."""
        with self._lock:
            if self._pending + 1 > self._limit:
                self._dropped[CLOSED if self._closed else QUEUE_FULL] += 1
                return False
            self._pending += 1
            self._events.append(event)
            if len(self._events) < self._wake_at:
                return True
        self._wake.set()
        return True

    def take(self) -> list[dict[str, object]]:
        """Every waiting event; they stay pending until settled."""
        with self._lock:
            taken, self._events = self._events, []
        return taken

    def _discard_waiting(self) -> None:
        self._events = []

    def add_to(self, health: Health) -> Health:
        """``health`` (the points' counters) with the events' counters filled in."""
        with self._lock:
            return replace(
                health,
                events_queued=self._settled + self._pending,
                events_sent=self._sent,
                events_dropped=sum(self._dropped.values()),
                events_queue_size=self._pending,
                events_queue_capacity=self.capacity,
                events_dropped_by_reason=dict(self._dropped),
                events_spooled=self._spooled,
            )


def step_value(step: object) -> object:
    """A numpy or torch integer as an ``int``; anything else unchanged (refused later)."""
    index = getattr(step, "__index__", None)
    if index is None or step.__class__ is bool:
        return step
    try:
        value: object = index()
    except Exception:
        return step
    return value
