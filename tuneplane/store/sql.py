"""Raw SQL for the ingest hot path.

SQLAlchemy Core builds and caches statements well, but constructing one per batch costs more
than the write itself; the hot path sends fixed SQL text through the driver's cursor instead.
Both engines accept the same SQL here except for parameter markers and min/max of two values.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Connection

# SQLite allows 32,766 bound parameters per statement, PostgreSQL 65,535.
MAX_PARAMETERS = 30_000


class Dialect:
    """What differs between the two engines, for one connection."""

    def __init__(self, connection: Connection) -> None:
        self.is_sqlite = connection.dialect.name == "sqlite"
        self.marker = "?" if self.is_sqlite else "%s"
        self.least = "min" if self.is_sqlite else "least"
        self.greatest = "max" if self.is_sqlite else "greatest"
        driver_connection = connection.connection.driver_connection
        assert driver_connection is not None
        self.cursor: Any = driver_connection.cursor()

    def sql(self, statement: str) -> str:
        """Write statements with ``?`` markers; this swaps them for the driver's."""
        return statement if self.is_sqlite else statement.replace("?", "%s")

    def values(self, width: int, count: int) -> str:
        row = "(" + ", ".join([self.marker] * width) + ")"
        return ", ".join([row] * count)


def chunks(rows: Sequence[tuple[Any, ...]], width: int) -> Iterator[Sequence[tuple[Any, ...]]]:
    """Slices of ``rows`` small enough for one multi-row statement."""
    size = max(1, MAX_PARAMETERS // width)
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def flat(rows: Sequence[tuple[Any, ...]]) -> list[Any]:
    return [value for row in rows for value in row]
