"""The reporter's background thread: batches, sends, retries, heartbeats.

One thread per reporter. It wakes every ``flush_interval`` seconds, or sooner when a full
batch waits, takes everything queued, and sends it in batches of at most
``SCALAR_BATCH_MAX_POINTS`` points, then the queued observation events in batches of at
most ``OBSERVATION_BATCH_MAX`` (checked when they were queued), then trajectories (training
rollouts wait in a per-step buffer until their step's sample is chosen). A batch is retried on
transport errors and 5xx with bounded exponential backoff, then dropped and counted; a 4xx
drops it at once. Each kind of loss is logged once (logger ``tuneplane``), never raised:
training must not stop for metrics. Once the server answers that a newer execution attempt
has superseded this one, nothing more is sent (the transport says so once, on stderr).
With the durable spool, each batch is journaled here and posted by a thread of its own
(``client/poster.py``), so this one never waits for the network.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Mapping
from typing import Final

from tuneplane.client.batches import Batch, BatchBuilder
from tuneplane.client.pipeline import Pipeline
from tuneplane.client.poster import Poster
from tuneplane.client.queue import EventQueue, Ledger, PointQueue, Taken
from tuneplane.client.spool import Journal
from tuneplane.client.system_metrics import SystemSeries
from tuneplane.client.trajectory_queue import (
    RolloutBuffer,
    TrajectoryQueue,
    request_body,
    requests,
)
from tuneplane.client.transport import NO_RETRY, OUT_OF_TIME, Outcome, RetryPolicy, Transport
from tuneplane.contract.limits import OBSERVATION_BATCH_MAX

SCALARS_PATH: Final = "/api/v1/ingest/scalars"
OBSERVATIONS_PATH: Final = "/api/v1/ingest/observations"
HEARTBEAT_PATH: Final = "/api/v1/ingest/heartbeat"
ALERTS_PATH: Final = "/api/v1/ingest/alerts"
TRAJECTORIES_PATH: Final = "/api/v1/ingest/trajectories"
#: Alerts travel on the observation queue, marked so, and are sent to their own route.
ALERT_TYPE: Final = "alert"
POINTS_LOST: Final = "metric points dropped"
EVENTS_LOST: Final = "observation events dropped"
TRAJECTORIES_LOST: Final = "trajectories dropped"
#: Dropped when the sender itself broke: a bug, reported rather than hidden.
INTERNAL_ERROR: Final = "internal error"
#: Points validated between two short sleeps. The sender is pure Python: without a pause,
#: a training thread waiting for the GIL could wait a whole switch interval (5 ms).
_POINTS_PER_SLICE: Final = 512
_SLICE_PAUSE: Final = 0.0001

logger = logging.getLogger("tuneplane")


def blameless_events(body: object, outcome: Outcome) -> list[object]:
    """The events of a batch refused for an outcome conflict that are not in conflict."""
    answer = outcome.body
    if outcome.status != 409 or not isinstance(answer, dict) or not isinstance(body, dict):
        return []
    error = answer.get("error")
    if not isinstance(error, dict) or error.get("code") != "outcome_conflict":
        return []
    clashing = {c.get("index") for c in error.get("conflicts", []) if isinstance(c, dict)}
    events = body.get("events")
    if not isinstance(events, list) or not clashing:
        return []
    return [event for index, event in enumerate(events) if index not in clashing]


class Sender(threading.Thread):
    def __init__(
        self,
        queue: PointQueue,
        events: EventQueue,
        trajectories: TrajectoryQueue,
        transport: Transport,
        *,
        rollouts: RolloutBuffer,
        pipeline: Pipeline | None = None,
        journal: Journal | None = None,
        wake: threading.Event,
        batch_points: int,
        flush_interval: float,
        heartbeat_interval: float,
        retry: RetryPolicy,
        system_interval: float | None = None,
        armed: bool = True,
    ) -> None:
        super().__init__(name="tuneplane-sender", daemon=True)
        self._queue = queue
        self._events = events
        self._trajectories = trajectories
        self._rollouts = rollouts
        self._transport = transport
        # With the durable spool, batches are journaled here and posted by the poster.
        self.poster = (
            None
            if journal is None
            else Poster(
                transport,
                journal,
                retry=retry,
                on_failed_attempt=queue.count_failed_send,
                on_loss=self.log_loss,
            )
        )
        self._pipeline = pipeline if journal is None else None
        self._wake = wake
        self._interrupt = threading.Event()
        self._batch_points = batch_points
        self._builder = BatchBuilder(batch_points)
        self._in_flight: Batch | None = None
        self._flush_interval = flush_interval
        self._heartbeat_interval = heartbeat_interval
        self._system_interval = system_interval
        # Started idle (armed=False) the thread waits here before doing anything at all.
        self._armed = threading.Event()
        if armed:
            self._armed.set()
        self._abandoned = False
        self._retry = retry
        self._deadline: float | None = None
        self._stopping = False
        self._last_failure: str | None = None
        self._logged: set[tuple[str, str]] = set()

    def arm(self) -> None:
        """Begin: build the client, send, beat (a thread started idle)."""
        self._armed.set()

    def abandon(self) -> None:
        """End a thread started idle and never armed, without sending anything."""
        self._abandoned = True
        self._armed.set()

    def stop(self, deadline: float) -> None:
        """Send what is queued until the monotonic ``deadline``, drop the rest, stop.
        Call after the queue is closed, so that nothing arrives behind the last take."""
        self._deadline = deadline
        self._stopping = True
        self._interrupt.set()
        self._wake.set()

    def run(self) -> None:
        self._armed.wait()
        if self._abandoned:
            return
        # Hand the GIL back at once: the thread that started us waits for it, and would
        # otherwise wait a whole switch interval (5 ms) while we build the HTTP client.
        time.sleep(0.001)
        with contextlib.suppress(RuntimeError):  # closed already: the first post says so
            self._transport.warm()
        if self.poster is not None:
            self.poster.start()
        system = SystemSeries.start(self._system_interval, self._queue)
        next_heartbeat = time.monotonic()
        while True:
            stopping = self._stopping
            if not stopping:
                pause = min(self._flush_interval, next_heartbeat - time.monotonic())
                if system is not None:
                    pause = min(pause, system.due - time.monotonic())
                self._wake.wait(max(0.0, pause))
                self._wake.clear()
            try:
                if system is not None and time.monotonic() >= system.due:
                    system.sample()
                taken = self._queue.take()
                if taken[0]:
                    self._deliver(taken)
                events = self._events.take()
                if events:
                    self._deliver_events(events)
                self._deliver_trajectories(stopping)
                if stopping:
                    self._heartbeat()
                    if self.poster is not None and self._deadline is not None:
                        self.poster.finish(self._deadline)
                    return
                if time.monotonic() >= next_heartbeat:
                    self._heartbeat()
                    next_heartbeat = time.monotonic() + self._heartbeat_interval
            except Exception:
                # A bug of ours must not kill the thread and silently stop all reporting.
                logger.exception(
                    "tuneplane: the metrics sender failed; pending points, events and "
                    "trajectories dropped"
                )
                for ledger in (self._queue, self._events, self._trajectories):
                    ledger.drain_as_dropped(INTERNAL_ERROR)
                self._rollouts = RolloutBuffer(self._rollouts.cap, self._rollouts.wait)
                self._builder = BatchBuilder(self._batch_points)
                self._in_flight = None
                if self._pipeline is not None:
                    self._pipeline.close()
                if stopping:
                    return

    def _deliver(self, taken: Taken) -> None:
        builder = self._builder
        since_pause = 0
        for step, metrics, at in zip(*taken, strict=True):
            for batch in builder.add(step, metrics, at):
                self._send_while_building(batch)
                self._settle_drops()
            since_pause += len(metrics)
            if since_pause >= _POINTS_PER_SLICE:
                since_pause = 0
                time.sleep(_SLICE_PAUSE)
        self._finish_in_flight()
        last = builder.finish()
        if last is not None:
            self._send(last)
        self._settle_drops()

    def _send_while_building(self, batch: Batch) -> None:
        """Send a full batch through the pipeline, whose answer is read when the next batch
        is full (or the queue is drained); without a pipeline, send it now."""
        self._finish_in_flight()
        pipeline = self._pipeline
        deadline = self._deadline
        if (
            pipeline is None
            or self._transport.superseded
            or (deadline is not None and time.monotonic() >= deadline)
        ):
            self._send(batch)
        elif pipeline.begin(SCALARS_PATH, batch.body):
            self._in_flight = batch
        else:
            self._queue.count_failed_send()
            self._send(batch)

    def _finish_in_flight(self) -> None:
        batch, self._in_flight = self._in_flight, None
        if batch is None:
            return
        assert self._pipeline is not None
        if self._pipeline.finish():
            self._last_failure = None
            self._queue.settle(sent=batch.settles, invalid=batch.invalid)
        else:
            # The answer was lost or refused: again, through the retrying transport.
            self._queue.count_failed_send()
            self._send(batch)

    def _settle_drops(self) -> None:
        dropped = self._builder.take_dropped()
        if dropped:
            self._queue.settle(dropped=dropped)
            for reason in dropped:
                self._log_once(reason, self._builder.examples.get(reason, ""))

    def _deliver_events(self, queued: list[dict[str, object]]) -> None:
        alerts = [
            {k: v for k, v in item.items() if k != "type"}
            for item in queued
            if item.get("type") == ALERT_TYPE
        ]
        events = [item for item in queued if item.get("type") != ALERT_TYPE] if alerts else queued
        for path, key, items in (
            (OBSERVATIONS_PATH, "events", events),
            (ALERTS_PATH, "alerts", alerts),
        ):
            for start in range(0, len(items), OBSERVATION_BATCH_MAX):
                chunk = items[start : start + OBSERVATION_BATCH_MAX]
                self._post(self._events, path, {key: chunk}, len(chunk))

    def _deliver_trajectories(self, stopping: bool) -> None:
        """Evaluation trajectories go at once; training rollouts wait in the buffer until
        their step is done, then its sample goes and the rest is left out (counted)."""
        taken, flush = self._trajectories.take()
        now = time.monotonic()
        ready = [document for document in taken if document.scope != "training"]
        left_out = [
            document
            for document in taken
            if document.scope == "training" and not self._rollouts.add(document, now)
        ]
        chosen, unchosen = self._rollouts.release(now, everything=flush or stopping)
        self._trajectories.settle_left_out(left_out + unchosen)
        for batch in requests(ready + chosen):
            self._post(self._trajectories, TRAJECTORIES_PATH, request_body(batch), len(batch))
            self._trajectories.release(sum(document.size for document in batch))

    def _send(self, batch: Batch) -> None:
        self._post(self._queue, SCALARS_PATH, batch.body, batch.settles, batch.invalid)

    def _post(self, ledger: Ledger, path: str, body: object, count: int, invalid: int = 0) -> None:
        """Send one batch of ``count`` points or events and settle them in ``ledger``."""
        if self.poster is not None:
            self.poster.submit(ledger, path, self._kind(ledger), body, count, invalid)
            return
        deadline = self._deadline
        if deadline is not None and time.monotonic() >= deadline:
            ledger.settle(dropped={self._last_failure or OUT_OF_TIME: count})
            return
        outcome = self._transport.post(
            path,
            body,
            retry=self._retry,
            deadline=lambda: self._deadline,
            interrupt=self._interrupt,
            on_failed_attempt=self._queue.count_failed_send,
        )
        if outcome.delivered:
            self._last_failure = None
            ledger.settle(sent=count, invalid=invalid)
            return
        if not outcome.rejected:
            self._last_failure = outcome.reason
        innocent = blameless_events(body, outcome) if path == OBSERVATIONS_PATH else []
        dropped: Mapping[str, int] = {outcome.reason: count - len(innocent)}
        ledger.settle(dropped=dropped)
        self.log_loss(ledger, outcome)
        if innocent:
            # A changed re-send of an outcome refuses its whole batch: the rest goes again.
            self._post(ledger, path, {"events": innocent}, len(innocent))

    def log_loss(self, ledger: Ledger, outcome: Outcome) -> None:
        """Say once per kind and reason that a batch was lost."""
        if not self._transport.superseded:  # the transport has said so already
            what = (
                POINTS_LOST
                if ledger is self._queue
                else EVENTS_LOST
                if ledger is self._events
                else TRAJECTORIES_LOST
            )
            self._log_once(outcome.reason, outcome.detail, what)

    def _kind(self, ledger: Ledger) -> str:
        """What a journal record holds, by the queue its batch came from."""
        if ledger is self._queue:
            return "points"
        return "events" if ledger is self._events else "trajectories"

    def _heartbeat(self) -> None:
        deadline = self._deadline
        if deadline is not None and deadline - time.monotonic() < 0.05:
            return
        health = self._trajectories.add_to(self._events.add_to(self._queue.health()))
        if self.poster is not None:
            self.poster.heartbeat(HEARTBEAT_PATH, health.heartbeat(self._heartbeat_interval))
            return
        outcome = self._transport.post(
            HEARTBEAT_PATH,
            health.heartbeat(self._heartbeat_interval),
            retry=NO_RETRY,
            deadline=lambda: self._deadline,
        )
        if outcome.rejected and not self._transport.superseded:
            self._log_once("heartbeat " + outcome.reason, outcome.detail, "heartbeat refused")

    def _log_once(self, reason: str, detail: str, what: str = POINTS_LOST) -> None:
        if (what, reason) in self._logged:
            return
        self._logged.add((what, reason))
        suffix = f": {detail}" if detail else ""
        logger.warning("tuneplane: %s (%s)%s", what, reason, suffix)
