"""The point store: every scalar point of a run and its series summary.

Points live in per-series blocks (see ``blocks``): each block's rollup is a narrow row of
``point_blocks`` and its packed arrays a row of ``point_block_data``, so a chart over
millions of points scans one small row per block and unpacks only the blocks it must.
Appending to a series rewrites its last block only; a point landing inside stored steps (an
SDK correction, a late Arena event) rewrites the blocks around it. Routes only call this
module, so the layout can change again without touching them. Summaries (count, min, max,
last, first/last step) are kept in ``metrics`` as points are written.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, select

from tuneplane.store.blocks import BLOCK_POINTS, Columns, Points, cut
from tuneplane.store.schema import events, invalid_points, metrics
from tuneplane.store.sql import Dialect, chunks, flat

#: A new event's points: (step, event id, {metric: value}).
NewEvent = tuple[int, int, Mapping[str, float]]
_Summary = tuple[int, str, int, float, float, int, int, float]

# A block is a row of rollups in point_blocks and a row of packed arrays in
# point_block_data, both keyed by (metric_id, first_step): a chart scans the narrow rollup
# rows, many to a page, and reads arrays only where it must.
_ARRAYS = "steps, events, vals, times"
_INSERT_ROLLUP = (
    "INSERT INTO point_blocks (metric_id, first_step, last_step, count, min_value, "
    "max_value, sum_value, last_value, last_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_DATA = (
    f"INSERT INTO point_block_data (metric_id, first_step, {_ARRAYS}) VALUES (?, ?, ?, ?, ?, ?)"
)
_UPDATE_ROLLUP = (
    "UPDATE point_blocks SET last_step = ?, count = ?, min_value = ?, max_value = ?, "
    "sum_value = ?, last_value = ?, last_time = ? WHERE metric_id = ? AND first_step = ?"
)
_UPDATE_DATA = (
    "UPDATE point_block_data SET steps = ?, events = ?, vals = ?, times = ? "
    "WHERE metric_id = ? AND first_step = ?"
)
# The block holding ``step`` or the last one before it: where a range of steps starts.
_FROM_STEP = (
    "first_step >= coalesce((SELECT max(first_step) FROM point_blocks "
    "WHERE metric_id = ? AND first_step <= ?), ?)"
)


# Writing ------------------------------------------------------------------------------------


@dataclass(slots=True)
class SeriesChange:
    """Points to put into one series, in (step, event) order with distinct keys (a stored
    key is replaced), and keys to remove."""

    put: Points
    remove: list[tuple[int, int]] = field(default_factory=list)


@dataclass(slots=True)
class SeriesEffect:
    """What a change did: points added, and the old values of replaced and removed points."""

    added: int = 0
    replaced: list[float] = field(default_factory=list)
    removed: list[float] = field(default_factory=list)


@dataclass(slots=True)
class _Writes:
    deletes: list[tuple[int, int]] = field(default_factory=list)
    updates: list[tuple[Any, ...]] = field(default_factory=list)
    inserts: list[tuple[Any, ...]] = field(default_factory=list)

    def replace(self, metric_id: int, first_steps: Iterable[int], points: Points) -> None:
        self.deletes += [(metric_id, first_step) for first_step in first_steps]
        self.inserts += [(metric_id, *row) for row in cut(points)]

    def extend(self, metric_id: int, tail: _Tail, put: Points) -> None:
        """Add points after a series' last block: within the block when they fit (its
        arrays grow by the new points' bytes, its rollups fold theirs in, as PostgreSQL
        does in place), else the block and the new points are cut again."""
        assert tail.packed is not None
        if tail.count + len(put) <= BLOCK_POINTS:
            new = next(cut(put))
            self.updates.append(
                (
                    metric_id,
                    tail.first_step,
                    new[1],
                    tail.count + new[2],
                    min(tail.min_value, new[3]),
                    max(tail.max_value, new[4]),
                    tail.sum_value + new[5],
                    *new[6:8],
                    *(old + added for old, added in zip(tail.packed, new[8:], strict=True)),
                )
            )
            return
        points = Points.unpacked(*tail.packed)
        points.extend(put)
        rows = list(cut(points))
        self.updates.append((metric_id, *rows[0]))
        self.inserts += [(metric_id, *row) for row in rows[1:]]

    def execute(self, sql: Dialect) -> None:
        cursor = sql.cursor
        if self.deletes:
            for table in ("point_blocks", "point_block_data"):
                cursor.executemany(
                    sql.sql(f"DELETE FROM {table} WHERE metric_id = ? AND first_step = ?"),
                    self.deletes,
                )
        # Rows are (metric_id, first_step, 7 rollup values, 4 arrays).
        if self.updates:
            cursor.executemany(
                sql.sql(_UPDATE_ROLLUP), [(*row[2:9], row[0], row[1]) for row in self.updates]
            )
            cursor.executemany(
                sql.sql(_UPDATE_DATA), [(*row[9:], row[0], row[1]) for row in self.updates]
            )
        if self.inserts:
            cursor.executemany(sql.sql(_INSERT_ROLLUP), [row[:9] for row in self.inserts])
            cursor.executemany(
                sql.sql(_INSERT_DATA), [(row[0], row[1], *row[9:]) for row in self.inserts]
            )


def apply_changes(sql: Dialect, changes: Mapping[int, SeriesChange]) -> dict[int, SeriesEffect]:
    """Apply changes to several series (ids of ``metrics`` rows the caller has written or
    locked in this transaction, so concurrent writers of a series queue behind it)."""
    effects: dict[int, SeriesEffect] = {}
    if not sql.is_sqlite:
        appended = _append_in_place(sql, changes)
        effects.update(
            (metric_id, SeriesEffect(added=len(changes[metric_id].put))) for metric_id in appended
        )
        changes = {key: change for key, change in changes.items() if key not in appended}
        if not changes:
            return effects
    tails = _tails(sql, list(changes))
    writes = _Writes()
    for metric_id, change in changes.items():
        put, tail = change.put, tails.get(metric_id)
        if change.remove or (tail is not None and put.steps and put.steps[0] <= tail.last_step):
            effects[metric_id] = _merge(sql, metric_id, change, writes)
            continue
        effects[metric_id] = SeriesEffect(added=len(put))
        if tail is not None and tail.packed is not None:
            writes.extend(metric_id, tail, put)
        elif put.steps:
            writes.replace(metric_id, (), put)
    writes.execute(sql)
    return effects


# Appends to the last block of each series where the new points come after it and fit in
# it, in one statement: the block's arrays are extended by PostgreSQL (no round trip of the
# stored arrays) and its rollups are folded with the new points' own. Answers the series
# appended to; the others take the general path.
_APPEND_IN_PLACE = f"""
WITH input AS (
    SELECT * FROM unnest(
        %s::int[], %s::bigint[], %s::bigint[], %s::int[], %s::float8[], %s::float8[],
        %s::float8[], %s::float8[], %s::float8[], %s::bytea[], %s::bytea[], %s::bytea[],
        %s::bytea[]
    ) AS i(metric_id, first_step, last_step, count, min_value, max_value, sum_value,
           last_value, last_time, steps, events, vals, times)
),
target AS (
    SELECT i.*, tail.first_step AS block_step FROM input i CROSS JOIN LATERAL (
        SELECT b.first_step, b.last_step, b.count FROM point_blocks b
        WHERE b.metric_id = i.metric_id ORDER BY b.first_step DESC LIMIT 1
    ) tail
    WHERE tail.last_step < i.first_step AND tail.count + i.count <= {BLOCK_POINTS}
),
rollups AS (
    UPDATE point_blocks b SET last_step = t.last_step, count = b.count + t.count,
        min_value = least(b.min_value, t.min_value),
        max_value = greatest(b.max_value, t.max_value),
        sum_value = b.sum_value + t.sum_value, last_value = t.last_value,
        last_time = t.last_time
    FROM target t WHERE b.metric_id = t.metric_id AND b.first_step = t.block_step
    RETURNING b.metric_id
),
arrays AS (
    UPDATE point_block_data d SET steps = d.steps || t.steps, events = d.events || t.events,
        vals = d.vals || t.vals, times = d.times || t.times
    FROM target t WHERE d.metric_id = t.metric_id AND d.first_step = t.block_step
)
SELECT metric_id FROM rollups
"""


def _append_in_place(sql: Dialect, changes: Mapping[int, SeriesChange]) -> set[int]:
    """Append new points to the last blocks of their series on the server (PostgreSQL)."""
    rows = []
    for metric_id, change in changes.items():
        if change.remove or not change.put.steps or len(change.put) >= BLOCK_POINTS:
            continue
        block = next(cut(change.put))
        rows.append((metric_id, *block))
    if not rows:
        return set()
    # Array literals in text: psycopg adapts Python lists element by element, slowly.
    columns = list(zip(*rows, strict=True))
    numbers = ["{" + ",".join(map(repr, column)) + "}" for column in columns[:9]]
    binaries = [
        "{" + ",".join(f'"\\\\x{data.hex()}"' for data in column) + "}" for column in columns[9:]
    ]
    sql.cursor.execute(_APPEND_IN_PLACE, numbers + binaries)
    return {metric_id for (metric_id,) in sql.cursor.fetchall()}


@dataclass(slots=True)
class _Tail:
    """A series' last block: its range and rollups, and its packed arrays when it has
    room."""

    first_step: int
    last_step: int
    count: int
    min_value: float
    max_value: float
    sum_value: float
    packed: tuple[bytes, bytes, bytes, bytes] | None


def _tails(sql: Dialect, metric_ids: Sequence[int]) -> dict[int, _Tail]:
    """The last block of each series, with its arrays only when it has room for more
    points."""
    room = f"b.count < {BLOCK_POINTS}"
    arrays = ", ".join(
        f"CASE WHEN {room} THEN d.{column} END" for column in ("steps", "events", "vals", "times")
    )
    last_block = (
        "SELECT b.metric_id, b.first_step, b.last_step, b.count, b.min_value, b.max_value, "
        f"b.sum_value, {arrays} FROM point_blocks b JOIN point_block_data d "
        "ON d.metric_id = b.metric_id AND d.first_step = b.first_step "
        "WHERE b.metric_id = {} ORDER BY b.first_step DESC LIMIT 1"
    )
    if sql.is_sqlite:
        # One term per series (SQLite allows 500 in a compound SELECT, and has no LATERAL).
        one = f"SELECT * FROM ({last_block.format('?')}) AS t"
        slices = (metric_ids[start : start + 250] for start in range(0, len(metric_ids), 250))
        parts: list[tuple[str, list[Any]]] = [
            (" UNION ALL ".join([one] * len(part)), list(part)) for part in slices
        ]
    else:
        # One plan whatever the number of series.
        query = (
            "SELECT t.* FROM unnest(%s::int[]) AS m(id) "
            f"CROSS JOIN LATERAL ({last_block.format('m.id')}) AS t"
        )
        parts = [(query, [list(metric_ids)])]
    found: dict[int, _Tail] = {}
    for statement, parameters in parts:
        sql.cursor.execute(statement, parameters)
        for metric_id, first, last, count, low, high, total, *data in sql.cursor.fetchall():
            packed = None if data[0] is None else (data[0], data[1], data[2], data[3])
            found[metric_id] = _Tail(first, last, count, low, high, total, packed)
    return found


def _merge(sql: Dialect, metric_id: int, change: SeriesChange, writes: _Writes) -> SeriesEffect:
    """Rewrite the blocks that the change's steps fall into, with the change applied."""
    put = change.put
    touched = [*put.steps, *(step for step, _ in change.remove)]
    lo, hi = min(touched), max(touched)
    # From the block holding lo (or the one before) to the first block after hi: points
    # landing in a gap fill their neighbours instead of starting small blocks of their own.
    sql.cursor.execute(
        sql.sql(
            f"SELECT first_step, {_ARRAYS} FROM point_block_data WHERE metric_id = ? "
            "AND first_step <= coalesce((SELECT min(first_step) FROM point_blocks "
            f"WHERE metric_id = ? AND first_step > ?), ?) AND {_FROM_STEP} ORDER BY first_step"
        ),
        [metric_id, metric_id, hi, hi, metric_id, lo, lo],
    )
    stored: dict[tuple[int, int], tuple[float, float]] = {}
    first_steps = []
    for first_step, *arrays in sql.cursor.fetchall():
        first_steps.append(first_step)
        block = Points.unpacked(*arrays)
        for index, step in enumerate(block.steps):
            stored[(step, block.events[index])] = (block.values[index], block.times[index])
    effect = SeriesEffect()
    for key in change.remove:
        old = stored.pop(key, None)
        if old is not None:
            effect.removed.append(old[0])
    for index, step in enumerate(put.steps):
        key = (step, put.events[index])
        old = stored.get(key)
        if old is None:
            effect.added += 1
        else:
            effect.replaced.append(old[0])
        stored[key] = (put.values[index], put.times[index])
    keys = sorted(stored)
    merged = Points(
        [step for step, _ in keys],
        [event for _, event in keys],
        [stored[key][0] for key in keys],
        [stored[key][1] for key in keys],
    )
    writes.replace(metric_id, first_steps, merged)
    return effect


