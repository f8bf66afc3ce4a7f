"""Opening a database: engine setup for both engines, the SQLite single-writer rule,
the data-directory lock and migrations.

SQLite has one writer: every write runs on one dedicated thread, so concurrent requests queue
inside the server instead of meeting "database is locked". PostgreSQL takes writes from any
thread and any number of server processes.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import sqlite3
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

from alembic import command
from alembic.config import Config as AlembicConfig
from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import ExceptionContext, make_url

from tuneplane.contract.errors import TuneplaneError
from tuneplane.store.errors import (
    DatabaseUnreachable,
    Outage,
    StoreUnavailable,
    classify,
    unavailable,
)
from tuneplane.store.statistics import StatisticsKeeper
from tuneplane.store.writer import SerialWriter

T = TypeVar("T")
Item = TypeVar("Item")

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
#: Writer threads (and connections held by them) on PostgreSQL: enough that PostgreSQL works
#: while a writer waits on a commit, few enough that each takes many batches together. One
#: per core, 2 to 8: on 2 cores, 2 writers stored 18% more small batches a second than 4 and
#: as many full ones, and 8 stored fewer full ones than 4.
POSTGRES_WRITERS = max(2, min(8, os.cpu_count() or 2))
#: Seconds a new PostgreSQL connection may take.
PG_CONNECT_TIMEOUT_SECONDS = "10"
# Any constant works; it only has to be the same in every tuneplane process.
_PG_MIGRATION_LOCK = 0x7475_6E65
#: The connection :meth:`Database.hold` lends to the reads of its context (thread or task).
_HELD: ContextVar[tuple[Database, Connection] | None] = ContextVar("tuneplane_held", default=None)


class DatabaseUnavailable(TuneplaneError):
    """The database cannot be opened (already in use, unreachable, missing driver)."""


def _set_sqlite_pragmas(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
    # All pragmas in one place. WAL lets readers run beside the one writer; NORMAL
    # synchronous is durable across process crashes in WAL mode (not power loss).
    # The driver's own transaction handling breaks SAVEPOINTs: we emit BEGIN ourselves.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.execute("PRAGMA cache_size=-65536")
    cursor.execute("PRAGMA temp_store=MEMORY")
    cursor.execute("PRAGMA journal_size_limit=67108864")
    cursor.close()


def _begin_sqlite(connection: Connection) -> None:
    connection.exec_driver_sql("BEGIN")


def _watch(engine: Engine, outage: Outage) -> None:
    """Driver failures that mean the store cannot answer become ``StoreUnavailable`` at the
    engine, for reads and writes alike, so nothing above ``store/`` sees a driver's
    exception; every statement answered tells the outage log the store is back."""

    def on_error(context: ExceptionContext) -> BaseException | None:
        if context.is_pre_ping:
            return None  # SQLAlchemy reconnects; a failed reconnect comes here on its own
        error = classify(context.original_exception, disconnect=context.is_disconnect)
        if error is not None:
            outage.failed(error)
        return error

    def on_statement(*_args: Any) -> None:
        if outage.current is not None:
            outage.answered(wrote=False)

    event.listen(engine, "handle_error", on_error)
    event.listen(engine, "after_cursor_execute", on_statement)


class _DirectoryLock:
    """An exclusive lock on a SQLite database, held for the life of the server."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = path.open("a+")
        try:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._file.seek(0)
            holder = self._file.read().strip() or "unknown"
            self._file.close()
            raise DatabaseUnavailable(
                f"{path.parent} is already used by another tuneplane server (pid {holder}). "
                "SQLite allows one server per data directory: stop the other one, choose "
                "another --data-dir, or use PostgreSQL to run several servers."
            ) from None
        self._file.seek(0)
        self._file.truncate()
        self._file.write(str(os.getpid()))
        self._file.flush()

    def release(self) -> None:
        fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
        self._file.close()


