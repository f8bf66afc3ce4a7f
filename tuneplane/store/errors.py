"""Store failures that are the world's, not the request's: a database that does not answer,
a disk that is full.

Every engine reports them through ``classify``, so a route only ever sees a
:class:`StoreUnavailable` (503, retry later), never a driver's exception. :class:`Outage`
logs such a failure once per episode: one warning when the store stops answering, silence
while it stays down, one line when it answers again.

    StoreUnavailable          503  the store cannot answer now; retry later
    ├── DatabaseUnreachable        the database refuses or drops connections
    └── DiskFull                   SQLite or PostgreSQL has no room to write
"""

from __future__ import annotations

import errno
import logging
import sqlite3
import threading
from typing import ClassVar

from sqlalchemy import exc as sa_exc

from tuneplane.contract.errors import Unavailable
from tuneplane.contract.limits import STORE_RETRY_AFTER_SECONDS

log = logging.getLogger("tuneplane.store")

# SQLite primary result codes (an extended code keeps the primary one in its low byte).
_SQLITE_IOERR = 10
_SQLITE_FULL = 13
_SQLITE_CANTOPEN = 14
# PostgreSQL SQLSTATEs: connection exceptions (class 08), insufficient resources (53),
# the server shutting down or starting (57P01-57P03), system errors such as I/O (58).
_PG_UNAVAILABLE_CLASSES = ("08", "53", "58")
_PG_UNAVAILABLE_STATES = frozenset({"57P01", "57P02", "57P03"})
_PG_DISK_FULL = "53100"
_DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class StoreUnavailable(Unavailable):
    """The store cannot answer now. ``reason`` says which part ("the disk is full");
    ``detail`` is the driver's first line, for the log only: a client never sees it."""

    code = "store_unavailable"
    retry_after: ClassVar[int] = STORE_RETRY_AFTER_SECONDS
    reason: ClassVar[str] = "the store is unavailable"
    #: Whether a read that succeeds proves the store answers again (a full disk is not
    #: proven free by a read: only a committed write proves it).
    cleared_by_read: ClassVar[bool] = True

    def __init__(self, detail: str = "") -> None:
        super().__init__(f"store unavailable: {self.reason}; retry later")
        self.detail = detail


class DatabaseUnreachable(StoreUnavailable):
    reason = "the database is unavailable"


class DiskFull(StoreUnavailable):
    reason = "the disk is full"
    cleared_by_read = False


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


def classify(error: BaseException, *, disconnect: bool = False) -> StoreUnavailable | None:
    """The store failure ``error`` stands for, or None when it is not one (a bug, a
    constraint: those stay what they are). ``disconnect`` is SQLAlchemy's own verdict that
    the connection was lost."""
    if isinstance(error, StoreUnavailable):
        return error
    original: BaseException = error
    if isinstance(error, sa_exc.DBAPIError) and error.orig is not None:
        original = error.orig
    detail = _first_line(original)
    if isinstance(original, OSError) and original.errno in _DISK_FULL_ERRNOS:
        return DiskFull(detail)
    if isinstance(original, sqlite3.Error):
        primary = getattr(original, "sqlite_errorcode", 0) & 0xFF
        if primary == _SQLITE_FULL:
            return DiskFull(detail)
        if primary in (_SQLITE_IOERR, _SQLITE_CANTOPEN):
            return DatabaseUnreachable(detail)
        return None
    sqlstate = getattr(original, "sqlstate", None)
    if sqlstate == _PG_DISK_FULL:
        return DiskFull(detail)
    if disconnect or isinstance(error, sa_exc.TimeoutError):
        return DatabaseUnreachable(detail)
    if isinstance(sqlstate, str):
        if sqlstate.startswith(_PG_UNAVAILABLE_CLASSES) or sqlstate in _PG_UNAVAILABLE_STATES:
            return DatabaseUnreachable(detail)
        return None
    # psycopg raises failures of libpq itself (refused, reset, timed out) without a
    # SQLSTATE: the server never answered.
    if type(original).__module__.startswith("psycopg") and isinstance(
        original, _operational_errors()
    ):
        return DatabaseUnreachable(detail)
    return None


def _operational_errors() -> tuple[type[BaseException], ...]:
    try:
        import psycopg
    except ImportError:  # pragma: no cover - PostgreSQL support not installed
        return ()
    return (psycopg.OperationalError,)


def unavailable(error: BaseException, outage: Outage) -> StoreUnavailable | None:
    """``classify``, noting a store failure in ``outage``. For failures seen outside the
    engine: the ingest hot path and chart reads use the driver's cursor directly."""
    found = classify(error)
    if found is not None:
        outage.failed(found)
    return found


class Outage:
    """Logs store failures once per episode. Thread-safe; costs one attribute read on the
    path of a store that answers."""

    def __init__(self) -> None:
        self.current: StoreUnavailable | None = None
        self._lock = threading.Lock()

    def failed(self, error: StoreUnavailable) -> None:
        if self.current is not None and type(self.current) is type(error):
            return
        with self._lock:
            if self.current is not None and type(self.current) is type(error):
                return
            self.current = error
        log.warning(
            "store unavailable: %s (%s); answering 503 until it answers again",
            error.reason,
            error.detail or "no detail",
        )

    def answered(self, *, wrote: bool) -> None:
        """The store answered a statement (``wrote``: committed a write)."""
        current = self.current
        if current is None or not (wrote or current.cleared_by_read):
            return
        with self._lock:
            if self.current is not current:
                return
            self.current = None
        # The same level as the outage line, so that wherever one shows, the other does.
        log.warning("store recovered: it answers again (it was unavailable: %s)", current.reason)
