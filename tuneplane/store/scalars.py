"""SDK scalars: points keyed by (series, step), where reporting a step again corrects it.

SDK points share the point store with Arena events under event id 0, so the same reads,
downsampling and CSV export serve both. A correction replaces the value; when the replaced
value was an extreme of its series, the summary's min/max are recomputed from the block rollups.
NaN and infinities are kept in ``invalid_points``: counted and shown, never numbers.
"""

from __future__ import annotations

import operator
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, select

from tuneplane.contract.errors import InvalidInput, Violation
from tuneplane.contract.limits import RUN_MAX_SERIES
from tuneplane.contract.protocol import ScalarBatch
from tuneplane.store.blocks import Points
from tuneplane.store.points import SeriesChange, SeriesEffect, apply_changes, series_extremes
from tuneplane.store.schema import invalid_points
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

    def fold(self, steps: Sequence[int], values: Sequence[float]) -> None:
        """Take in values at ``steps`` (in step order)."""
        low, high = min(values), max(values)
        self.min_value = low if self.min_value is None else min(self.min_value, low)
        self.max_value = high if self.max_value is None else max(self.max_value, high)
        self.cover(steps[0])
        if steps[-1] >= self.last_step:
            self.last_step = steps[-1]
            self.last_value = values[-1]

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


def _load_series(sql: Dialect, run_id: int, names: set[str]) -> dict[str, _Series]:
    """The batch's series, created when new (within the run's series limit), locked on
    PostgreSQL so concurrent writers of one run apply their corrections one after another."""
    names_list = sorted(names)
    # Fixed SQL on the driver's cursor: built with SQLAlchemy, this lookup cost more than
    # the rest of a batch's statements.
    query = sql.sql(
        "SELECT name, id, count, invalid_count, min_value, max_value, last_value, "
        "first_step, last_step FROM metrics WHERE run_id = ? AND name IN "
        f"({', '.join('?' * len(names_list))}) ORDER BY name"
        + ("" if sql.is_sqlite else " FOR UPDATE")
    )

    def lookup() -> dict[str, tuple[Any, ...]]:
        sql.cursor.execute(query, [run_id, *names_list])
        return {row[0]: row for row in sql.cursor.fetchall()}

    found = lookup()
    missing = [name for name in names_list if name not in found]
    if missing:
        sql.cursor.execute(sql.sql("SELECT count(*) FROM metrics WHERE run_id = ?"), [run_id])
        (existing,) = sql.cursor.fetchone()
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
        sql.cursor.executemany(
            sql.sql(
                "INSERT INTO metrics (run_id, name, count, first_step, last_step) "
                "VALUES (?, ?, 0, 0, 0) ON CONFLICT (run_id, name) DO NOTHING"
            ),
            [(run_id, name) for name in missing],
        )
        found = lookup()
    series = {}
    for name, row in found.items():
        state = _Series(*row[1:])
        state.fresh = state.count == 0 and state.invalid_count == 0
        series[name] = state
    return series


def _marked(connection: Connection, metric_id: int, steps: Sequence[int]) -> set[int]:
    """Which of ``steps`` the series has marked invalid."""
    query = select(invalid_points.c.step).where(
        invalid_points.c.metric_id == metric_id,
        invalid_points.c.step >= min(steps),
        invalid_points.c.step <= max(steps),
    )
    wanted = set(steps)
    return {step for (step,) in connection.execute(query) if step in wanted}


def _invalid_steps(batch: ScalarBatch) -> dict[str, dict[int, str]]:
    """Per series, the steps reported invalid and their kinds."""
    invalids: dict[str, dict[int, str]] = {}
    for reported in batch.invalid:
        invalids.setdefault(reported.name, {}).update(
            zip(reported.steps, reported.kinds, strict=True)
        )
    return invalids


def _puts(
    batch: ScalarBatch, invalids: dict[str, dict[int, str]]
) -> dict[str, tuple[Sequence[int], Sequence[float]]]:
    """Per series, the values to put in step order; a step reported both ways in one batch
    is invalid (the invalid list is applied last)."""
    # A series sent once, in step order and with no invalid steps (the usual batch), is put
    # as it came; the others are merged step by step.
    entries = Counter(entry.name for entry in batch.series)
    puts: dict[str, tuple[Sequence[int], Sequence[float]]] = {}
    merged: dict[str, dict[int, float]] = {}
    for entry in batch.series:
        steps = entry.steps
        if (
            entries[entry.name] == 1
            and entry.name not in invalids
            and all(map(operator.lt, steps, steps[1:]))
        ):
            puts[entry.name] = (steps, entry.values)
        else:
            merged.setdefault(entry.name, {}).update(zip(steps, entry.values, strict=True))
    for name, by_step in merged.items():
        for step in invalids.get(name, ()):
            by_step.pop(step, None)
        ordered = sorted(by_step)
        puts[name] = (ordered, [by_step[step] for step in ordered])
    return puts