def write_points(
    sql: Dialect,
    new_events: Mapping[int, Sequence[NewEvent]],
    now: float,
    times: Mapping[int, float] | None = None,
) -> None:
    """Store the points of new Arena events (never seen before), given per run id, and fold
    them into their series summaries. A point's time is ``now``, or its event's time in
    ``times`` (event id -> time: imported events keep the time they happened)."""
    series: dict[tuple[int, str], list[tuple[int, int, float]]] = {}
    for run_id, found in new_events.items():
        for step, event_id, values in found:
            for name, value in values.items():
                points_of = series.get((run_id, name))
                if points_of is None:
                    series[run_id, name] = [(step, event_id, value)]
                else:
                    points_of.append((step, event_id, value))
    if not series:
        return
    metric_ids = _fold_summaries(sql, summarize(series))
    store_new_points(sql, {metric_ids[key]: points for key, points in series.items()}, now, times)


def store_new_points(
    sql: Dialect,
    series: Mapping[int, list[tuple[int, int, float]]],
    now: float,
    times: Mapping[int, float] | None = None,
) -> None:
    """Store (step, event id, value) points with new event ids, per series id, at ``now``
    or their event's time in ``times``."""
    changes = {}
    for metric_id, found in series.items():
        found.sort()
        changes[metric_id] = SeriesChange(
            Points(
                [step for step, _, _ in found],
                [event for _, event, _ in found],
                [value for _, _, value in found],
                [now] * len(found)
                if times is None
                else [times.get(event, now) for _, event, _ in found],
            )
        )
    apply_changes(sql, changes)


