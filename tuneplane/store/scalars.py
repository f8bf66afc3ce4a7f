"""SDK scalars: points keyed by (series, step), where reporting a step again corrects it.

SDK points share the point table with Arena events under event id 0, so the same reads,
downsampling and CSV export serve both. A correction replaces the value; when the replaced
value was an extreme of its series, the summary's min/max are recomputed from the points.
NaN and infinities are kept in ``invalid_points``: counted and shown, never numbers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, bindparam, func, select

from tuneplane.contract.errors import InvalidInput, Violation
from tuneplane.contract.limits import RUN_MAX_SERIES
from tuneplane.contract.protocol import ScalarBatch
from tuneplane.store.dialect import upsert
from tuneplane.store.schema import invalid_points, metrics, points
from tuneplane.store.sql import Dialect

SDK_EVENT = 0


@dataclass(frozen=True, slots=True)
class ScalarOutcome:
    new: int
    corrected: int
    invalid: int

    def to_json(self) -> dict[str, object]:
        return {"points": {"new": self.new, "corrected": self.corrected}, "invalid": self.invalid}


@dataclass(slots=True)
class _Series:
    """A series' summary, updated in memory while a batch is applied, then written once."""

    id: int
    count: int
    invalid_count: int
    min_value: float | None
    max_value: float | None
    last_value: float | None
    first_step: int
    last_step: int
    recompute: bool = False
    fresh: bool = field(default=False)

    def fold(self, step: int, value: float) -> None:
        self.min_value = value if self.min_value is None else min(self.min_value, value)
        self.max_value = value if self.max_value is None else max(self.max_value, value)
        self.cover(step)
        if step >= self.last_step:
            self.last_step = step
            self.last_value = value

    def cover(self, step: int) -> None:
        """Widen the reported step range to include ``step``."""
        if self.fresh:
            self.first_step = self.last_step = step
            self.fresh = False
        self.first_step = min(self.first_step, step)

    def lose(self, value: float) -> None:
        """A stored value is replaced or removed: extrema it held must be recomputed."""
        if value in (self.min_value, self.max_value):
            self.recompute = True


def _load_series(connection: Connection, run_id: int, names: set[str]) -> dict[str, _Series]:
    """The batch's series, created when new (within the run's series limit), locked on
    PostgreSQL so concurrent writers of one run apply their corrections one after another."""
    columns = (
        metrics.c.name,
        metrics.c.id,
        metrics.c.count,
        metrics.c.invalid_count,
        metrics.c.min_value,
        metrics.c.max_value,
        metrics.c.last_value,
        metrics.c.first_step,
        metrics.c.last_step,
    )
    query = select(*columns).where(
        metrics.c.run_id == run_id, metrics.c.name.in_(bindparam("names", expanding=True))
    )
    if connection.dialect.name == "postgresql":
        query = query.with_for_update()
    names_list = sorted(names)
    found = {row.name: row for row in connection.execute(query, {"names": names_list})}
    missing = [name for name in names_list if name not in found]
    if missing:
        existing = connection.execute(
            select(func.count()).select_from(metrics).where(metrics.c.run_id == run_id)
        ).scalar_one()
        if existing + len(missing) > RUN_MAX_SERIES:
            raise InvalidInput(
                (
                    Violation(
                        "series",
                        f"the run has {existing} series and this batch adds {len(missing)}; "
                        f"a run admits at most {RUN_MAX_SERIES}",
                    ),
                )
            )
        connection.execute(
            upsert(connection, metrics).on_conflict_do_nothing(
                index_elements=[metrics.c.run_id, metrics.c.name]
            ),
            [
                {"run_id": run_id, "name": name, "count": 0, "first_step": 0, "last_step": 0}
                for name in missing
            ],
        )
        found = {row.name: row for row in connection.execute(query, {"names": names_list})}
    series = {}
    for name, row in found.items():
        state = _Series(*row[1:])
        state.fresh = state.count == 0 and state.invalid_count == 0
        series[name] = state
    return series


def _existing(
    connection: Connection, table: Any, metric_id: int, steps: list[int], value_column: str
) -> dict[int, Any]:
    """Stored (step -> value or kind) among ``steps`` of one series."""
    query = select(table.c.step, table.c[value_column]).where(
        table.c.metric_id == metric_id,
        table.c.step >= min(steps),
        table.c.step <= max(steps),
    )
    if table is points:
        query = query.where(points.c.event_id == SDK_EVENT)
    wanted = set(steps)
    return {step: value for step, value in connection.execute(query) if step in wanted}


