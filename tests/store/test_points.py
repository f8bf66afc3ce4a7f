"""The block point store against a plain model: a dict from (step, event) to value.

Random sequences of appends, corrections, late points, points at one step from distinct
events and removals are applied to a real database; after each one the raw pages, charts
at several resolutions, series extremes and the block layout must agree with the model.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Connection

from tuneplane.store.blocks import BLOCK_POINTS, Points, unpack
from tuneplane.store.database import Database
from tuneplane.store.points import (
    SeriesChange,
    apply_changes,
    read_chart,
    read_page,
    series_extremes,
    values_at,
)
from tuneplane.store.sql import Dialect

Model = dict[tuple[int, int], float]
METRIC = 7


def _clear(database: Database) -> None:
    def clear(connection: Connection) -> None:
        connection.exec_driver_sql("DELETE FROM point_blocks")
        connection.exec_driver_sql("DELETE FROM point_block_data")

    database.run_write(clear)


@pytest.fixture(autouse=True)
def _no_blocks_left_behind(database: Database) -> Iterator[None]:
    """These tests write blocks of a made-up series id. Left in the shared PostgreSQL
    database, they would become the points of whichever later test's series gets that id."""
    yield
    _clear(database)


def _apply(database: Database, model: Model, change: SeriesChange) -> None:
    def write(connection: Connection) -> None:
        effect = apply_changes(Dialect(connection), {METRIC: change})[METRIC]
        expected_removed = [model[key] for key in change.remove if key in model]
        assert sorted(effect.removed) == sorted(expected_removed)
        keys = list(zip(change.put.steps, change.put.events, strict=True))
        assert effect.added == sum(1 for key in keys if key not in model)
        assert sorted(effect.replaced) == sorted(model[key] for key in keys if key in model)

    database.run_write(write)
    for key in change.remove:
        model.pop(key, None)
    for step, event, value in zip(
        change.put.steps, change.put.events, change.put.values, strict=True
    ):
        model[(step, event)] = value


def _change(put: dict[tuple[int, int], float], remove: set[tuple[int, int]]) -> SeriesChange:
    keys = sorted(put)
    return SeriesChange(
        Points(
            [s for s, _ in keys],
            [e for _, e in keys],
            [put[k] for k in keys],
            [float(s) for s, _ in keys],
        ),
        sorted(remove),
    )


