"""The point store: every scalar point and its series summary.

This module owns the layout of points; routes and other store modules only call its
functions, so the layout can change (per-series blocks, rollups) without touching them.
Summaries (count, min, max, last, first/last step) are maintained as points are written.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sqlalchemy import Connection, and_, case, func, literal_column, select, tuple_

from tuneplane.store.dialect import greatest, least, upsert
from tuneplane.store.schema import events, metrics, points


@dataclass(frozen=True, slots=True)
class NewPoint:
    metric: str
    step: int
    event_id: int
    value: float
    time: float


@dataclass(slots=True)
class _Summary:
    count: int
    min_value: float
    max_value: float
    first_step: int
    last_step: int
    last_value: float

    @classmethod
    def of(cls, point: NewPoint) -> _Summary:
        return cls(1, point.value, point.value, point.step, point.step, point.value)

    def add(self, point: NewPoint) -> None:
        self.count += 1
        self.min_value = min(self.min_value, point.value)
        self.max_value = max(self.max_value, point.value)
        self.first_step = min(self.first_step, point.step)
        # Later points at the same step win "last": they arrived later.
        if point.step >= self.last_step:
            self.last_step = point.step
            self.last_value = point.value


def write_points(connection: Connection, run_id: int, new_points: list[NewPoint]) -> None:
    """Store new points (never seen before) and fold them into their series summaries."""
    if not new_points:
        return
    summaries: dict[str, _Summary] = {}
    for point in new_points:
        summary = summaries.get(point.metric)
        if summary is None:
            summaries[point.metric] = _Summary.of(point)
        else:
            summary.add(point)
    metric_ids = _fold_summaries(connection, run_id, summaries)
    rows = [(metric_ids[p.metric], p.step, p.event_id, p.value, p.time) for p in new_points]
    if connection.dialect.name == "postgresql":
        # One statement with array parameters is far faster than executemany on PostgreSQL.
        columns = list(zip(*rows, strict=True))
        connection.exec_driver_sql(
            "INSERT INTO points (metric_id, step, event_id, value, time) "
            "SELECT * FROM unnest(%s::int[], %s::bigint[], %s::bigint[], "
            "%s::float8[], %s::float8[])",
            tuple(list(column) for column in columns),
        )
    else:
        connection.exec_driver_sql(
            "INSERT INTO points (metric_id, step, event_id, value, time) VALUES (?, ?, ?, ?, ?)",
            rows,
        )


def _fold_summaries(
    connection: Connection, run_id: int, summaries: dict[str, _Summary]
) -> dict[str, int]:
    stmt = upsert(connection, metrics)
    new = stmt.excluded
    stmt = stmt.on_conflict_do_update(
        index_elements=[metrics.c.run_id, metrics.c.name],
        set_={
            "count": metrics.c.count + new["count"],
            "min_value": least(connection, metrics.c.min_value, new.min_value),
            "max_value": greatest(connection, metrics.c.max_value, new.max_value),
            "first_step": least(connection, metrics.c.first_step, new.first_step),
            "last_value": case(
                (new.last_step >= metrics.c.last_step, new.last_value),
                else_=metrics.c.last_value,
            ),
            "last_step": greatest(connection, metrics.c.last_step, new.last_step),
        },
    ).returning(metrics.c.id, metrics.c.name)
    params = [
        {
            "run_id": run_id,
            "name": name,
            "count": s.count,
            "min_value": s.min_value,
            "max_value": s.max_value,
            "first_step": s.first_step,
            "last_step": s.last_step,
            "last_value": s.last_value,
        }
        for name, s in summaries.items()
    ]
    result = connection.execute(stmt, params)
    return {name: metric_id for metric_id, name in result}


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
    log_id: str
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
        .join(events, events.c.id == points.c.event_id)
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


def iter_export_rows(
    connection: Connection, run_id: int, batch_size: int = 5000
) -> Iterator[tuple[int, str, float, str, float]]:
    """Every original point of a run as (step, metric, value, log_id, time), streamed."""
    query = (
        select(points.c.step, metrics.c.name, points.c.value, events.c.log_id, points.c.time)
        .join(metrics, metrics.c.id == points.c.metric_id)
        .join(events, events.c.id == points.c.event_id)
        .where(metrics.c.run_id == run_id)
        .order_by(metrics.c.name, points.c.step, points.c.event_id)
    )
    result = connection.execution_options(yield_per=batch_size).execute(query)
    for step, name, value, log_id, time in result:
        yield step, name, value, log_id, time


__all__ = [
    "Bucket",
    "MetricSummary",
    "NewPoint",
    "RawPoint",
    "count_points",
    "get_summary",
    "iter_export_rows",
    "list_summaries",
    "read_buckets",
    "read_page",
    "step_bounds",
    "write_points",
]