def write_scalars(connection: Connection, run_id: int, batch: ScalarBatch) -> ScalarOutcome:
    now = time.time()
    sql = Dialect(connection)
    series = _load_series(connection, run_id, batch.names)
    inserts: list[tuple[int, int, int, float, float]] = []
    corrections: list[tuple[float, float, int, int]] = []
    point_deletes: list[tuple[int, int]] = []
    invalid_upserts: list[tuple[int, int, str]] = []
    invalid_deletes: list[tuple[int, int]] = []
    new = corrected = invalid_new = 0

    for entry in batch.series:
        state = series[entry.name]
        fresh_steps = state.fresh or min(entry.steps) > state.last_step
        stored = (
            {} if fresh_steps else _existing(connection, points, state.id, entry.steps, "value")
        )
        marked = (
            {}
            if state.invalid_count == 0
            else _existing(connection, invalid_points, state.id, entry.steps, "kind")
        )
        for step, value in zip(entry.steps, entry.values, strict=True):
            if step in stored:
                state.lose(stored[step])
                corrections.append((value, now, state.id, step))
                corrected += 1
            else:
                inserts.append((state.id, step, SDK_EVENT, value, now))
                state.count += 1
                new += 1
            if step in marked:
                invalid_deletes.append((state.id, step))
                state.invalid_count -= 1
            state.fold(step, value)
        if state.invalid_count:
            # Invalid steps count in last_step but hold no value: find the last value again.
            state.recompute = True

    for reported in batch.invalid:
        state = series[reported.name]
        stored = _existing(connection, points, state.id, reported.steps, "value")
        marked = _existing(connection, invalid_points, state.id, reported.steps, "kind")
        for step, kind in zip(reported.steps, reported.kinds, strict=True):
            if step in stored:
                # The value at this step turned out to be NaN/inf: it is no longer a number.
                state.lose(stored[step])
                point_deletes.append((state.id, step))
                state.count -= 1
                state.recompute = True
            if step not in marked:
                state.invalid_count += 1
                invalid_new += 1
            invalid_upserts.append((state.id, step, kind))
            state.cover(step)
            state.last_step = max(state.last_step, step)

    cursor = sql.cursor
    if inserts:
        cursor.executemany(
            sql.sql(
                "INSERT INTO points (metric_id, step, event_id, value, time) VALUES (?, ?, ?, ?, ?)"
            ),
            inserts,
        )
    if corrections:
        cursor.executemany(
            sql.sql(
                f"UPDATE points SET value = ?, time = ? WHERE metric_id = ? AND step = ? "
                f"AND event_id = {SDK_EVENT}"
            ),
            corrections,
        )
    if point_deletes:
        cursor.executemany(
            sql.sql(
                f"DELETE FROM points WHERE metric_id = ? AND step = ? AND event_id = {SDK_EVENT}"
            ),
            point_deletes,
        )
    if invalid_deletes:
        cursor.executemany(
            sql.sql("DELETE FROM invalid_points WHERE metric_id = ? AND step = ?"), invalid_deletes
        )
    if invalid_upserts:
        cursor.executemany(
            sql.sql(
                "INSERT INTO invalid_points (metric_id, step, kind) VALUES (?, ?, ?) "
                "ON CONFLICT (metric_id, step) DO UPDATE SET kind = excluded.kind"
            ),
            invalid_upserts,
        )
    for state in series.values():
        if state.recompute:
            _recompute(sql, state)
    cursor.executemany(
        sql.sql(
            "UPDATE metrics SET count = ?, invalid_count = ?, min_value = ?, max_value = ?, "
            "last_value = ?, first_step = ?, last_step = ? WHERE id = ?"
        ),
        [
            (
                s.count,
                s.invalid_count,
                s.min_value,
                s.max_value,
                s.last_value,
                s.first_step,
                s.last_step,
                s.id,
            )
            for s in series.values()
        ],
    )
    steps = [step for entry in batch.series for step in entry.steps]
    removed = len(point_deletes)
    last_step = f", last_step = {sql.greatest}(coalesce(last_step, -1), ?)" if steps else ""
    cursor.execute(
        sql.sql(
            f"UPDATE runs SET updated_at = ?, point_count = point_count + ?{last_step} WHERE id = ?"
        ),
        [now, new - removed, *([max(steps)] if steps else []), run_id],
    )
    return ScalarOutcome(new=new, corrected=corrected, invalid=invalid_new)


def _recompute(sql: Dialect, state: _Series) -> None:
    """Extrema and last value from the stored points, after a replaced extreme."""
    sql.cursor.execute(
        sql.sql("SELECT min(value), max(value) FROM points WHERE metric_id = ?"), [state.id]
    )
    state.min_value, state.max_value = sql.cursor.fetchone()
    sql.cursor.execute(
        sql.sql(
            "SELECT step, value FROM points WHERE metric_id = ? "
            "ORDER BY step DESC, event_id DESC LIMIT 1"
        ),
        [state.id],
    )
    row = sql.cursor.fetchone()
    state.last_value = None if row is None else row[1]
    state.recompute = False