def summarize(series: Mapping[tuple[int, str], list[tuple[int, int, float]]]) -> list[_Summary]:
    """(run, name, count, min, max, first step, last step, last value) per (run, name) of
    (step, event, value) points in arrival order."""
    rows = []
    for (run_id, name), series_points in series.items():
        values = [value for _, _, value in series_points]
        last = series_points[0]
        for point in series_points:
            # Arrival order breaks ties: a later point at the same step is the last one.
            if point[0] >= last[0]:
                last = point
        first_step = min(step for step, _, _ in series_points)
        rows.append(
            (run_id, name, len(values), min(values), max(values), first_step, last[0], last[2])
        )
    return rows


def _fold_summaries(sql: Dialect, rows: list[_Summary]) -> dict[tuple[int, str], int]:
    """Upsert the summaries; corrections of extrema happen in SQL against the stored row.
    Rows go in (run, name) order, so concurrent batches lock their series in the same
    order."""
    metric_ids: dict[tuple[int, str], int] = {}
    for part in chunks(sorted(rows, key=lambda row: row[:2]), 8):
        sql.cursor.execute(
            sql.sql(
                "INSERT INTO metrics (run_id, name, count, min_value, max_value, first_step, "
                f"last_step, last_value) VALUES {sql.values(8, len(part))} "
                "ON CONFLICT (run_id, name) DO UPDATE SET "
                "count = metrics.count + excluded.count, "
                f"min_value = {sql.least}(metrics.min_value, excluded.min_value), "
                f"max_value = {sql.greatest}(metrics.max_value, excluded.max_value), "
                f"first_step = {sql.least}(metrics.first_step, excluded.first_step), "
                "last_value = CASE WHEN excluded.last_step >= metrics.last_step "
                "THEN excluded.last_value ELSE metrics.last_value END, "
                f"last_step = {sql.greatest}(metrics.last_step, excluded.last_step) "
                "RETURNING id, run_id, name"
            ),
            flat(part),
        )
        metric_ids.update(
            ((run_id, name), metric_id) for metric_id, run_id, name in sql.cursor.fetchall()
        )
    return metric_ids


