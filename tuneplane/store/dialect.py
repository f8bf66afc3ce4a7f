"""The few places where SQLite and PostgreSQL spell things differently."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Table, func
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.elements import ColumnElement


def upsert(connection: Connection, table: Table) -> Any:
    """An INSERT that supports ``on_conflict_do_nothing`` / ``on_conflict_do_update``."""
    if connection.dialect.name == "sqlite":
        return sqlite.insert(table)
    return postgresql.insert(table)


def least(connection: Connection, *values: Any) -> ColumnElement[Any]:
    if connection.dialect.name == "sqlite":
        return func.min(*values)
    return func.least(*values)


def greatest(connection: Connection, *values: Any) -> ColumnElement[Any]:
    if connection.dialect.name == "sqlite":
        return func.max(*values)
    return func.greatest(*values)
