"""Reading another program's SQLite database without writing it or leaving a file beside it,
while that program may be writing it.

``mode=ro`` alone never writes the database, but a reader of a WAL database needs its
``-wal`` and ``-shm`` files and creates them when nobody has the database open, leaving
them behind. So when no ``-wal`` file exists (no connection is open; or the database keeps
a rollback journal, where a read-only reader takes only a shared lock), the database is
read as immutable, and after each query its size and modification time are compared: a
writer that started meanwhile (a ``-wal`` appears, or a checkpoint changed the file) makes
the reader switch to an ordinary read-only connection, among the writer's, and read that
query again. Each query is then a consistent snapshot either way.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

#: Bytes 18 and 19 of a database's header: 2 when it keeps a write-ahead log.
_WAL_VERSION = 2


def _connect(path: Path, *, immutable: bool) -> sqlite3.Connection:
    flags = "?mode=ro&immutable=1" if immutable else "?mode=ro"
    # Used by one thread at a time, though not always the same one (the server reads on
    # worker threads).
    connection = sqlite3.connect(
        path.absolute().as_uri() + flags, uri=True, timeout=30, check_same_thread=False
    )
    connection.execute("PRAGMA query_only = ON")
    return connection


def _keeps_wal(path: Path) -> bool:
    with path.open("rb") as file:
        header = file.read(20)
    return len(header) == 20 and header[18] == header[19] == _WAL_VERSION


def _stat(path: Path) -> tuple[int, int]:
    found = path.stat()
    return found.st_size, found.st_mtime_ns


class ReadOnlyDatabase:
    """Queries on a database that is never written, by this reader or through it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._wal = path.with_name(path.name + "-wal")
        self._stat: tuple[int, int] | None = None
        self._connection = self._open()

    def _open(self) -> sqlite3.Connection:
        if self._wal.exists() or not _keeps_wal(self.path):
            self._stat = None
            return _connect(self.path, immutable=False)
        self._stat = _stat(self.path)
        return _connect(self.path, immutable=True)

    def _changed(self) -> bool:
        return self._stat is not None and (self._wal.exists() or _stat(self.path) != self._stat)

    def rows(self, statement: str, parameters: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Every row of one query."""
        found: list[tuple[Any, ...]] = self._connection.execute(statement, parameters).fetchall()
        if self._changed():
            self._connection.close()
            self._stat = None
            self._connection = _connect(self.path, immutable=False)
            found = self._connection.execute(statement, parameters).fetchall()
        return found

    def close(self) -> None:
        self._connection.close()