def series_extremes(
    sql: Dialect, metric_id: int
) -> tuple[float | None, float | None, float | None]:
    """(min, max, last value) of a series, from its block rollups."""
    sql.cursor.execute(
        sql.sql("SELECT min(min_value), max(max_value) FROM point_blocks WHERE metric_id = ?"),
        [metric_id],
    )
    low, high = sql.cursor.fetchone()
    sql.cursor.execute(
        sql.sql(
            "SELECT last_value FROM point_blocks WHERE metric_id = ? "
            "ORDER BY first_step DESC LIMIT 1"
        ),
        [metric_id],
    )
    row = sql.cursor.fetchone()
    return low, high, None if row is None else row[0]


# Reading ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MetricSummary:
    id: int
    name: str
    count: int
    invalid_count: int
    corrected: int
    min_value: float | None
    max_value: float | None
    last_value: float | None
    first_step: int
    last_step: int


_SUMMARY_COLUMNS = (
    metrics.c.id,
    metrics.c.name,
    metrics.c.count,
    metrics.c.invalid_count,
    metrics.c.corrected,
    metrics.c.min_value,
    metrics.c.max_value,
    metrics.c.last_value,
    metrics.c.first_step,
    metrics.c.last_step,
)


def list_summaries(connection: Connection, run_id: int) -> list[MetricSummary]:
    query = select(*_SUMMARY_COLUMNS).where(metrics.c.run_id == run_id).order_by(metrics.c.name)
    return [MetricSummary(*tuple(row)) for row in connection.execute(query)]


