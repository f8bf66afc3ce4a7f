"""From queued reports to protocol bodies: validation, invalid entries, batch limits."""

import math
from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tuneplane.client.batches import (
    BAD_NAME,
    BAD_STEP,
    NOT_A_NUMBER,
    TOO_MANY_SERIES,
    Batch,
    BatchBuilder,
)
from tuneplane.contract.limits import SCALAR_BATCH_MAX_POINTS, STEP_MAX
from tuneplane.contract.protocol import parse_scalars


def build(reports: list[tuple[object, dict[object, object]]], **options: int) -> list[Batch]:
    builder = BatchBuilder(**options)
    batches = [batch for step, metrics in reports for batch in builder.add(step, metrics)]
    last = builder.finish()
    return [*batches, *([last] if last else [])]


def test_columnar_series_per_metric() -> None:
    [batch] = build([(0, {"loss": 0.5, "acc": 1}), (1, {"loss": 0.4})])
    assert batch.body == {
        "series": [
            {"name": "loss", "steps": [0, 1], "values": [0.5, 0.4]},
            {"name": "acc", "steps": [0], "values": [1.0]},
        ]
    }
    assert (batch.points, batch.invalid, batch.merged) == (3, 0, 0)
    assert parse_scalars(batch.body).names == {"loss", "acc"}


def test_each_step_carries_the_time_of_its_last_call() -> None:
    builder = BatchBuilder(max_points=5)
    calls = [(0, {"a": 1.0, "b": 2.0}, 100.0), (1, {"a": 3.0}, 101.0), (0, {"b": 4.0}, 102.0)]
    batches = [batch for call in calls for batch in builder.add(*call)]
    batches += [builder.finish()]  # type: ignore[list-item]
    [batch] = batches
    assert batch.body["reported_at"] == {"steps": [0, 1], "times": [102.0, 101.0]}
    assert parse_scalars(batch.body, now=200.0).reported_at == {0: 102.0, 1: 101.0}
    # A call split across two batches times its points in both.
    builder = BatchBuilder(max_points=2)
    [first] = builder.add(7, {"x": 1.0, "y": 2.0, "z": 3.0}, 50.0)
    last = builder.finish()
    assert last is not None
    assert first.body["reported_at"] == last.body["reported_at"] == {"steps": [7], "times": [50.0]}
    assert "reported_at" not in build([(0, {"a": 1.0})])[0].body  # no time said, none sent


def test_nan_and_infinities_become_invalid_entries_never_numbers() -> None:
    [batch] = build(
        [(0, {"r": math.nan}), (1, {"r": math.inf}), (2, {"r": -math.inf}), (3, {"r": 0.0})]
    )
    assert batch.body["series"] == [{"name": "r", "steps": [3], "values": [0.0]}]
    assert batch.body["invalid"] == [
        {"name": "r", "steps": [0, 1, 2], "kinds": ["nan", "inf", "-inf"]}
    ]
    assert (batch.points, batch.invalid) == (4, 3)
    parse_scalars(batch.body)  # the server's own parser accepts it


def test_batches_never_exceed_the_point_limit() -> None:
    reports: list[tuple[object, dict[object, object]]] = [
        (step, {f"m{i}": float(i) for i in range(7)}) for step in range(1000)
    ]
    batches = build(reports)
    assert [b.points for b in batches] == [SCALAR_BATCH_MAX_POINTS] * 3 + [7000 - 3 * 2048]
    for batch in batches:
        parse_scalars(batch.body)
    steps = Counter(
        (s["name"], step) for b in batches for s in b.body["series"] for step in s["steps"]
    )
    assert len(steps) == 7000
    assert set(steps.values()) == {1}


def test_a_step_reported_twice_is_sent_once_with_the_last_value() -> None:
    [batch] = build([(5, {"loss": math.nan}), (5, {"loss": 0.3}), (6, {"loss": 1.0})])
    assert batch.body == {"series": [{"name": "loss", "steps": [5, 6], "values": [0.3, 1.0]}]}
    assert (batch.points, batch.invalid, batch.merged, batch.settles) == (2, 0, 1, 3)
    [batch] = build([(5, {"loss": 0.3}), (5, {"loss": math.inf})])
    assert batch.body == {
        "invalid": [{"name": "loss", "steps": [5], "kinds": ["inf"]}],
        "series": [],
    }
    assert (batch.points, batch.invalid, batch.merged) == (1, 1, 1)


def test_bad_input_is_counted_by_reason_and_good_points_still_go() -> None:
    builder = BatchBuilder()
    list(builder.add(-1, {"a": 1.0, "b": 2.0}))
    list(builder.add(STEP_MAX + 1, {"a": 1.0}))
    list(builder.add(1.5, {"a": 1.0}))
    list(builder.add(True, {"a": 1.0}))
    list(builder.add(3, {"": 1.0, "x" * 129: 1.0, "tab\there": 1.0, 7: 1.0, "ok": 1.0}))
    list(builder.add(4, {"ok": "abc", "also": None, "huge": 10**400}))
    list(builder.add(5, {"ok": 2.0}))
    batch = builder.finish()
    assert batch is not None
    assert batch.body == {"series": [{"name": "ok", "steps": [3, 5], "values": [1.0, 2.0]}]}
    assert builder.take_dropped() == {BAD_STEP: 5, BAD_NAME: 4, NOT_A_NUMBER: 3}
    assert builder.take_dropped() == {}
    assert "129" in builder.examples[BAD_NAME] or "printable" in builder.examples[BAD_NAME]
    assert "-1" in builder.examples[BAD_STEP]


