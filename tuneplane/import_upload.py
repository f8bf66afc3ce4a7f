"""Delivering import snapshots to the current run: the glue between ``importers`` (pure
readers that write snapshots) and ``client`` (the reporter of ``tuneplane run``).

It lives beside the CLI, not in either room, because the dependency rule keeps them apart:
importers never talk to a server and the client never reads other tools' files.

Order, per snapshot: the observation events (the population declaration first, then the
events beside it, then the trial results) through the strict ``observations()`` call, 32 at
a time; then the trajectories through ``trajectory()``, waited for with ``flush()``; then
the reporter's counters say whether each one arrived. Everything carries its identity (the
snapshot's event IDs, the trajectories' round, trial and attempt), so sending a snapshot
again after a failure adds only what was missing: what arrived the first time is a
duplicate.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from tuneplane.client.errors import DeliveryFailed, InvalidObservation
from tuneplane.client.health import Health
from tuneplane.client.reporter import Reporter
from tuneplane.contract.limits import OBSERVATION_BATCH_MAX
from tuneplane.importers.snapshot import Snapshot

#: ``progress(what, done, total)`` as items are delivered.
Progress = Callable[[str, int, int], None]
#: How long the trajectories may take to settle (each batch is retried by the sender for
#: about 8 s; a snapshot holds at most 128 of them, 16 to a batch).
SETTLE_TIMEOUT_SECONDS: Final = 900.0
_POLL_SECONDS: Final = 0.5


@dataclass(frozen=True, slots=True)
class Delivered:
    """What one snapshot's upload did: events new to the server or already there, and
    trajectories sent (new or duplicates) or left out on purpose by the job's text cap."""

    round_id: str
    events_new: int
    events_duplicate: int
    trajectories_sent: int
    trajectories_left_out: int

    def describe(self) -> str:
        left_out = (
            f", {self.trajectories_left_out} left out by TUNEPLANE_JOB_VAL_UPLOAD_SAMPLES"
            if self.trajectories_left_out
            else ""
        )
        return (
            f"round {self.round_id} delivered: {self.events_new + self.events_duplicate} "
            f"events ({self.events_new} new, {self.events_duplicate} already there), "
            f"{self.trajectories_sent} trajectories{left_out}"
        )


class NotDelivered(Exception):
    """Part of a snapshot did not reach the server; ``message`` says what."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def job_reporter() -> Reporter:
    """The reporter of the ``tuneplane run`` job this process runs in; raises the SDK's
    ``NotConfigured`` outside one."""
    return Reporter.from_env()


def _send_events(
    reporter: Reporter, snapshot: Snapshot, progress: Progress | None
) -> tuple[int, int]:
    events = snapshot.observation_events(reporter.attempt)
    new = duplicate = 0
    for start in range(0, len(events), OBSERVATION_BATCH_MAX):
        chunk = events[start : start + OBSERVATION_BATCH_MAX]
        try:
            sent = reporter.observations(chunk)
        except (DeliveryFailed, InvalidObservation) as exc:
            raise NotDelivered(
                f"round {snapshot.round_id}: {start} of {len(events)} observation events "
                f"delivered, the rest not ({exc}); no trajectory was sent"
            ) from exc
        new += sent.new
        duplicate += sent.duplicate
        if progress is not None:
            progress("events delivered", start + len(chunk), len(events))
    return new, duplicate


def _wait_for_trajectories(
    reporter: Reporter, before: Health, total: int, progress: Progress | None
) -> None:
    deadline = time.monotonic() + SETTLE_TIMEOUT_SECONDS
    while True:
        settled = reporter.flush(timeout=min(_POLL_SECONDS, max(0.0, deadline - time.monotonic())))
        now = reporter.health()
        done = (
            now.trajectories_sent
            + now.trajectories_dropped
            + now.trajectories_not_uploaded
            - before.trajectories_sent
            - before.trajectories_dropped
            - before.trajectories_not_uploaded
        )
        if progress is not None:
            progress("trajectories delivered", min(done, total), total)
        if settled or time.monotonic() >= deadline:
            return


def _send_trajectories(
    reporter: Reporter, snapshot: Snapshot, progress: Progress | None
) -> tuple[int, int]:
    documents = snapshot.trajectories
    if not documents:
        return 0, 0
    before = reporter.health()
    for document in documents:
        # The snapshot's documents are the contract's own fields, checked when it was read.
        fields: dict[str, Any] = dict(document)
        reporter.trajectory(**fields)
    _wait_for_trajectories(reporter, before, len(documents), progress)
    after = reporter.health()
    sent = after.trajectories_sent - before.trajectories_sent
    left_out = after.trajectories_not_uploaded - before.trajectories_not_uploaded
    lost = len(documents) - sent - left_out
    if lost:
        reasons = {
            reason: count - before.trajectories_dropped_by_reason.get(reason, 0)
            for reason, count in after.trajectories_dropped_by_reason.items()
        }
        why = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()) if n > 0)
        raise NotDelivered(
            f"round {snapshot.round_id}: {lost} of {len(documents)} trajectories not "
            f"delivered ({why or 'still queued'})"
        )
    return sent, left_out


def upload(reporter: Reporter, snapshot: Snapshot, progress: Progress | None = None) -> Delivered:
    """Deliver ``snapshot`` to the reporter's run; :class:`NotDelivered` saying what did
    not arrive (sending the snapshot again completes it)."""
    new, duplicate = _send_events(reporter, snapshot, progress)
    sent, left_out = _send_trajectories(reporter, snapshot, progress)
    return Delivered(snapshot.round_id, new, duplicate, sent, left_out)


def upload_all(
    reporter: Reporter, snapshots: Sequence[Snapshot], progress: Progress | None = None
) -> list[Delivered]:
    """Each snapshot in turn; the first failure stops the rest."""
    return [upload(reporter, snapshot, progress) for snapshot in snapshots]
