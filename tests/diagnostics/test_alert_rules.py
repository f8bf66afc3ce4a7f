"""The alert rules' pure judgement (diagnostics/alert_rules.py) and their wire format
(contract/alert_rules.py)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuneplane.contract.alert_rules import (
    DEFAULT_RULES,
    Baseline,
    Rule,
    RuleSpec,
    merge_rule,
    parse_rule,
)
from tuneplane.contract.errors import InvalidInput, MalformedRequest
from tuneplane.diagnostics.alert_rules import (
    Extent,
    SeriesRules,
    Watch,
    judge_eval_drop,
    judge_heartbeat,
    judge_points,
    judge_series,
    judge_stall,
    matches,
)


def rule(**body: Any) -> Rule:
    return Rule(7, parse_rule(body))


def opened(found: list[Any]) -> list[tuple[bool, int | None]]:
    return [(t.opens, t.step) for t in found]


def test_nan_opens_once_and_resolves_on_a_finite_point() -> None:
    nan = rule(kind="nan", metric="*loss*")
    watch = Watch()
    found = judge_points(nan, "train/loss", watch, [(1, 0.5), (2, None), (3, None), (4, 0.4)])
    assert opened(found) == [(True, 2), (False, 4)]
    assert found[0].title == "train/loss is NaN or infinite at step 2"
    assert found[1].title == "resolved: nan *loss* (train/loss at step 4)"
    assert watch.open is False


def test_threshold_skips_invalid_points_and_keeps_one_episode() -> None:
    low = rule(kind="threshold", metric="reward", op="below", value=0.0)
    watch = Watch()
    assert opened(judge_points(low, "reward", watch, [(1, -1.0), (2, None), (3, -2.0)])) == [
        (True, 1)
    ]
    # A later batch: still below, nothing; then above, resolved.
    assert judge_points(low, "reward", watch, [(4, -3.0)]) == []
    assert opened(judge_points(low, "reward", watch, [(5, 0.5)])) == [(False, 5)]
    high = rule(kind="threshold", metric="reward", op="above", value=1.0)
    assert opened(judge_points(high, "reward", Watch(), [(1, 1.0), (2, 1.5)])) == [(True, 2)]


def test_change_compares_with_the_first_point_of_each_window() -> None:
    up = rule(kind="change", metric="loss", percent=50, window=10, direction="up")
    watch = Watch()
    # Window from step 0 (1.0): +40% is not enough, +60% is.
    assert opened(judge_points(up, "loss", watch, [(0, 1.0), (5, 1.4), (8, 1.6)])) == [(True, 8)]
    # Step 10 ends the window (compared with 1.0: +70%, still open) and starts the next at 1.7.
    assert judge_points(up, "loss", watch, [(10, 1.7)]) == []
    assert (watch.anchor_step, watch.anchor_value) == (10, 1.7)
    assert opened(judge_points(up, "loss", watch, [(12, 1.8)])) == [(False, 12)]
    # A late step, and a fall, say nothing to an "up" rule.
    assert judge_points(up, "loss", watch, [(3, 9.0), (13, 0.1)]) == []
    down = rule(kind="change", metric="loss", percent=50, window=10, direction="down")
    assert opened(judge_points(down, "loss", Watch(), [(0, 2.0), (1, 0.5)])) == [(True, 1)]
    either = rule(kind="change", metric="loss", percent=50, window=10)
    assert opened(judge_points(either, "loss", Watch(), [(0, 0.0), (1, 5.0)])) == []  # from 0


def test_stall_and_heartbeat() -> None:
    stall = rule(kind="stall", metric="loss", seconds=60)
    watch = Watch()
    assert judge_stall(stall, "loss", watch, last_arrival=100.0, now=150.0) is None
    found = judge_stall(stall, "loss", watch, last_arrival=100.0, now=170.0)
    assert found is not None
    assert found.title == "loss: no point for 70 s"
    assert judge_stall(stall, "loss", watch, last_arrival=100.0, now=999.0) is None  # open
    assert opened(judge_points(stall, "loss", watch, [(9, 0.1)])) == [(False, 9)]
    beat = rule(kind="heartbeat")
    watch = Watch()
    assert judge_heartbeat(beat, watch, health_at=100.0, ended=False, now=125.0) is None
    stale = judge_heartbeat(beat, watch, health_at=100.0, ended=False, now=140.0)
    assert stale is not None
    assert stale.opens
    ended = judge_heartbeat(beat, watch, health_at=100.0, ended=True, now=500.0)
    assert ended is not None
    assert (ended.opens, ended.text) == (False, "the run ended")


def test_eval_drop_judges_only_what_matched_evidence_allows() -> None:
    drop = rule(kind="eval_drop", points=5, baseline={"run": "r0", "round_id": "val"})
    watch = Watch()
    assert judge_eval_drop(drop, watch, "val-2", None) is None  # conditions do not hold
    assert judge_eval_drop(drop, watch, "val-2", -0.04) is None  # 4 points down
    found = judge_eval_drop(drop, watch, "val-3", -0.25)
    assert found is not None
    assert found.title == "round val-3: success rate 25.0 points below baseline r0/val"
    assert judge_eval_drop(drop, watch, "val-4", -0.3) is None  # still open
    resolved = judge_eval_drop(drop, watch, "val-5", 0.01)
    assert resolved is not None
    assert not resolved.opens


def test_patterns_match_whole_names() -> None:
    assert matches("*loss*", "train/loss")
    assert matches("loss", "loss")
    assert not matches("loss", "train/loss")
    assert matches("eval/*", "eval/accuracy")
    assert not matches("eval/*", "train/eval")


def test_rules_parse_with_their_defaults_and_round_trip() -> None:
    spec = parse_rule({"kind": "heartbeat"})
    assert (spec.name, spec.level, spec.seconds, spec.enabled) == ("heartbeat", "error", 30.0, True)
    drop = parse_rule({"kind": "eval_drop", "points": 5, "baseline": {"run": "a", "round_id": "v"}})
    assert drop.baseline == Baseline("a", "v", None)
    assert parse_rule(drop.to_json()) == drop
    for default in DEFAULT_RULES:
        assert parse_rule(default.to_json()) == default
    changed = merge_rule(drop.to_json(), {"points": 10, "enabled": False})
    assert (changed.points, changed.enabled) == (10.0, False)


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({"kind": "threshold", "metric": "r", "op": "over", "value": True}, ["op", "value"]),
        ({"kind": "nan", "metric": "loss", "window": 3, "colour": "red"}, ["colour", "window"]),
        ({"kind": "change", "metric": "loss", "percent": float("inf"), "window": 1.5},
         ["percent", "window"]),
        ({"kind": "heartbeat", "seconds": 10**9}, ["seconds"]),
        ({"kind": "nan", "metric": "x" * 129, "name": ""}, ["name", "metric"]),
        ({"kind": "eval_drop", "points": 101, "baseline": {"run": "a", "attempt": 0}},
         ["baseline.round_id", "baseline.attempt", "points"]),
        ({"kind": "stall", "metric": "loss", "seconds": 5, "enabled": "yes", "run": "a b"},
         ["enabled", "run"]),
    ],
)  # fmt: skip
def test_every_broken_field_is_named(body: dict[str, Any], fields: list[str]) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_rule(body)
    assert sorted(v.field for v in caught.value.violations) == sorted(fields)
    assert all("rule)" in v.rule for v in caught.value.violations)


def test_a_rule_body_must_be_an_object_with_a_kind() -> None:
    with pytest.raises(MalformedRequest):
        parse_rule([])
    with pytest.raises(InvalidInput, match="kind: must be nan, threshold"):
        parse_rule({"metric": "loss"})
    assert isinstance(parse_rule({"kind": "nan", "metric": "l"}), RuleSpec)


_VALUES = st.lists(
    st.one_of(st.none(), st.floats(-10, 10, allow_nan=False)), min_size=1, max_size=12
)
_NAN = st.builds(lambda: {"kind": "nan", "metric": "loss"})
_THRESHOLD = st.builds(
    lambda op, value: {"kind": "threshold", "metric": "loss", "op": op, "value": value},
    st.sampled_from(["above", "below"]),
    st.floats(-10, 10, allow_nan=False),
)
_RULES = st.lists(
    st.one_of(
        _NAN,
        _THRESHOLD,
        st.builds(
            lambda percent: {"kind": "change", "metric": "loss", "percent": percent, "window": 3},
            st.floats(1, 500, allow_nan=False),
        ),
    ),
    min_size=1,
    max_size=10,
)


@settings(max_examples=300, deadline=None)
@given(
    bodies=_RULES,
    batches=st.lists(_VALUES, min_size=1, max_size=6),
    scoped=st.sets(st.integers(0, 9)),
)
def test_folded_rules_judge_exactly_as_each_rule_alone(
    bodies: list[dict[str, Any]],
    batches: list[list[float | None]],
    scoped: set[int],
) -> None:
    """A series' nan and threshold rules folded into bounds give the same transitions, batch
    after batch, as judging every rule on its own (run-scoped rules are never folded)."""
    rules = tuple(
        Rule(i + 1, parse_rule(body), run_id=1 if i in scoped else None)
        for i, body in enumerate(bodies)
    )
    folded = SeriesRules.of(rules)
    alone: dict[int, Watch] = {r.id: Watch() for r in rules}
    together: dict[int, Watch] = {r.id: Watch() for r in rules}
    open_rules: set[int] = set()
    step = 0
    for values in batches:
        steps = list(range(step, step + len(values)))
        step += len(values)
        expected = [t for r in rules for t in judge_series(r, "loss", alone[r.id], steps, values)]
        found = []
        for r in folded.to_judge(Extent(values), open_rules):
            found += judge_series(r, "loss", together[r.id], steps, values)
        # As the engine keeps it: rules with an open episode are never folded away.
        open_rules = {rule_id for rule_id, watch in together.items() if watch.open}
        assert sorted(found, key=lambda t: t.rule_id) == sorted(expected, key=lambda t: t.rule_id)


@settings(max_examples=400, deadline=None)
@given(
    body=st.one_of(
        _NAN,
        _THRESHOLD,
        st.builds(lambda: {"kind": "stall", "metric": "loss", "seconds": 60}),
        st.builds(
            lambda percent, window, direction: {
                "kind": "change",
                "metric": "loss",
                "percent": percent,
                "window": window,
                "direction": direction,
            },
            st.floats(0.5, 300, allow_nan=False),
            st.integers(1, 8),
            st.sampled_from(["up", "down", "either"]),
        ),
    ),
    batches=st.lists(
        st.lists(
            st.tuples(st.integers(-2, 3), st.one_of(st.none(), st.floats(-10, 10))),
            min_size=1,
            max_size=10,
        ),
        min_size=1,
        max_size=6,
    ),
    start_open=st.booleans(),
)
def test_the_quick_test_of_a_series_judges_as_point_by_point(
    body: dict[str, Any], batches: list[list[tuple[int, float | None]]], start_open: bool
) -> None:
    """``judge_series`` skips a batch its quick test finds quiet (at C speed); batch after
    batch it gives the transitions, and leaves the watch, exactly as judging every point in
    turn does. Steps move by -2 to 3 per point (repeats and late points included, as when a
    run's batches are judged together), so windows start inside batches, at their edges
    and not at all."""
    judged = Rule(3, parse_rule(body))
    quick, slow = Watch(open=start_open), Watch(open=start_open)
    step = 0
    for deltas in batches:
        steps, values = [], []
        for delta, value in deltas:
            step = max(0, step + delta)
            steps.append(step)
            values.append(value)
        expected = judge_points(judged, "loss", slow, zip(steps, values, strict=True))
        assert judge_series(judged, "loss", quick, steps, values) == expected
        assert quick == slow


@given(values=_VALUES)
def test_a_series_extent_is_its_finite_values_least_and_greatest(
    values: list[float | None],
) -> None:
    finite = [value for value in values if value is not None]
    for extent in (Extent(values), Extent(values, None in values)):
        assert extent.invalid == (None in values)
        assert extent.all_invalid == (not finite)
        assert (extent.lo, extent.hi) == (min(finite, default=None), max(finite, default=None))
