"""The SQLite writer: one thread, one connection, group commit.

Every write of the server runs here, so SQLite never sees two writers and no request ever
meets "database is locked". Jobs that arrive while a transaction is being written are taken
together: each runs inside its own SAVEPOINT (a failing job is rolled back alone) and one
COMMIT makes the whole group durable, which saves a commit per small batch under load.
A job's result is delivered only after its group has committed.

WAL checkpoints run on a thread of their own: done inside a commit they cost the writer more
than a small batch's whole write.
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

log = logging.getLogger("tuneplane.store")

#: Most jobs committed together; bounds the latency one group adds to its first job.
MAX_GROUP = 64
#: Seconds between background checkpoints of the write-ahead log.
CHECKPOINT_INTERVAL = 0.5


@dataclass(slots=True)
class _Job:
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class SerialWriter:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tuneplane-writer", daemon=True)
        self._checkpointer = threading.Thread(
            target=self._checkpoint_loop, name="tuneplane-checkpoint", daemon=True
        )
        self._thread.start()
        self._checkpointer.start()

    async def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._jobs.put(_Job(fn, args, future, loop))
        return await future

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join()
        self._stopped.set()
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
            except Exception:
                log.exception("background WAL checkpoint failed")

    def _run(self) -> None:
        with self._engine.connect() as connection:
            connection.exec_driver_sql("PRAGMA wal_autocheckpoint=0")
            connection.commit()
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
                self._write_group(connection, group)

    @staticmethod
    def _write_group(connection: Connection, group: list[_Job]) -> None:
        outcomes: list[tuple[_Job, Any, BaseException | None]] = []
        try:
            with connection.begin():
                # Fixed savepoint statements through the driver: SQLAlchemy's nested
                # transactions cost more than the writes they protect.
                cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
                for job in group:
                    cursor.execute("SAVEPOINT job")
                    try:
                        result = job.fn(connection, *job.args)
                    except Exception as exc:
                        cursor.execute("ROLLBACK TO job")
                        cursor.execute("RELEASE job")
                        outcomes.append((job, None, exc))
                    else:
                        cursor.execute("RELEASE job")
                        outcomes.append((job, result, None))
        except Exception as exc:
            log.exception("a write transaction of %d jobs failed to commit", len(group))
            outcomes = [(job, None, exc) for job in group]
        for job, result, error in outcomes:
            job.loop.call_soon_threadsafe(_settle, job.future, result, error)