def get_summary(connection: Connection, metric_id: int) -> MetricSummary:
    row = connection.execute(select(*_SUMMARY_COLUMNS).where(metrics.c.id == metric_id)).one()
    return MetricSummary(*tuple(row))


@dataclass(frozen=True, slots=True)
class RawPoint:
    step: int
    value: float
    log_id: str | None
    time: float
    event_id: int


def _fetch_all(connection: Connection, statement: str, params: Sequence[Any]) -> list[Any]:
    """Rows straight from the driver's cursor: a chart reads a row per block, and a result
    object per row costs more than the row."""
    sql = Dialect(connection)
    sql.cursor.execute(sql.sql(statement), tuple(params))
    rows: list[Any] = sql.cursor.fetchall()
    return rows


def _block_rows(
    connection: Connection,
    columns: str,
    metric_id: int,
    *,
    table: str = "point_blocks",
    lo: int,
    hi: int | None = None,
    after_block: int | None = None,
    limit: int | None = None,
) -> list[Any]:
    """Blocks of a series that may hold steps from ``lo`` (up to ``hi``), in order; with
    ``after_block``, the blocks after the one starting there. Rollups are in point_blocks,
    arrays in point_block_data."""
    where, params = ["metric_id = ?"], [metric_id]
    if after_block is None:
        where.append(_FROM_STEP)
        params += [metric_id, lo, lo]
    else:
        where.append("first_step > ?")
        params.append(after_block)
    if hi is not None:
        where.append("first_step <= ?")
        params.append(hi)
    statement = f"SELECT {columns} FROM {table} WHERE {' AND '.join(where)} ORDER BY first_step" + (
        "" if limit is None else f" LIMIT {int(limit)}"
    )
    return _fetch_all(connection, statement, params)


