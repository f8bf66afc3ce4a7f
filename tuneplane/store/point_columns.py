"""Series read whole, as columns: a series' packed blocks turned into NumPy arrays a page
of blocks at a time, without a Python object per point (the bulk reads of the API).

A block's arrays are little-endian int64 steps and float64 values and times (see
``blocks``); a page is the concatenation of its blocks' bytes viewed as arrays, cut to the
requested steps at its ends. NaN and infinities are not in the blocks: they are the series'
invalid points, read beside them. NumPy is imported on the first read, so a server that
never serves one does not carry it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from sqlalchemy import Connection

from tuneplane.contract.limits import STEP_MAX
from tuneplane.store.sql import Dialect

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

#: Blocks per page (of up to 512 points each): a page is a few megabytes at most.
PAGE_BLOCKS: Final = 128

#: The value an invalid point stands for, by its kind.
INVALID_VALUES: Final = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


@dataclass(frozen=True, slots=True)
class ColumnPage:
    """Consecutive points of one series in (step, event) order."""

    steps: NDArray[np.int64]
    values: NDArray[np.float64]
    times: NDArray[np.float64]

    def __len__(self) -> int:
        return len(self.steps)


def iter_pages(
    connection: Connection, metric_id: int, start: int | None = None, end: int | None = None
) -> Iterator[ColumnPage]:
    """The series' points with steps in ``start..end`` (both inclusive, open when None),
    a page of blocks at a time, in order. Empty pages are skipped."""
    import numpy as np

    sql = Dialect(connection)
    cursor = sql.cursor
    if not sql.is_sqlite:
        # Binary results: PostgreSQL's bytea arrives as bytes, not hex text to decode.
        driver = connection.connection.driver_connection
        assert driver is not None
        cursor = driver.cursor(binary=True)
    lo, hi = start or 0, STEP_MAX if end is None else end
    # The first page starts at the block holding ``lo`` (or the last one before it).
    where = (
        "first_step >= coalesce((SELECT max(first_step) FROM point_blocks "
        "WHERE metric_id = ? AND first_step <= ?), ?)"
    )
    params: list[Any] = [metric_id, lo, lo]
    while True:
        cursor.execute(
            sql.sql(
                "SELECT first_step, steps, vals, times FROM point_block_data "
                f"WHERE metric_id = ? AND {where} AND first_step <= ? "
                f"ORDER BY first_step LIMIT {PAGE_BLOCKS}"
            ),
            [metric_id, *params, hi],
        )
        rows = cursor.fetchall()
        if not rows:
            return
        page = ColumnPage(
            np.frombuffer(b"".join(row[1] for row in rows), dtype="<i8"),
            np.frombuffer(b"".join(row[2] for row in rows), dtype="<f8"),
            np.frombuffer(b"".join(row[3] for row in rows), dtype="<f8"),
        )
        page = _within(page, lo, hi)
        if len(page):
            yield page
        if len(rows) < PAGE_BLOCKS:
            return
        where, params = "first_step > ?", [rows[-1][0]]


def _within(page: ColumnPage, lo: int, hi: int) -> ColumnPage:
    """The page cut to steps ``lo..hi`` (only its first and last blocks can reach past)."""
    steps = page.steps
    if len(steps) == 0 or (steps[0] >= lo and steps[-1] <= hi):
        return page
    begin = int(steps.searchsorted(lo, side="left"))
    stop = int(steps.searchsorted(hi, side="right"))
    return ColumnPage(steps[begin:stop], page.values[begin:stop], page.times[begin:stop])


def read_series(
    connection: Connection, metric_id: int, start: int | None = None, end: int | None = None
) -> ColumnPage:
    """The series' points with steps in ``start..end``, as one page."""
    import numpy as np

    pages = list(iter_pages(connection, metric_id, start, end))
    if len(pages) == 1:
        return pages[0]
    return ColumnPage(
        np.concatenate([p.steps for p in pages]) if pages else np.empty(0, dtype="<i8"),
        np.concatenate([p.values for p in pages]) if pages else np.empty(0, dtype="<f8"),
        np.concatenate([p.times for p in pages]) if pages else np.empty(0, dtype="<f8"),
    )


def read_invalid(
    connection: Connection, metric_id: int, start: int | None = None, end: int | None = None
) -> list[tuple[int, str]]:
    """Steps in ``start..end`` at which the series reported NaN or an infinity, with which
    (``nan``, ``inf``, ``-inf``), in step order."""
    sql = Dialect(connection)
    hi = STEP_MAX if end is None else end
    sql.cursor.execute(
        sql.sql(
            "SELECT step, kind FROM invalid_points WHERE metric_id = ? AND step >= ? "
            "AND step <= ? ORDER BY step"
        ),
        [metric_id, start or 0, hi],
    )
    return [(int(step), str(kind)) for step, kind in sql.cursor.fetchall()]


def run_ids(connection: Connection, project: str, runs: Sequence[str]) -> dict[str, int]:
    """The id of each of ``runs`` the project has, by name (one fixed query: SQLAlchemy's
    building of a run's full row cost a small bulk read more than its points)."""
    sql = Dialect(connection)
    sql.cursor.execute(
        sql.sql(
            "SELECT r.name, r.id FROM runs r JOIN projects p ON p.id = r.project_id "
            f"WHERE p.name = ? AND r.name IN ({', '.join('?' * len(runs))})"
        ),
        [project, *runs],
    )
    return {str(name): int(run_id) for name, run_id in sql.cursor.fetchall()}


def series_of_run(connection: Connection, run_id: int) -> list[tuple[str, int, int]]:
    """(name, id, valid points) of each series of a run, in name order."""
    sql = Dialect(connection)
    sql.cursor.execute(
        sql.sql("SELECT name, id, count FROM metrics WHERE run_id = ? ORDER BY name"), [run_id]
    )
    return [(str(name), int(id_), int(count)) for name, id_, count in sql.cursor.fetchall()]


__all__ = [
    "INVALID_VALUES",
    "PAGE_BLOCKS",
    "ColumnPage",
    "iter_pages",
    "read_invalid",
    "read_series",
    "run_ids",
    "series_of_run",
]
