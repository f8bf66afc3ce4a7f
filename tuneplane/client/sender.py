"""The reporter's background thread: batches, sends, retries, heartbeats.

One thread per reporter. It wakes every ``flush_interval`` seconds, or sooner when a full
batch waits, takes everything queued, and sends it in batches of at most
``SCALAR_BATCH_MAX_POINTS``. A batch is retried on transport errors and 5xx with bounded
exponential backoff, then dropped and counted; a 4xx drops it at once. Each kind of loss
is logged once (logger ``tuneplane``), never raised: training must not stop for metrics.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Final

from tuneplane.client.batches import Batch, BatchBuilder
from tuneplane.client.queue import PointQueue, Taken
from tuneplane.client.transport import NO_RETRY, OUT_OF_TIME, RetryPolicy, Transport

SCALARS_PATH: Final = "/api/v1/ingest/scalars"
HEARTBEAT_PATH: Final = "/api/v1/ingest/heartbeat"
#: Dropped when the sender itself broke: a bug, reported rather than hidden.
INTERNAL_ERROR: Final = "internal error"
#: Points validated between two short sleeps. The sender is pure Python: without a pause,
#: a training thread waiting for the GIL could wait a whole switch interval (5 ms).
_POINTS_PER_SLICE: Final = 512
_SLICE_PAUSE: Final = 0.0001

logger = logging.getLogger("tuneplane")


class Sender(threading.Thread):
    def __init__(
        self,
        queue: PointQueue,
        transport: Transport,
        *,
        wake: threading.Event,
        batch_points: int,
        flush_interval: float,
        heartbeat_interval: float,
        retry: RetryPolicy,
    ) -> None:
        super().__init__(name="tuneplane-sender", daemon=True)
        self._queue = queue
        self._transport = transport
        self._wake = wake
        self._interrupt = threading.Event()
        self._batch_points = batch_points
        self._builder = BatchBuilder(batch_points)
        self._flush_interval = flush_interval
        self._heartbeat_interval = heartbeat_interval
        self._retry = retry
        self._deadline: float | None = None
        self._stopping = False
        self._last_failure: str | None = None
        self._logged: set[str] = set()

    def stop(self, deadline: float) -> None:
        """Send what is queued until the monotonic ``deadline``, drop the rest, stop.
        Call after the queue is closed, so that nothing arrives behind the last take."""
        self._deadline = deadline
        self._stopping = True
        self._interrupt.set()
        self._wake.set()

    def run(self) -> None:
        next_heartbeat = time.monotonic()
        while True:
            stopping = self._stopping
            if not stopping:
                pause = min(self._flush_interval, next_heartbeat - time.monotonic())
                self._wake.wait(max(0.0, pause))
                self._wake.clear()
            try:
                taken = self._queue.take()
                if taken[0]:
                    self._deliver(taken)
                if stopping:
                    self._heartbeat()
                    return
                if time.monotonic() >= next_heartbeat:
                    self._heartbeat()
                    next_heartbeat = time.monotonic() + self._heartbeat_interval
            except Exception:
                # A bug of ours must not kill the thread and silently stop all reporting.
                logger.exception("tuneplane: the metrics sender failed; pending points dropped")
                self._queue.drain_as_dropped(INTERNAL_ERROR)
                self._builder = BatchBuilder(self._batch_points)
                if stopping:
                    return

    def _deliver(self, taken: Taken) -> None:
        builder = self._builder
        since_pause = 0
        for step, metrics in zip(*taken, strict=True):
            for batch in builder.add(step, metrics):
                self._send(batch)
                self._settle_drops()
            since_pause += len(metrics)
            if since_pause >= _POINTS_PER_SLICE:
                since_pause = 0
                time.sleep(_SLICE_PAUSE)
        last = builder.finish()
        if last is not None:
            self._send(last)
        self._settle_drops()

    def _settle_drops(self) -> None:
        dropped = self._builder.take_dropped()
        if dropped:
            self._queue.settle(dropped=dropped)
            for reason in dropped:
                self._log_once(reason, self._builder.examples.get(reason, ""))

    def _send(self, batch: Batch) -> None:
        deadline = self._deadline
        if deadline is not None and time.monotonic() >= deadline:
            self._drop(batch, self._last_failure or OUT_OF_TIME)
            return
        outcome = self._transport.post(
            SCALARS_PATH,
            batch.body,
            retry=self._retry,
            deadline=lambda: self._deadline,
            interrupt=self._interrupt,
            on_failed_attempt=self._queue.count_failed_send,
        )
        if outcome.delivered:
            self._last_failure = None
            self._queue.settle(sent=batch.settles, invalid=batch.invalid)
            return
        if not outcome.rejected:
            self._last_failure = outcome.reason
        self._drop(batch, outcome.reason)
        self._log_once(outcome.reason, outcome.detail)

    def _drop(self, batch: Batch, reason: str) -> None:
        dropped: Mapping[str, int] = {reason: batch.settles}
        self._queue.settle(dropped=dropped)

    def _heartbeat(self) -> None:
        deadline = self._deadline
        if deadline is not None and deadline - time.monotonic() < 0.05:
            return
        body = self._queue.health().heartbeat(self._heartbeat_interval)
        outcome = self._transport.post(
            HEARTBEAT_PATH, body, retry=NO_RETRY, deadline=lambda: self._deadline
        )
        if outcome.rejected:
            self._log_once("heartbeat " + outcome.reason, outcome.detail, "heartbeat refused")

    def _log_once(self, reason: str, detail: str, what: str = "metric points dropped") -> None:
        if reason in self._logged:
            return
        self._logged.add(reason)
        suffix = f": {detail}" if detail else ""
        logger.warning("tuneplane: %s (%s)%s", what, reason, suffix)