def test_numbers_of_other_types_are_accepted() -> None:
    class Scalar:
        def __float__(self) -> float:
            return 0.25

    [batch] = build([(0, {"i": 3, "b": True, "s": Scalar(), "f": 1.5})])
    assert [s["values"] for s in batch.body["series"]] == [[3.0], [1.0], [0.25], [1.5]]


def test_step_zero_and_the_largest_step() -> None:
    [batch] = build([(0, {"a": 1.0}), (STEP_MAX, {"a": 2.0})])
    assert batch.body["series"][0]["steps"] == [0, STEP_MAX]
    parse_scalars(batch.body)


def test_series_beyond_the_run_limit_are_dropped_not_the_whole_batch() -> None:
    builder = BatchBuilder(max_series=3)
    list(builder.add(0, {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0}))
    list(builder.add(1, {"a": 2.0, "e": 1.0}))
    batch = builder.finish()
    assert batch is not None
    assert [s["name"] for s in batch.body["series"]] == ["a", "b", "c"]
    assert builder.take_dropped() == {TOO_MANY_SERIES: 2}


@given(
    st.lists(
        st.tuples(
            st.integers(0, 50),
            st.dictionaries(
                st.sampled_from(["a", "b", "c/d", "e"]),
                st.floats(allow_nan=True, allow_infinity=True),
                max_size=4,
            ),
        ),
        max_size=200,
    ),
    st.integers(1, 64),
)
def test_every_point_is_accounted_for(
    reports: list[tuple[int, dict[str, float]]], max_points: int
) -> None:
    """Sent once per (metric, step) per batch, merged, or dropped: nothing vanishes."""
    builder = BatchBuilder(max_points=max_points)
    batches = [b for step, metrics in reports for b in builder.add(step, metrics)]
    last = builder.finish()
    batches += [last] if last else []
    total = sum(len(metrics) for _, metrics in reports)
    assert sum(b.settles for b in batches) == total
    last_value: dict[tuple[str, int], float] = {}
    for step, metrics in reports:
        for name, value in metrics.items():
            last_value[(name, step)] = value
    for batch in batches:
        assert 1 <= batch.points <= max_points
        parse_scalars(batch.body)
        for entry in batch.body["series"]:
            assert all(math.isfinite(value) for value in entry["values"])
    sent = {
        (e["name"], step)
        for b in batches
        for key in ("series", "invalid")
        for e in b.body.get(key, [])
        for step in e["steps"]
    }
    assert sent == set(last_value)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=6),
            st.dictionaries(
                st.sampled_from(["a", "b", "c", ""]),
                st.one_of(
                    st.floats(allow_nan=True, allow_infinity=True),
                    st.integers(min_value=-5, max_value=5),
                ),
                max_size=4,
            ),
        ),
        max_size=40,
    ),
    st.integers(min_value=1, max_value=9),
)
def test_batches_deliver_the_last_report_of_every_metric_and_step(
    reports: list[tuple[int, dict[str, float]]], max_points: int
) -> None:
    """Whatever mix of new, repeated and earlier steps: applied in order, the batches leave
    each (metric, step) at its last reported value, and every point is accounted for."""
    builder = BatchBuilder(max_points=max_points)
    batches = [batch for step, metrics in reports for batch in builder.add(step, metrics)]
    if (last := builder.finish()) is not None:
        batches.append(last)
    model: dict[tuple[str, int], object] = {}
    for step, metrics in reports:
        for name, value in metrics.items():
            if name:
                number = float(value)
                model[name, step] = number if math.isfinite(number) else str(number)
    delivered: dict[tuple[str, int], object] = {}
    for batch in batches:
        parse_scalars(batch.body)  # the server's own parser accepts it
        assert batch.points <= max_points
        body: dict[str, Any] = batch.body
        entries = [*body["series"], *body.get("invalid", [])]
        assert sum(len(entry["steps"]) for entry in entries) == batch.points
        for entry in entries:
            reported = entry.get("values", entry.get("kinds"))
            for step, value in zip(entry["steps"], reported, strict=True):
                delivered[entry["name"], step] = value
    assert delivered == model
    sent = sum(batch.settles for batch in batches)
    dropped = sum(builder.take_dropped().values())
    assert sent + dropped == sum(len(metrics) for _, metrics in reports)


def test_a_step_split_across_batches_still_merges_its_repeats() -> None:
    """A call cut by a full batch leaves its step in the next batch: a repeat of that step
    merges there instead of being sent twice."""
    batches = build([(0, {"a": 1.0, "b": 2.0, "c": 3.0}), (0, {"c": 5.0})], max_points=2)
    assert [batch.body["series"] for batch in batches] == [
        [
            {"name": "a", "steps": [0], "values": [1.0]},
            {"name": "b", "steps": [0], "values": [2.0]},
        ],
        [{"name": "c", "steps": [0], "values": [5.0]}],
    ]
    assert [(batch.points, batch.merged) for batch in batches] == [(2, 0), (1, 1)]
