"""The point store: every scalar point and its series summary.

This module owns the layout of points; routes only call its functions, so the layout can
change (per-series blocks, rollups) without touching them. The one other writer of the
layout is ``arena_postgres``, which does the same work in a single PostgreSQL statement.
Summaries (count, min, max, last, first/last step) are maintained as points are written.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, and_, func, literal_column, select, tuple_

from tuneplane.store.schema import events, invalid_points, metrics, points
from tuneplane.store.sql import Dialect, chunks, flat

#: A new event's points: (step, event id, {metric: value}).
NewEvent = tuple[int, int, Mapping[str, float]]
_Summary = tuple[int, str, int, float, float, int, int, float]


def _summaries(run_id: int, series: dict[str, list[tuple[int, int, float]]]) -> list[_Summary]:
    """(run, name, count, min, max, first step, last step, last value) per series."""
    rows = []
    for name, series_points in series.items():
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


def write_points(sql: Dialect, run_id: int, new_events: Sequence[NewEvent], now: float) -> int:
    """Store the points of new events (never seen before) and fold them into their series
    summaries. Returns the number of points stored."""
    series: dict[str, list[tuple[int, int, float]]] = {}
    for step, event_id, values in new_events:
        for name, value in values.items():
            points_of = series.get(name)
            if points_of is None:
                series[name] = [(step, event_id, value)]
            else:
                points_of.append((step, event_id, value))
    if not series:
        return 0
    metric_ids = _fold_summaries(sql, _summaries(run_id, series))
    rows = [
        (metric_ids[name], step, event_id, value, now)
        for name, series_points in series.items()
        for step, event_id, value in series_points
    ]
    sql.cursor.executemany(
        sql.sql(
            "INSERT INTO points (metric_id, step, event_id, value, time) VALUES (?, ?, ?, ?, ?)"
        ),
        rows,
    )
    return len(rows)


def _fold_summaries(sql: Dialect, rows: list[_Summary]) -> dict[str, int]:
    """Upsert the summaries; corrections of extrema happen in SQL against the stored row."""
    metric_ids: dict[str, int] = {}
    for part in chunks(rows, 8):
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
                "RETURNING id, name"
            ),
            flat(part),
        )
        metric_ids.update((name, metric_id) for metric_id, name in sql.cursor.fetchall())
    return metric_ids


@dataclass(frozen=True, slots=True)
class MetricSummary:
    id: int
    name: str
    count: int
    invalid_count: int
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
    metrics.c.min_value,
    metrics.c.max_value,
    metrics.c.last_value,
    metrics.c.first_step,
    metrics.c.last_step,
)


def list_summaries(connection: Connection, run_id: int) -> list[MetricSummary]:
    query = select(*_SUMMARY_COLUMNS).where(metrics.c.run_id == run_id).order_by(metrics.c.name)
    return [MetricSummary(*row) for row in connection.execute(query)]


def get_summary(connection: Connection, metric_id: int) -> MetricSummary:
    row = connection.execute(select(*_SUMMARY_COLUMNS).where(metrics.c.id == metric_id)).one()
    return MetricSummary(*row)


@dataclass(frozen=True, slots=True)
class RawPoint:
    step: int
    value: float
    log_id: str | None
    time: float
    event_id: int


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
    query = (
        select(points.c.step, points.c.value, events.c.log_id, points.c.time, points.c.event_id)
        .outerjoin(events, events.c.id == points.c.event_id)
        .where(points.c.metric_id == metric_id)
        .order_by(points.c.step, points.c.event_id)
        .limit(limit)
    )
    if after is not None:
        query = query.where(tuple_(points.c.step, points.c.event_id) > tuple_(*after))
    if start is not None:
        query = query.where(points.c.step >= start)
    if end is not None:
        query = query.where(points.c.step <= end)
    return [RawPoint(*row) for row in connection.execute(query)]


@dataclass(frozen=True, slots=True)
class Bucket:
    step_min: int
    step_max: int
    count: int
    min: float
    max: float
    mean: float
    last: float
    time_last: float


def count_points(connection: Connection, metric_id: int, start: int | None, end: int | None) -> int:
    query = select(func.count()).select_from(points).where(points.c.metric_id == metric_id)
    if start is not None:
        query = query.where(points.c.step >= start)
    if end is not None:
        query = query.where(points.c.step <= end)
    return int(connection.execute(query).scalar_one())


def read_buckets(
    connection: Connection, metric_id: int, *, lo: int, hi: int, buckets: int
) -> list[Bucket]:
    """Reduce steps ``lo..hi`` of one series to at most ``buckets`` buckets, inside SQL.

    Each bucket keeps its step range, min, max, mean and last value, so a single-step spike
    survives any amount of downsampling.
    """
    # Equal-width step ranges; dividing by the width (never multiplying) cannot overflow.
    width = -(-(hi - lo + 1) // buckets)
    bucket = ((points.c.step - lo) // width).label("bucket")
    in_range = and_(points.c.metric_id == metric_id, points.c.step >= lo, points.c.step <= hi)
    grouped = (
        select(
            bucket,
            func.min(points.c.step).label("step_min"),
            func.max(points.c.step).label("step_max"),
            func.count().label("n"),
            func.min(points.c.value).label("vmin"),
            func.max(points.c.value).label("vmax"),
            func.avg(points.c.value).label("vmean"),
        )
        .where(in_range)
        .group_by(literal_column("bucket"))
        .subquery("b")
    )
    last = points.alias("last_point")
    last_row = (
        select(last.c.value, last.c.time)
        .where(last.c.metric_id == metric_id, last.c.step == grouped.c.step_max)
        .order_by(last.c.event_id.desc())
        .limit(1)
    )
    query = select(
        grouped.c.step_min,
        grouped.c.step_max,
        grouped.c.n,
        grouped.c.vmin,
        grouped.c.vmax,
        grouped.c.vmean,
        last_row.with_only_columns(last.c.value).scalar_subquery(),
        last_row.with_only_columns(last.c.time).scalar_subquery(),
    ).order_by(grouped.c.step_min)
    return [
        Bucket(int(a), int(b), int(n), float(mn), float(mx), float(mean), float(lv), float(lt))
        for a, b, n, mn, mx, mean, lv, lt in connection.execute(query)
    ]


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
    connection: Connection, run_id: int, batch_size: int = 5000
) -> Iterator[tuple[int, str, float, str | None, float]]:
    """Every original point of a run as (step, metric, value, log_id, time), streamed."""
    query = (
        select(points.c.step, metrics.c.name, points.c.value, events.c.log_id, points.c.time)
        .join(metrics, metrics.c.id == points.c.metric_id)
        .outerjoin(events, events.c.id == points.c.event_id)
        .where(metrics.c.run_id == run_id)
        .order_by(metrics.c.name, points.c.step, points.c.event_id)
    )
    result = connection.execution_options(yield_per=batch_size).execute(query)
    yield from ((step, name, value, log_id, time) for step, name, value, log_id, time in result)


__all__ = [
    "Bucket",
    "MetricSummary",
    "NewEvent",
    "RawPoint",
    "count_points",
    "get_summary",
    "iter_export_rows",
    "list_summaries",
    "read_buckets",
    "read_invalid",
    "read_page",
    "step_bounds",
    "write_points",
]
