"""Writer threads with group commit: one thread, one connection each.

On SQLite every write of the server runs on one writer, so SQLite never sees two writers and
no request ever meets "database is locked". On PostgreSQL several writers share the load,
each run's writes going to the same one. Jobs that arrive while a transaction is being
written are taken together and one COMMIT makes the whole group durable, which saves a
commit per small batch under load; when a job of a group fails, the group is rolled back and
its jobs run again one by one, so a failing job is rolled back alone. A job's result is
delivered only after its transaction has committed. A job that lost a deadlock to another
writer is run again. Jobs of one kind can also be written together: a group passes all its
jobs of a batched function to one call, which stores them with a statement or two instead of
a few each (on PostgreSQL each statement is a round trip and a plan).

SQLite WAL checkpoints run on a thread of their own: done inside a commit they cost the
writer more than a small batch's whole write.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine

from tuneplane.store.errors import DatabaseUnreachable, Outage, unavailable

log = logging.getLogger("tuneplane.store")

#: Most jobs committed together; bounds the latency one group adds to its first job.
MAX_GROUP = 64
#: Seconds between background checkpoints of the write-ahead log.
CHECKPOINT_INTERVAL = 0.5


#: Times a job that lost a deadlock is run again before its error is returned.
MAX_RETRIES = 3
# PostgreSQL's deadlock_detected and serialization_failure: the job did nothing wrong.
_RETRYABLE_SQLSTATES = frozenset({"40P01", "40001"})


@dataclass(slots=True)
class _Job:
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop
    #: ``fn(connection, items)`` takes a list of items (``args`` is one) and returns a list.
    batched: bool = False
    retries: int = 0

    def run_alone(self, connection: Connection) -> Any:
        if self.batched:
            return self.fn(connection, list(self.args))[0]
        return self.fn(connection, *self.args)


def _run_together(connection: Connection, group: list[_Job]) -> list[Any]:
    """Run a group's jobs in order, each batched function once with all its items (at the
    place of its first job)."""
    batches: dict[Callable[..., Any], list[int]] = {}
    for index, job in enumerate(group):
        if job.batched:
            batches.setdefault(job.fn, []).append(index)
    results: list[Any] = [None] * len(group)
    for index, job in enumerate(group):
        if not job.batched:
            results[index] = job.fn(connection, *job.args)
            continue
        members = batches.pop(job.fn, None)
        if members is None:
            continue  # written with the first job of its function
        answers = job.fn(connection, [group[member].args[0] for member in members])
        for member, answer in zip(members, answers, strict=True):
            results[member] = answer
    return results


def _retryable(exc: BaseException) -> bool:
    original = getattr(exc, "orig", exc)
    return getattr(original, "sqlstate", None) in _RETRYABLE_SQLSTATES


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class SerialWriter:
    def __init__(
        self,
        engine: Engine,
        *,
        sqlite: bool,
        name: str = "tuneplane-writer",
        outage: Outage | None = None,
    ) -> None:
        self._engine = engine
        self._sqlite = sqlite
        # A commit proves the store takes writes again (after a full disk, say).
        self._outage = outage or Outage()
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._checkpointer: threading.Thread | None = None
        if sqlite:
            self._checkpointer = threading.Thread(
                target=self._checkpoint_loop, name="tuneplane-checkpoint", daemon=True
            )
            self._checkpointer.start()

    async def submit(self, fn: Callable[..., Any], *args: Any, batched: bool = False) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._jobs.put(_Job(fn, args, future, loop, batched))
        return await future

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join()
        self._stopped.set()
        if self._checkpointer is not None:
            self._checkpointer.join()
            self._checkpoint("TRUNCATE")

    def _checkpoint(self, mode: str) -> None:
        connection = self._engine.raw_connection()
        try:
            connection.cursor().execute(f"PRAGMA wal_checkpoint({mode})")
        finally:
            connection.close()

    def _checkpoint_loop(self) -> None:
        while not self._stopped.wait(CHECKPOINT_INTERVAL):
            try:
                self._checkpoint("PASSIVE")
            except Exception as exc:
                # A raw connection: the engine's classification does not see this one.
                if unavailable(exc, self._outage) is None:
                    log.exception("background WAL checkpoint failed")

    def _connect(self) -> Connection:
        connection = self._engine.connect()
        if self._sqlite:
            connection.exec_driver_sql("PRAGMA wal_autocheckpoint=0")
            connection.commit()
        return connection

    def _run(self) -> None:
        connection: Connection | None = None
        try:
            while True:
                first = self._jobs.get()
                if first is None:
                    return
                group = [first]
                while len(group) < MAX_GROUP:
                    try:
                        job = self._jobs.get_nowait()
                    except queue.Empty:
                        break
                    if job is None:
                        self._jobs.put(None)  # stop after this group
                        break
                    group.append(job)
                try:
                    if connection is None:
                        connection = self._connect()
                except Exception as exc:
                    # The database is unreachable: tell the callers, try again next time.
                    for job in group:
                        job.loop.call_soon_threadsafe(_settle, job.future, None, exc)
                    continue
                # A connection lost mid-group fails that group; SQLAlchemy reconnects it on
                # its next use.
                for job in self._write_group(connection, group):
                    self._jobs.put(job)
        finally:
            if connection is not None:
                connection.close()

    def _store_failure(self, connection: Connection, exc: BaseException) -> BaseException:
        """What a failed job reports: ``StoreUnavailable`` when the store could not answer
        (the hot path's driver cursor is not seen by the engine's classification)."""
        error = unavailable(exc, self._outage)
        if error is None:
            return exc
        if error is not exc and isinstance(error, DatabaseUnreachable):
            connection.invalidate()  # reconnect on the next job, not write to a dead one
        return error

    def _write_group(self, connection: Connection, group: list[_Job]) -> list[_Job]:
        """Write a group in one transaction; returns the jobs to run again.

        The jobs run one after another in one transaction, with no savepoints between them
        (on PostgreSQL each is a round trip). When one fails, the whole transaction is rolled
        back and each job runs again alone, so a failure stays its own. Failures are rare:
        input is checked before a job is queued."""
        if len(group) > 1:
            try:
                with connection.begin():
                    results = _run_together(connection, group)
            except Exception:  # noqa: S110 - each job runs again alone and reports its own
                pass
            else:
                self._outage.answered(wrote=True)
                for job, result in zip(group, results, strict=True):
                    job.loop.call_soon_threadsafe(_settle, job.future, result, None)
                return []
        again: list[_Job] = []
        for job in group:
            try:
                with connection.begin():
                    result = job.run_alone(connection)
            except Exception as exc:
                if _retryable(exc) and job.retries < MAX_RETRIES:
                    job.retries += 1
                    again.append(job)
                else:
                    error = self._store_failure(connection, exc)
                    job.loop.call_soon_threadsafe(_settle, job.future, None, error)
            else:
                self._outage.answered(wrote=True)
                job.loop.call_soon_threadsafe(_settle, job.future, result, None)
        return again