def _log_ids(connection: Connection, event_ids: Iterable[int]) -> dict[int, str]:
    """The ``log_id`` of each Arena event id (SDK points have event id 0 and none)."""
    wanted = sorted({event_id for event_id in event_ids if event_id})
    found: dict[int, str] = {}
    for start in range(0, len(wanted), 1000):
        part = wanted[start : start + 1000]
        query = select(events.c.id, events.c.log_id).where(events.c.id.in_(part))
        found.update((int(event_id), str(log_id)) for event_id, log_id in connection.execute(query))
    return found


def read_page(
    connection: Connection,
    metric_id: int,
    *,
    after: tuple[int, int] | None,
    start: int | None,
    end: int | None,
    limit: int,
) -> list[RawPoint]:
    """Original points of one series in (step, event) order, after a keyset cursor."""
    lo = max(start if start is not None else 0, after[0] if after is not None else 0)
    page: list[tuple[int, int, float, float]] = []
    last_block: int | None = None
    while len(page) < limit:
        rows = _block_rows(
            connection,
            f"first_step, {_ARRAYS}",
            metric_id,
            table="point_block_data",
            lo=lo,
            hi=end,
            after_block=last_block,
            limit=limit // BLOCK_POINTS + 2,
        )
        if not rows:
            break
        for first_step, *arrays in rows:
            last_block = first_step
            block = Points.unpacked(*arrays)
            begin = bisect_left(block.steps, lo)
            stop = len(block) if end is None else bisect_right(block.steps, end)
            for index in range(begin, stop):
                key = (block.steps[index], block.events[index])
                if after is None or key > after:
                    page.append((key[0], key[1], block.values[index], block.times[index]))
            if len(page) >= limit:
                break
    del page[limit:]
    log_ids = _log_ids(connection, (event_id for _, event_id, _, _ in page))
    return [
        RawPoint(step, value, log_ids.get(event_id), time, event_id)
        for step, event_id, value, time in page
    ]


@dataclass(slots=True)
class Bucket:
    step_min: int
    step_max: int
    count: int
    min: float
    max: float
    sum: float
    last: float
    time_last: float

    @property
    def mean(self) -> float:
        return self.sum / self.count


@dataclass(frozen=True, slots=True)
class Chart:
    """A series over a step range: every point (as one-point buckets) when at most
    ``max_points`` fit, else buckets of about equal step ranges (see ``read_chart``)."""

    total: int
    downsampled: bool
    buckets: list[Bucket]