def _check(database: Database, model: Model) -> None:
    keys = sorted(model)
    with database.connect() as connection:
        page = read_page(connection, METRIC, after=None, start=None, end=None, limit=10**6)
        expected = [(step, event, model[step, event]) for step, event in keys]
        assert [(p.step, p.event_id, p.value) for p in page] == expected
        if keys:
            # Pages resume after a keyset cursor without gaps or repeats.
            middle = keys[len(keys) // 2]
            rest = read_page(connection, METRIC, after=middle, start=None, end=None, limit=5)
            assert [(p.step, p.event_id) for p in rest] == [k for k in keys if k > middle][:5]
        _check_blocks(connection)
        low, high, last = series_extremes(Dialect(connection), METRIC)
        values = [model[k] for k in keys]
        assert (low, high, last) == (
            (min(values), max(values), values[-1]) if values else (None, None, None)
        )
        if not keys:
            return
        lo, hi = keys[0][0], keys[-1][0]
        _check_values_at(connection, model, lo, hi)
        for max_points in (1, 3, 50, 10_000):
            for start, end in ((lo, hi), (lo + (hi - lo) // 3, hi - (hi - lo) // 4)):
                _check_chart(connection, model, start, end, max_points)


def _check_values_at(connection: Connection, model: Model, lo: int, hi: int) -> None:
    """Each probed step pairs with the series' last point at or before it (None before)."""
    keys = sorted(model)
    every = {step for step, _ in keys[:: max(1, len(keys) // 9)]}
    probes = sorted({lo - 1, lo, (lo + hi) // 2, hi, hi + 1, *every, *(s + 1 for s in every)})
    probes = [step for step in probes if step >= 0]
    expected = []
    for step in probes:
        before = [key for key in keys if key[0] <= step]
        expected.append(model[before[-1]] if before else None)
    assert values_at(connection, METRIC, probes) == expected


def _check_chart(connection: Connection, model: Model, lo: int, hi: int, max_points: int) -> None:
    chart = read_chart(connection, METRIC, lo=lo, hi=hi, max_points=max_points)
    inside = [(k, model[k]) for k in sorted(model) if lo <= k[0] <= hi]
    assert chart.total == len(inside)
    assert chart.downsampled == (len(inside) > max_points)
    if not chart.downsampled:
        assert [(b.step_min, b.min, b.count) for b in chart.buckets] == [
            (k[0], v, 1) for k, v in inside
        ]
        return
    # Buckets partition the points of the range in order; each describes its own points
    # exactly; none starts past its nominal range.
    width = -(-(hi - lo + 1) // max_points)
    assert len(chart.buckets) <= max_points
    remaining = list(inside)
    previous_end = lo - 1
    for bucket in chart.buckets:
        members, remaining = remaining[: bucket.count], remaining[bucket.count :]
        values = [v for _, v in members]
        assert bucket.step_min > previous_end
        assert (bucket.step_min, bucket.step_max) == (members[0][0][0], members[-1][0][0])
        assert (bucket.min, bucket.max, bucket.last) == (min(values), max(values), values[-1])
        assert math.isclose(bucket.mean, sum(values) / len(values), rel_tol=1e-9, abs_tol=1e-9)
        previous_end = bucket.step_max
    assert remaining == []
    starts = [(bucket.step_min - lo) // width for bucket in chart.buckets]
    assert starts == sorted(set(starts))


def _check_blocks(connection: Connection) -> None:
    """Blocks cover disjoint step ranges in order, never split a step, and their rollups
    describe their contents."""
    rows = connection.exec_driver_sql(
        "SELECT b.first_step, last_step, count, min_value, max_value, sum_value, last_value, "
        "steps, events, vals FROM point_blocks b JOIN point_block_data d "
        "ON d.metric_id = b.metric_id AND d.first_step = b.first_step "
        f"WHERE b.metric_id = {METRIC} ORDER BY b.first_step"
    ).all()
    # Every block has its rollup row and its data row, and nothing else is left over.
    for table in ("point_blocks", "point_block_data"):
        stored = connection.exec_driver_sql(
            f"SELECT count(*) FROM {table} WHERE metric_id = {METRIC}"
        ).scalar_one()
        assert stored == len(rows), table
    previous_last = None
    for first, last, count, low, high, total, last_value, steps, events, vals in rows:
        block_steps = unpack("q", steps).tolist()
        values = unpack("d", vals).tolist()
        keys = list(zip(block_steps, unpack("q", events).tolist(), strict=True))
        assert keys == sorted(set(keys))
        assert (first, last, count) == (block_steps[0], block_steps[-1], len(values))
        # Past BLOCK_POINTS a block only finishes the step it was in.
        assert len(set(block_steps[BLOCK_POINTS - 1 :])) <= 1
        assert (low, high, last_value) == (min(values), max(values), values[-1])
        assert math.isclose(total, sum(values), rel_tol=1e-9, abs_tol=1e-9)
        assert previous_last is None or first > previous_last
        previous_last = last


values = st.floats(-1e6, 1e6, allow_nan=False).map(lambda v: round(v, 3))
operation = st.one_of(
    # An append-like run of SDK steps (event 0), possibly overlapping stored ones.
    st.tuples(st.just("steps"), st.integers(0, 3000), st.integers(1, 700), values),
    # Distinct Arena events at a few steps.
    st.tuples(st.just("events"), st.integers(0, 3000), st.integers(1, 40), values),
    # Removal of steps (SDK points turned NaN).
    st.tuples(st.just("remove"), st.integers(0, 3000), st.integers(1, 300), values),
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=st.lists(operation, min_size=1, max_size=6))
def test_blocks_agree_with_a_plain_model(
    database: Database, operations: list[tuple[str, int, int, float]]
) -> None:
    _clear(database)
    model: Model = {}
    next_event = 1
    for kind, start, size, value in operations:
        if kind == "steps":
            put = {(step, 0): value + step for step in range(start, start + size)}
            _apply(database, model, _change(put, set()))
        elif kind == "events":
            put = {}
            for offset in range(size):
                put[(start + offset // 4, next_event)] = value - offset
                next_event += 1
            _apply(database, model, _change(put, set()))
        else:
            remove = {(step, 0) for step in range(start, start + size, 2)}
            _apply(database, model, _change({}, remove))
        _check(database, model)


def test_a_long_series_is_cut_into_full_blocks_and_read_back_whole(database: Database) -> None:
    model: Model = {}
    for start in range(0, 5000, 256):  # SDK-sized appends
        put = {(step, 0): math.sin(step) for step in range(start, min(start + 256, 5000))}
        _apply(database, model, _change(put, set()))
    with database.connect() as connection:
        counts = [
            row[0]
            for row in connection.exec_driver_sql(
                f"SELECT count FROM point_blocks WHERE metric_id = {METRIC} ORDER BY first_step"
            )
        ]
    assert counts == [BLOCK_POINTS] * (5000 // BLOCK_POINTS) + [5000 % BLOCK_POINTS]
    _check(database, model)


def test_a_step_with_more_points_than_a_block_stays_in_one_block(database: Database) -> None:
    model: Model = {}
    put = {(5, event): float(event) for event in range(1, BLOCK_POINTS + 40)}
    put.update({(4, 0): -1.0, (6, 0): 99.0})
    _apply(database, model, _change(put, set()))
    _check(database, model)


def test_batches_arriving_out_of_order_still_fill_their_blocks(database: Database) -> None:
    """Batches of 128 steps arriving shuffled within windows of 16 (workers with requests in
    flight): late points fill the blocks around them rather than start small blocks."""
    shuffle = random.Random(7).shuffle
    starts = list(range(0, 50_000, 128))
    order: list[int] = []
    for window in range(0, len(starts), 16):
        part = starts[window : window + 16]
        shuffle(part)
        order += part
    model: Model = {}
    for start in order:
        steps = range(start, min(start + 128, 50_000))
        _apply(database, model, _change({(step, 0): float(step) for step in steps}, set()))
    with database.connect() as connection:
        blocks = connection.exec_driver_sql(
            f"SELECT count(*) FROM point_blocks WHERE metric_id = {METRIC}"
        ).scalar_one()
    fewest = -(-50_000 // BLOCK_POINTS)
    assert blocks <= 1.5 * fewest
    _check(database, model)
