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

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from tuneplane.client.errors import DeliveryFailed, InvalidObservation
from tuneplane.client.health import Health
from tuneplane.client.reporter import Reporter
from tuneplane.contract.limits import OBSERVATION_BATCH_MAX
from tuneplane.importers.nemo_rl import read_step
from tuneplane.importers.nemo_rl_files import StepFile, Watch
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
    reporter: Reporter, label: str, documents: list[dict[str, Any]], progress: Progress | None
) -> tuple[int, int]:
    if not documents:
        return 0, 0
    before = reporter.health()
    for document in documents:
        # The snapshot's documents are the contract's own fields, checked when it was read.
        reporter.trajectory(**trajectory_fields(document))
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
            f"{label}: {lost} of {len(documents)} trajectories not "
            f"delivered ({why or 'still queued'})"
        )
    return sent, left_out


def trajectory_fields(document: dict[str, Any]) -> dict[str, Any]:
    """A snapshot's trajectory as ``Reporter.trajectory()`` arguments: a rollout whose
    reward was invalid is sent with a NaN reward, which the SDK marks invalid."""
    fields = dict(document)
    if fields.pop("reward_invalid", False):
        fields["reward"] = math.nan
    return fields


def upload(reporter: Reporter, snapshot: Snapshot, progress: Progress | None = None) -> Delivered:
    """Deliver ``snapshot`` to the reporter's run; :class:`NotDelivered` saying what did
    not arrive (sending the snapshot again completes it)."""
    new, duplicate = _send_events(reporter, snapshot, progress)
    label = f"round {snapshot.round_id}"
    sent, left_out = _send_trajectories(reporter, label, snapshot.trajectories, progress)
    return Delivered(snapshot.round_id, new, duplicate, sent, left_out)


def upload_all(
    reporter: Reporter, snapshots: Sequence[Snapshot], progress: Progress | None = None
) -> list[Delivered]:
    """Each snapshot in turn; the first failure stops the rest."""
    return [upload(reporter, snapshot, progress) for snapshot in snapshots]


@dataclass(frozen=True, slots=True)
class DeliveredRollouts:
    """What one rollout snapshot's upload did."""

    step: int
    sent: int
    left_out: int

    def describe(self) -> str:
        left_out = (
            f", {self.left_out} left out by the step's cap (TUNEPLANE_JOB_ROLLOUT_UPLOAD_SAMPLES)"
            if self.left_out
            else ""
        )
        return f"training step {self.step} delivered: {self.sent} rollouts{left_out}"


def upload_rollouts(
    reporter: Reporter, snapshot: Snapshot, progress: Progress | None = None
) -> DeliveredRollouts:
    """Deliver a training step's rollouts; :class:`NotDelivered` saying what did not
    arrive (a rollout's identity is its step and ID: sending again adds only what is
    missing)."""
    label = f"training step {snapshot.step}"
    sent, left_out = _send_trajectories(reporter, label, snapshot.trajectories, progress)
    return DeliveredRollouts(snapshot.step, sent, left_out)


def queue_rollouts(reporter: Reporter, snapshot: Snapshot) -> int:
    """Queue a step's rollouts without waiting for them (the live follower): how many the
    reporter accepted. Queue pressure drops text; the reporter counts and logs it."""
    return sum(
        reporter.trajectory(**trajectory_fields(document)) for document in snapshot.trajectories
    )


def queue_round(reporter: Reporter, snapshot: Snapshot) -> int:
    """A round's events through the strict call (:class:`NotDelivered` when they do not
    arrive), then its trajectories queued without waiting: how many were accepted."""
    _send_events(reporter, snapshot, None)
    return sum(
        reporter.trajectory(**trajectory_fields(document)) for document in snapshot.trajectories
    )


class NemoRlSource:
    """The NeMo-RL follower's source (``tuneplane run --follow-nemo-rl``): the completed
    step files of ``log_dir`` (:class:`tuneplane.importers.nemo_rl_files.Watch`), each read
    as ``tuneplane import nemo-rl`` reads it and queued on ``reporter`` without waiting."""

    def __init__(self, reporter: Reporter, log_dir: str, text_samples: int | None = None) -> None:
        self._reporter = reporter
        self._watch = Watch(log_dir)
        self._text_samples = text_samples
        self._files: dict[str, StepFile] = {}

    def ready(self, ended: bool) -> list[str]:
        files = self._watch.ready(ended)
        self._files.update((f.path, f) for f in files)
        return [f.path for f in files]

    def deliver(self, path: str) -> tuple[int, int]:
        file = self._files.pop(path)
        self._watch.done(file)  # once, whatever happens: a bad file is not read again
        snapshot = read_step(file, self._text_samples)
        if snapshot.is_rollouts:
            return queue_rollouts(self._reporter, snapshot), len(snapshot.trajectories)
        return queue_round(self._reporter, snapshot), len(snapshot.trajectories)