@dataclass(slots=True)
class _Tally:
    """What a batch did, and the invalid marks to write."""

    new: int = 0
    corrected: int = 0
    removed: int = 0
    invalid_new: int = 0
    invalid_upserts: list[tuple[int, int, str]] = field(default_factory=list)
    invalid_deletes: list[tuple[int, int]] = field(default_factory=list)


def _fold_effects(
    connection: Connection,
    series: dict[str, _Series],
    effects: dict[int, SeriesEffect],
    changes: dict[int, SeriesChange],
    invalids: dict[str, dict[int, str]],
) -> _Tally:
    """Fold each series' effect into its summary state; count and collect invalid marks."""
    tally = _Tally()
    for name, state in series.items():
        effect, put = effects[state.id], changes[state.id].put
        tally.new += effect.added
        tally.corrected += len(effect.replaced)
        tally.removed += len(effect.removed)
        state.count += effect.added - len(effect.removed)
        for old in effect.replaced:
            state.lose(old)
        if effect.removed:
            # A value at this step turned out to be NaN/inf: it is no longer a number.
            state.recompute = True
        if put.steps:
            if state.invalid_count:
                for step in _marked(connection, state.id, put.steps):
                    tally.invalid_deletes.append((state.id, step))
                    state.invalid_count -= 1
            state.fold(put.steps, put.values)
        bad = invalids.get(name)
        if bad:
            marked = _marked(connection, state.id, list(bad))
            for step, kind in bad.items():
                if step not in marked:
                    state.invalid_count += 1
                    tally.invalid_new += 1
                tally.invalid_upserts.append((state.id, step, kind))
            state.cover(min(bad))
            state.last_step = max(state.last_step, max(bad))
        if state.invalid_count:
            # Invalid steps count in last_step but hold no value: find the last value again.
            state.recompute = True
    return tally


def _store_summaries(
    sql: Dialect, series: dict[str, _Series], effects: dict[int, SeriesEffect], tally: _Tally
) -> None:
    cursor = sql.cursor
    if tally.invalid_deletes:
        cursor.executemany(
            sql.sql("DELETE FROM invalid_points WHERE metric_id = ? AND step = ?"),
            tally.invalid_deletes,
        )
    if tally.invalid_upserts:
        cursor.executemany(
            sql.sql(
                "INSERT INTO invalid_points (metric_id, step, kind) VALUES (?, ?, ?) "
                "ON CONFLICT (metric_id, step) DO UPDATE SET kind = excluded.kind"
            ),
            tally.invalid_upserts,
        )
    for state in series.values():
        if state.recompute:
            state.min_value, state.max_value, state.last_value = series_extremes(sql, state.id)
            state.recompute = False
    cursor.executemany(
        sql.sql(
            "UPDATE metrics SET count = ?, invalid_count = ?, min_value = ?, max_value = ?, "
            "last_value = ?, first_step = ?, last_step = ?, corrected = corrected + ? "
            "WHERE id = ?"
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
                len(effects[s.id].replaced) + len(effects[s.id].removed),
                s.id,
            )
            for s in series.values()
        ],
    )


def write_scalars(connection: Connection, run_id: int, batch: ScalarBatch) -> ScalarOutcome:
    now = time.time()
    sql = Dialect(connection)
    series = _load_series(sql, run_id, batch.names)
    invalids = _invalid_steps(batch)
    puts = _puts(batch, invalids)
    reported_at = batch.reported_at
    changes = {}
    for name, state in series.items():
        put_steps, put_values = puts.get(name, ((), ()))
        count = len(put_steps)
        # A point's time is when the client reported it, when it says so (a batch sent
        # late keeps its time), else when it arrived.
        times = [reported_at.get(step, now) for step in put_steps] if reported_at else [now] * count
        changes[state.id] = SeriesChange(
            Points(list(put_steps), [SDK_EVENT] * count, list(put_values), times),
            [(step, SDK_EVENT) for step in sorted(invalids.get(name, ()))],
        )
    effects = apply_changes(sql, changes)
    tally = _fold_effects(connection, series, effects, changes, invalids)
    _store_summaries(sql, series, effects, tally)
    top = max((change.put.steps[-1] for change in changes.values() if change.put.steps), default=-1)
    last_step = f", last_step = {sql.greatest}(coalesce(last_step, -1), ?)" if top >= 0 else ""
    sql.cursor.execute(
        sql.sql(
            f"UPDATE runs SET updated_at = ?, point_count = point_count + ?{last_step} WHERE id = ?"
        ),
        [now, tally.new - tally.removed, *([top] if top >= 0 else []), run_id],
    )
    return ScalarOutcome(new=tally.new, corrected=tally.corrected, invalid=tally.invalid_new)
