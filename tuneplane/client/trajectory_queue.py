"""Trajectory documents between ``trajectory()`` and the server: the bounded queue, the
per-step buffer that keeps a training step's stratified sample, and the request batches.

The queue is bounded twice, in documents (``TRAJECTORY_QUEUE_MAX``) and in bytes
(``TRAJECTORY_QUEUE_MAX_BYTES``); a document counts against both from ``put`` until it is
sent, dropped or left out, buffered and in-flight ones included. The buffer lives on the
sender thread: choosing a step's sample costs the training thread nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

import orjson

from tuneplane.client.health import Health
from tuneplane.client.queue import CLOSED, QUEUE_FULL, Ledger
from tuneplane.client.trajectories import Prepared
from tuneplane.contract.limits import (
    INGEST_BODY_MAX_BYTES,
    ROLLOUT_SAMPLES_PER_STEP,
    TRAJECTORY_BATCH_MAX,
)
from tuneplane.contract.trajectories import Category, stratified

#: Seconds a training step's rollouts wait for more of the same step before its sample is
#: chosen: rollouts of one step come together, and a step that ends the run still goes out.
ROLLOUT_STEP_WAIT_SECONDS: Final = 2.0
#: Steps whose uploads are remembered, so that a rollout arriving after its step's sample
#: was chosen gets only what is left of the step's cap (the server refuses one more).
_STEPS_REMEMBERED: Final = 4096
_BODY_OVERHEAD: Final = len(b'{"trajectories":[]}')


class TrajectoryQueue(Ledger):
    """Checked documents waiting for the sender (see the module's docstring)."""

    def __init__(self, capacity: int, capacity_bytes: int, wake: threading.Event) -> None:
        super().__init__(capacity, "trajectory")
        if capacity_bytes < 1:
            raise ValueError("trajectory queue capacity must be at least 1 byte")
        self.capacity_bytes = capacity_bytes
        self._wake = wake
        self._waiting: list[Prepared] = []
        self._bytes = 0  # of pending documents: waiting, buffered or being sent
        self._not_uploaded = 0
        self._flush_wanted = False

    def put(self, document: Prepared) -> str | None:
        """Queue one document; the reason it was dropped instead (full, closed), or None."""
        with self._lock:
            if self._pending + 1 > self._limit or self._bytes + document.size > self.capacity_bytes:
                reason = CLOSED if self._closed else QUEUE_FULL
                self._dropped[reason] += 1
                return reason
            self._pending += 1
            self._bytes += document.size
            self._waiting.append(document)
            if len(self._waiting) < TRAJECTORY_BATCH_MAX:
                return None
        self._wake.set()
        return None

    def take(self) -> tuple[list[Prepared], bool]:
        """Every waiting document (pending until settled), and whether ``flush()`` asked
        for buffered rollouts to go out now."""
        with self._lock:
            taken, self._waiting = self._waiting, []
            flush, self._flush_wanted = self._flush_wanted, False
        return taken, flush

    def want_flush(self) -> None:
        with self._lock:
            self._flush_wanted = True

    def release(self, size: int) -> None:
        """The bytes of documents the sender settled."""
        with self._lock:
            self._bytes = max(0, self._bytes - size)

    def count_left_out(self) -> None:
        """A document the evaluation text cap left out before it was queued."""
        with self._lock:
            self._not_uploaded += 1

    def settle_left_out(self, documents: Sequence[Prepared]) -> None:
        """Queued documents a training step's cap left out: settled, neither sent nor
        dropped."""
        if not documents:
            return
        with self._lock:
            if self._abandoned:
                return
            self._not_uploaded += len(documents)
            self._pending -= len(documents)
            self._settled += len(documents)
            self._bytes = max(0, self._bytes - sum(d.size for d in documents))
            self._settled_changed.notify_all()

    def _discard_waiting(self) -> None:
        self._waiting = []
        self._bytes = 0  # everything pending is being dropped with them

    def add_to(self, health: Health) -> Health:
        """``health`` with the trajectories' counters filled in."""
        with self._lock:
            return replace(
                health,
                trajectories_queued=self._settled + self._pending,
                trajectories_sent=self._sent,
                trajectories_dropped=sum(self._dropped.values()),
                trajectories_queue_size=self._pending,
                trajectories_queue_capacity=self.capacity,
                trajectories_not_uploaded=self._not_uploaded,
                trajectories_dropped_by_reason=dict(self._dropped),
                trajectories_spooled=self._spooled,
            )


@dataclass
class _Step:
    since: float
    by_category: dict[Category, list[Prepared]] = field(default_factory=dict)


class RolloutBuffer:
    """Training rollouts of the steps not done yet. A step is done when a higher step
    arrives, when it has waited :data:`ROLLOUT_STEP_WAIT_SECONDS`, or at ``flush()`` and
    ``close()``; then at most ``cap`` of its rollouts are chosen, in turn from each
    diagnostic category (``stratified``). Only the first ``cap`` of a category are kept
    while a step waits: the choice never reaches further."""

    def __init__(
        self, cap: int = ROLLOUT_SAMPLES_PER_STEP, wait: float = ROLLOUT_STEP_WAIT_SECONDS
    ) -> None:
        self.cap = cap
        self.wait = wait
        self._steps: dict[int, _Step] = {}
        self._uploaded: dict[int, int] = {}
        self._highest = -1

    def add(self, document: Prepared, now: float) -> bool:
        """Buffer one rollout; False when it is left out at once (the step's cap is full)."""
        step = document.step
        assert step is not None
        assert document.category is not None
        room = self.cap - self._uploaded.get(step, 0)
        entry = self._steps.get(step)
        if entry is None:
            entry = self._steps[step] = _Step(now)
        kept = entry.by_category.setdefault(document.category, [])
        if len(kept) >= room:
            return False
        kept.append(document)
        self._highest = max(self._highest, step)
        return True

    def release(self, now: float, everything: bool) -> tuple[list[Prepared], list[Prepared]]:
        """``(chosen, left_out)`` of the steps that are done."""
        chosen: list[Prepared] = []
        left_out: list[Prepared] = []
        for step in sorted(self._steps):
            entry = self._steps[step]
            if not (everything or step < self._highest or now - entry.since >= self.wait):
                continue
            del self._steps[step]
            room = self.cap - self._uploaded.get(step, 0)
            picked = stratified(entry.by_category, room)
            chosen += picked
            ids = {id(document) for document in picked}
            left_out += [d for kept in entry.by_category.values() for d in kept if id(d) not in ids]
            self._remember(step, len(picked))
        return chosen, left_out

    def _remember(self, step: int, uploaded: int) -> None:
        self._uploaded[step] = self._uploaded.get(step, 0) + uploaded
        if len(self._uploaded) > _STEPS_REMEMBERED:
            del self._uploaded[min(self._uploaded)]


def requests(
    documents: Sequence[Prepared],
    max_documents: int = TRAJECTORY_BATCH_MAX,
    max_bytes: int = INGEST_BODY_MAX_BYTES,
) -> Iterator[list[Prepared]]:
    """The documents in batches of at most ``max_documents`` and ``max_bytes`` of body."""
    batch: list[Prepared] = []
    size = _BODY_OVERHEAD
    for document in documents:
        grown = size + document.size + (1 if batch else 0)  # the comma
        if batch and (len(batch) >= max_documents or grown > max_bytes):
            yield batch
            batch, grown = [], _BODY_OVERHEAD + document.size
        batch.append(document)
        size = grown
    if batch:
        yield batch


def request_body(batch: Sequence[Prepared]) -> dict[str, list[orjson.Fragment]]:
    """The request body: each document's JSON as it was encoded at the call."""
    return {"trajectories": [orjson.Fragment(document.body) for document in batch]}
