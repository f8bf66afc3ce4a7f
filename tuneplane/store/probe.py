"""Whether a database takes writes, without writing anything (``tuneplane doctor``)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

#: Less free space than this where SQLite writes is worth a warning before it is a 503.
SQLITE_FREE_BYTES_MIN = 512 * 1024 * 1024


def _probe_sqlite(path: Path) -> str | None:
    if not path.exists():
        return f"{path} does not exist (tuneplane serve creates it on its first start)"
    try:
        # The write lock, taken and given back: what a write needs first.
        connection = sqlite3.connect(path, timeout=5, isolation_level=None)
        try:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("ROLLBACK")
        finally:
            connection.close()
    except sqlite3.Error as exc:
        return f"{path}: {exc}"
    free = shutil.disk_usage(path.parent).free
    if free < SQLITE_FREE_BYTES_MIN:
        return f"only {free // (1024 * 1024)} MB free beside {path}"
    return None


def _probe_postgres(url: str) -> str | None:
    parsed = make_url(url).set(drivername="postgresql+psycopg")
    engine = create_engine(parsed, connect_args={"connect_timeout": 5})
    try:
        with engine.connect() as connection:
            allowed = connection.execute(
                text("SELECT has_table_privilege(current_user, 'runs', 'INSERT')")
            ).scalar()
    except SQLAlchemyError as exc:
        cause = getattr(exc, "orig", None) or exc  # the driver's own message
        return str(cause).splitlines()[0]
    finally:
        engine.dispose()
    return None if allowed else f"{parsed.username or 'the user'} may not insert into runs"


def probe_writes(url: str) -> str | None:
    """None when the database at ``url`` takes writes, else why it does not."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _probe_sqlite(Path(parsed.database or ""))
    return _probe_postgres(url)