class Database:
    """An engine plus the rule for running writes on it.

    ``await db.write(fn, *args)`` runs ``fn(connection, *args)`` inside one transaction: all
    of it is committed or none of it. Reads use ``db.engine.connect()`` from any thread.
    """

    def __init__(self, url: str, *, lock: bool = True) -> None:
        parsed = make_url(url)
        self.url = url
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        self._lock: _DirectoryLock | None = None
        self._spread = itertools.count()
        self._statistics: StatisticsKeeper | None = None
        #: Store failures, logged once per episode.
        self.outage = Outage()
        if self.is_sqlite:
            self.engine = self._open_sqlite(parsed.database or "", lock=lock)
            _watch(self.engine, self.outage)
            self._writers = [SerialWriter(self.engine, sqlite=True, outage=self.outage)]
        elif parsed.get_backend_name() == "postgresql":
            self.engine = self._open_postgres(url)
            _watch(self.engine, self.outage)
            # Writers work in parallel on PostgreSQL, each committing what queued up behind
            # its last commit as one transaction.
            self._writers = [
                SerialWriter(
                    self.engine,
                    sqlite=False,
                    name=f"tuneplane-writer-{index}",
                    outage=self.outage,
                )
                for index in range(POSTGRES_WRITERS)
            ]
            self._statistics = StatisticsKeeper(self.engine)
        else:
            raise DatabaseUnavailable(
                f"unsupported database URL {parsed.render_as_string(hide_password=True)}: "
                "use sqlite:///PATH or postgresql://…"
            )

    def _open_sqlite(self, database: str, *, lock: bool) -> Engine:
        if not database or database == ":memory:":
            raise DatabaseUnavailable("SQLite needs a file: sqlite:///PATH/tuneplane.db")
        path = Path(database)
        path.parent.mkdir(parents=True, exist_ok=True)
        if lock:
            self._lock = _DirectoryLock(path.with_name(path.name + ".lock"))
        engine = create_engine(
            f"sqlite:///{path}",
            connect_args={"check_same_thread": False},
            pool_size=8,
            max_overflow=16,
        )
        event.listen(engine, "connect", _set_sqlite_pragmas)
        event.listen(engine, "begin", _begin_sqlite)
        return engine

    @staticmethod
    def _open_postgres(url: str) -> Engine:
        parsed = make_url(url)
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise DatabaseUnavailable(
                "PostgreSQL support is not installed: pip install 'tuneplane[postgres]'"
            ) from None
        # A server that does not answer a connection in time is unavailable (503), not a
        # request held for as long as TCP keeps trying; the URL may say otherwise.
        if "connect_timeout" not in parsed.query:
            parsed = parsed.update_query_dict({"connect_timeout": PG_CONNECT_TIMEOUT_SECONDS})
        return create_engine(parsed, pool_size=10, max_overflow=20, pool_pre_ping=True)

    def migrate(self) -> None:
        """Bring the schema to the newest migration (safe with concurrent servers)."""
        config = AlembicConfig()
        config.set_main_option("script_location", str(MIGRATIONS_DIR))
        try:
            with self.engine.begin() as connection:
                if not self.is_sqlite:
                    connection.execute(
                        text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK}
                    )
                config.attributes["connection"] = connection
                command.upgrade(config, "head")
        except StoreUnavailable as exc:
            where = make_url(self.url).render_as_string(hide_password=True)
            raise DatabaseUnavailable(f"cannot open {where}: {exc.reason} ({exc.detail})") from exc

    def ping(self) -> None:
        """Ask the store a trivial question; raises ``StoreUnavailable`` when it cannot
        answer (readiness)."""
        with self.engine.connect() as connection:
            connection.exec_driver_sql("SELECT 1")

    def run_write(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(connection, *args)`` in one transaction on the calling thread: for startup
        and maintenance, before or beside the server; requests go through ``write``."""
        with self.engine.begin() as connection:
            return fn(connection, *args)

    async def write(self, fn: Callable[..., T], *args: Any, key: Hashable = None) -> T:
        """Run ``fn(connection, *args)`` in a write transaction without blocking the event
        loop, on a writer thread. Writes with the same ``key`` (a run) share a writer, so
        they never wait on each other's locks from two open transactions."""
        result: T = await self._writer(key).submit(fn, *args)
        return result

    async def write_batched(
        self, fn: Callable[[Connection, list[Item]], list[T]], item: Item, *, key: Hashable = None
    ) -> T:
        """Like ``write``, for a function that writes a list of items at once and returns
        one result per item: items queued together are passed to one call."""
        result: T = await self._writer(key).submit(fn, item, batched=True)
        return result

    def _writer(self, key: Hashable) -> SerialWriter:
        writers = self._writers
        if len(writers) == 1:
            return writers[0]
        if key is None:
            return writers[next(self._spread) % len(writers)]
        return writers[hash(key) % len(writers)]

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        """A connection for reads: ``with db.connect() as connection: ...``. A store that
        cannot answer raises ``StoreUnavailable``, whichever way the read reached it.
        Within :meth:`hold` it is the held connection, left open."""
        held = _HELD.get()
        if held is not None and held[0] is self:
            with self._translated(held[1]):
                yield held[1]
            return
        connection = self.engine.connect()
        try:
            with self._translated(connection):
                yield connection
        finally:
            connection.close()

    @contextmanager
    def hold(self) -> Iterator[Connection]:
        """One connection, and one read transaction, for all the reads of the calling
        context (a request's access check and its route): :meth:`connect` within it answers
        this connection. It is closed, and its transaction ended, on leaving."""
        with self.connect() as connection:
            token = _HELD.set((self, connection))
            try:
                yield connection
            finally:
                _HELD.reset(token)

    @contextmanager
    def _translated(self, connection: Connection) -> Iterator[None]:
        try:
            yield
        except Exception as exc:
            error = unavailable(exc, self.outage)
            if error is None or error is exc:
                raise
            if isinstance(error, DatabaseUnreachable):
                connection.invalidate()  # the driver's cursor failed: SQLAlchemy missed it
            raise error from exc

    def close(self) -> None:
        for writer in self._writers:
            writer.close()
        self._writers = []
        if self._statistics is not None:
            self._statistics.close()
            self._statistics = None
        self.engine.dispose()
        if self._lock is not None:
            self._lock.release()
            self._lock = None