class _Buckets:
    def __init__(self, lo: int, width: int) -> None:
        self.lo, self.width = lo, width
        self.out: list[Bucket] = []
        self._index = -1

    def index(self, step: int) -> int:
        return (step - self.lo) // self.width

    def fold(self, index: int, part: Bucket) -> None:
        if index != self._index:
            self.out.append(part)
            self._index = index
            return
        into = self.out[-1]
        into.step_max = part.step_max
        into.count += part.count
        into.min = min(into.min, part.min)
        into.max = max(into.max, part.max)
        into.sum += part.sum
        into.last, into.time_last = part.last, part.time_last

    def fold_points(self, points: Columns, begin: int, stop: int) -> None:
        steps, values = points.steps, points.values
        while begin < stop:
            index = self.index(steps[begin])
            end = bisect_right(steps, self.lo + (index + 1) * self.width - 1, begin, stop)
            part = values[begin:end]
            self.fold(
                index,
                Bucket(
                    steps[begin],
                    steps[end - 1],
                    end - begin,
                    min(part),
                    max(part),
                    sum(part),
                    part[-1],
                    points.times[end - 1],
                ),
            )
            begin = end


def read_chart(
    connection: Connection, metric_id: int, *, lo: int, hi: int, max_points: int
) -> Chart:
    """Steps ``lo..hi`` of one series, reduced to at most ``max_points`` buckets.

    Buckets cover about equal step ranges, in order and without overlap, and each keeps its
    exact step range, count, min, max, mean and last value, so a single-step spike survives
    any amount of downsampling. A block spanning fewer steps than a bucket joins whole the
    bucket where it starts, through its rollup, so a bucket's range may end up to one block
    past its nominal end; only wider blocks and those cut by ``lo``/``hi`` are unpacked.
    When every point fits, each point is its own bucket.
    """
    rollups = [
        row for row in _block_rows(connection, _ROLLUP, metric_id, lo=lo, hi=hi) if row[1] >= lo
    ]
    edges = [row[0] for row in rollups if row[0] < lo or row[1] > hi]
    arrays = _unpack_blocks(connection, metric_id, edges)
    total = sum(row[2] for row in rollups if row[0] not in arrays)
    for first_step in edges:
        steps = arrays[first_step].steps
        total += bisect_right(steps, hi) - bisect_left(steps, lo)
    if total <= max_points:
        arrays.update(_unpack_blocks(connection, metric_id, [row[0] for row in rollups]))
        every = [arrays[row[0]] for row in rollups]
        return Chart(total, False, [b for block in every for b in _one_point(block, lo, hi)])
    buckets = _Buckets(lo, -(-(hi - lo + 1) // max_points))
    # A block narrower than a bucket goes whole into the bucket its first step falls in
    # (that bucket then reaches a little past its nominal end); a wider one is split.
    cut_blocks = [
        row[0] for row in rollups if row[0] not in arrays and row[1] - row[0] >= buckets.width
    ]
    arrays.update(_unpack_blocks(connection, metric_id, cut_blocks))
    for first_step, last_step, count, low, high, total_sum, last, last_time in rollups:
        points = arrays.get(first_step)
        if points is None:
            rollup = Bucket(first_step, last_step, count, low, high, total_sum, last, last_time)
            buckets.fold(buckets.index(first_step), rollup)
        else:
            begin = bisect_left(points.steps, lo)
            buckets.fold_points(points, begin, bisect_right(points.steps, hi, begin))
    return Chart(total, True, buckets.out)


_ROLLUP = "first_step, last_step, count, min_value, max_value, sum_value, last_value, last_time"


def _one_point(points: Columns, lo: int, hi: int) -> list[Bucket]:
    begin, stop = bisect_left(points.steps, lo), bisect_right(points.steps, hi)
    return [
        Bucket(step, step, 1, value, value, value, value, time)
        for step, value, time in zip(
            points.steps[begin:stop],
            points.values[begin:stop],
            points.times[begin:stop],
            strict=True,
        )
    ]


def _unpack_blocks(
    connection: Connection, metric_id: int, first_steps: Sequence[int]
) -> dict[int, Columns]:
    found: dict[int, Columns] = {}
    for start in range(0, len(first_steps), 500):
        part = first_steps[start : start + 500]
        statement = (
            "SELECT first_step, steps, vals, times FROM point_block_data WHERE metric_id = ? "
            f"AND first_step IN ({', '.join(['?'] * len(part))})"
        )
        rows = _fetch_all(connection, statement, [metric_id, *part])
        for first_step, steps, values, times in rows:
            found[first_step] = Columns.unpacked(steps, values, times)
    return found


def values_at(connection: Connection, metric_id: int, steps: Sequence[int]) -> list[float | None]:
    """The series' value at each of ``steps`` (ascending), or its last one before that step;
    None before its first point. Pairs another series' points with this one by step (a chart
    over ``train/epoch`` rather than the step). A step at or after a block's last step reads
    the block's rollup; only blocks with a step inside them are unpacked, at most one a step.
    """
    if not steps:
        return []
    rollups = _block_rows(
        connection, "first_step, last_step, last_value", metric_id, lo=steps[0], hi=steps[-1]
    )
    firsts = [row[0] for row in rollups]
    holding = [bisect_right(firsts, step) - 1 for step in steps]
    inside = sorted(
        {
            rollups[i][0]
            for i, step in zip(holding, steps, strict=True)
            if i >= 0 and step < rollups[i][1]
        }
    )
    arrays = _unpack_blocks(connection, metric_id, inside)
    found: list[float | None] = []
    for i, step in zip(holding, steps, strict=True):
        if i < 0:
            found.append(None)
            continue
        first_step, last_step, last_value = rollups[i]
        if step >= last_step:
            found.append(float(last_value))
            continue
        block = arrays[first_step]
        found.append(block.values[bisect_right(block.steps, step) - 1])
    return found


def step_bounds(connection: Connection, metric_id: int) -> tuple[int, int] | None:
    row = connection.execute(
        select(metrics.c.first_step, metrics.c.last_step).where(metrics.c.id == metric_id)
    ).one_or_none()
    return None if row is None else (int(row[0]), int(row[1]))


def read_invalid(connection: Connection, metric_id: int) -> list[tuple[int, str]]:
    """Steps at which the series reported NaN or an infinity, with which."""
    query = (
        select(invalid_points.c.step, invalid_points.c.kind)
        .where(invalid_points.c.metric_id == metric_id)
        .order_by(invalid_points.c.step)
    )
    return [(int(step), str(kind)) for step, kind in connection.execute(query)]


def iter_export_rows(
    connection: Connection, run_id: int
) -> Iterator[tuple[int, str, float, str | None, float]]:
    """Every original point of a run as (step, metric, value, log_id, time), streamed a
    few blocks at a time, series by series in name order."""
    series = connection.execute(
        select(metrics.c.id, metrics.c.name)
        .where(metrics.c.run_id == run_id)
        .order_by(metrics.c.name)
    ).all()
    for metric_id, name in series:
        last_block: int | None = None
        while rows := _block_rows(
            connection,
            f"first_step, {_ARRAYS}",
            metric_id,
            table="point_block_data",
            lo=0,
            after_block=last_block,
            limit=16,
        ):
            for first_step, *arrays in rows:
                last_block = first_step
                block = Points.unpacked(*arrays)
                log_ids = _log_ids(connection, block.events)
                for step, event_id, value, time in zip(
                    block.steps, block.events, block.values, block.times, strict=True
                ):
                    yield step, name, value, log_ids.get(event_id), time


__all__ = [
    "BLOCK_POINTS",
    "Bucket",
    "Chart",
    "MetricSummary",
    "NewEvent",
    "RawPoint",
    "SeriesChange",
    "SeriesEffect",
    "apply_changes",
    "get_summary",
    "iter_export_rows",
    "list_summaries",
    "read_chart",
    "read_invalid",
    "read_page",
    "series_extremes",
    "step_bounds",
    "store_new_points",
    "summarize",
    "values_at",
    "write_points",
]
