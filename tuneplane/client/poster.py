"""With the durable spool: the thread that posts journaled batches, so that the sender
thread never waits for the network.

The sender thread builds each batch, journals it (:class:`~.spool.Journal`) and hands it
here; from then on the batch is *spooled* (``health().spooled``), and the queue it came
from has room again. So the in-memory queues empty into the journal at the speed of the
disk whatever the server does: an outage fills the journal, not the queues, and a point
that a full queue would have dropped is journaled instead. This thread posts the batches in
the order they were journaled. The bodies of the first 32 MiB wait in memory; past that a
batch is read back from its segment when its turn comes. A batch the server cannot take
(unreachable, 5xx) is tried again after a pause that doubles up to 30 s, for as long as the
reporter lives, so a server back before training ends receives everything in order; what
is left at the end waits for ``tuneplane sync``. A batch refused by rule (4xx) is
acknowledged as refused and counted dropped; one refused for its credential (an expired
token, a superseded attempt) stops all sending and stays in the journal. An offline
journal (:mod:`~tuneplane.client.offline`: no run or token on the server yet) is never
posted: everything waits in it for ``tuneplane sync``.

A batch the journal could not take (it is full) is posted like one without a spool: with
the sender's retries, then dropped and counted.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import orjson

from tuneplane.client.queue import Ledger
from tuneplane.client.spool import Journal, Location, credential_refused
from tuneplane.client.transport import NO_RETRY, OUT_OF_TIME, Outcome, RetryPolicy, Transport

#: Bodies held in memory for posting; past this, batches are read back from the journal.
HAND_OFF_MAX_BYTES: Final = 32 * 2**20
FIRST_PAUSE_SECONDS: Final = 0.5
MAX_PAUSE_SECONDS: Final = 30.0
#: Why a batch that the journal could not take was not sent either.
SPOOL_FULL: Final = "spool full"


@dataclass(slots=True)
class _Batch:
    ledger: Ledger
    path: str
    count: int
    invalid: int
    body: bytes | None
    location: Location | None


class Poster(threading.Thread):
    def __init__(
        self,
        transport: Transport,
        journal: Journal,
        *,
        retry: RetryPolicy,
        on_failed_attempt: Callable[[], None],
        on_loss: Callable[[Ledger, Outcome], None],
        hand_off_bytes: int = HAND_OFF_MAX_BYTES,
    ) -> None:
        super().__init__(name="tuneplane-poster", daemon=True)
        self.journal = journal
        self._transport = transport
        self._retry = retry
        self._on_failed_attempt = on_failed_attempt
        self._on_loss = on_loss
        self._capacity = hand_off_bytes
        self._batches: collections.deque[_Batch] = collections.deque()
        self._held = 0  # bytes of bodies in memory
        self._heartbeat: tuple[str, object] | None = None
        self._changed = threading.Condition()
        self._interrupt = threading.Event()
        self._deadline: float | None = None
        self._stopping = False
        self._halted = False  # the credential was refused: nothing more is sent
        self._quit = False  # stopping, and the server did not answer: the journal keeps it
        self._pause = 0.0
        self._last_failure = ""

    # -- the sender thread's side ----------------------------------------------------------

    def submit(
        self, ledger: Ledger, path: str, kind: str, body: object, count: int, invalid: int
    ) -> None:
        """Journal one batch and queue it for posting; never waits for the network."""
        if self._halted:  # the credential will not write again, now or at sync
            ledger.settle(dropped={self._last_failure: count})
            return
        encoded = orjson.dumps(body)
        location = self.journal.append(path, kind, count, encoded)
        with self._changed:
            keep = self._held + len(encoded) <= self._capacity
            if location is None and not keep:
                reason = self._last_failure or SPOOL_FULL
                ledger.settle(dropped={reason: count})
                return
            if location is not None:
                ledger.settle(spooled=count)
            self._batches.append(
                _Batch(ledger, path, count, invalid, encoded if keep else None, location)
            )
            if keep:
                self._held += len(encoded)
            self._changed.notify()

    def heartbeat(self, path: str, body: object) -> None:
        """Post ``body`` to the heartbeat route ``path`` when nothing else waits."""
        with self._changed:
            self._heartbeat = (path, body)
            self._changed.notify()

    def finish(self, deadline: float) -> None:
        """Post what waits until the monotonic ``deadline``, then stop; journaled batches
        not posted by then stay in the journal (spooled), the others are dropped."""
        with self._changed:
            self._deadline = deadline
            self._stopping = True
            self._changed.notify()
        self._interrupt.set()
        if self.is_alive():
            self.join(max(0.0, deadline - time.monotonic()) + 0.5)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until every handed batch was posted (or given up); True if it happened."""
        end = time.monotonic() + timeout
        if self.journal.target.offline:
            return True  # journaled is all an offline attempt does until `tuneplane sync`
        with self._changed:
            while self._batches and not self._halted:
                remaining = end - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(min(remaining, 0.05))
            return True

    # -- this thread -----------------------------------------------------------------------

    def run(self) -> None:
        try:
            while True:
                batch, heartbeat = self._next()
                if batch is None and heartbeat is None:
                    return
                if batch is not None:
                    self._post(batch)
                elif heartbeat is not None and not self._out_of_time():
                    path, body = heartbeat
                    self._transport.post(path, body, retry=NO_RETRY, deadline=self._dl)
        finally:
            self._give_up()
            self.journal.close()

    def _dl(self) -> float | None:
        return self._deadline

    def _next(self) -> tuple[_Batch | None, tuple[str, object] | None]:
        """The batch at the head (left there until posted), or a heartbeat; (None, None)
        when it is time to stop."""
        with self._changed:
            while True:
                if self._halted or self._quit or (self._stopping and self._out_of_time()):
                    return None, None
                if self.journal.target.offline:
                    # No run or token on the server yet: `tuneplane sync` posts it all.
                    if self._stopping:
                        return None, None
                    self._changed.wait()
                    continue
                if self._batches:
                    return self._batches[0], None
                if self._heartbeat is not None:
                    heartbeat, self._heartbeat = self._heartbeat, None
                    return None, heartbeat
                if self._stopping:
                    return None, None
                self._changed.wait()

    def _post(self, batch: _Batch) -> None:
        body = batch.body
        if body is None:
            assert batch.location is not None  # only journaled batches leave memory
            try:
                body = self.journal.read_back(batch.location)
            except OSError:
                self._done(batch)  # the journal is gone: left to nobody, said by the summary
                return
        outcome = self._transport.post(
            batch.path,
            orjson.Fragment(body),
            retry=self._retry if batch.location is None else NO_RETRY,
            deadline=self._dl,
            interrupt=self._interrupt,
            on_failed_attempt=self._on_failed_attempt,
        )
        if outcome.delivered:
            self._pause = 0.0
            self._last_failure = ""
            self._settle(batch, sent=True)
            if batch.location is not None:
                self.journal.ack(batch.location.seq)
            self._done(batch)
        elif outcome.rejected and (batch.location is None or not credential_refused(outcome)):
            self._settle(batch, reason=outcome.reason)
            self._on_loss(batch.ledger, outcome)
            if batch.location is not None:
                self.journal.ack(batch.location.seq, refused=True)
            self._done(batch)
        elif outcome.rejected:
            self._last_failure = outcome.reason
            self._halted = True  # the credential will not write again: kept for sync
        elif batch.location is None:
            self._last_failure = outcome.reason
            self._settle(batch, reason=outcome.reason)
            self._on_loss(batch.ledger, outcome)
            self._done(batch)
        else:
            self._last_failure = outcome.reason
            if self._stopping:
                self._quit = True  # no waiting at exit for a server that is not there
            else:
                self._wait_to_retry()

    def _settle(self, batch: _Batch, *, sent: bool = False, reason: str = "") -> None:
        """A journaled batch was spooled when it was handed over; the others are pending."""
        resolve = batch.ledger.resolve if batch.location is not None else batch.ledger.settle
        if sent:
            resolve(sent=batch.count, invalid=batch.invalid)
        else:
            resolve(dropped={reason: batch.count})

    def _done(self, batch: _Batch) -> None:
        with self._changed:
            self._batches.popleft()
            if batch.body is not None:
                self._held -= len(batch.body)
            self._changed.notify_all()

    def _wait_to_retry(self) -> None:
        self._pause = min(MAX_PAUSE_SECONDS, max(FIRST_PAUSE_SECONDS, self._pause * 2))
        end = time.monotonic() + self._pause
        deadline = self._deadline
        if deadline is not None:
            end = min(end, deadline)
        self._interrupt.wait(max(0.0, end - time.monotonic()))

    def _out_of_time(self) -> bool:
        deadline = self._deadline
        return deadline is not None and time.monotonic() >= deadline

    def _give_up(self) -> None:
        """At the end: journaled batches stay spooled; the others are dropped."""
        with self._changed:
            left, self._batches = list(self._batches), collections.deque()
            self._held = 0
            self._changed.notify_all()
        for batch in left:
            if batch.location is None:
                batch.ledger.settle(dropped={self._last_failure or OUT_OF_TIME: batch.count})
