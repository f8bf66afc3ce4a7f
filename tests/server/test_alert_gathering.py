"""What the alert engine hands its rules from Arena batches: each watched series' points in
step order, whatever the batch's shape (one event, events with the same metrics, events
with different ones, steps out of order), and batches of one run judged together exactly
as one after another."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tuneplane.contract.alert_rules import Rule, parse_rule
from tuneplane.contract.arena import parse_arena_batch
from tuneplane.server.alerting import AlertEngine, ArenaPoints, _Index, _joined, _RunWatches
from tuneplane.store.alert_rules import ProjectRules

NAMES = ["loss", "reward", "kl", "lr"]


def event(step: int, metrics: dict[str, float], number: int) -> dict[str, Any]:
    return {"project": "p", "run": "r", "step": step, "log_id": f"e{number}", "metrics": metrics}


_EVENTS = st.lists(
    st.tuples(
        st.integers(0, 5),
        st.dictionaries(st.sampled_from(NAMES), st.floats(-5, 5), min_size=1),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(
    events=_EVENTS,
    same_names=st.booleans(),
    watched=st.sets(st.sampled_from(NAMES)),
)
def test_every_watched_series_comes_in_step_order(
    events: list[tuple[int, dict[str, float]]], same_names: bool, watched: set[str]
) -> None:
    if same_names:  # the usual batch: every event carries the first one's metrics
        names = sorted(events[0][1])
        events = [(step, {n: metrics.get(n, 0.5) for n in names}) for step, metrics in events]
    batch = parse_arena_batch(
        {"logs": [event(step, metrics, i) for i, (step, metrics) in enumerate(events)]}
    )
    gathered = ArenaPoints(batch)
    found = gathered(watched.__contains__)
    assert set(gathered.names()) == {n for _, metrics in events for n in metrics}
    for name in {n for _, metrics in events for n in metrics}:
        points = sorted(
            ((step, metrics[name]) for step, metrics in events if name in metrics),
            key=lambda point: point[0],
        )
        if name in watched:
            assert name in found
        if name in found:
            steps, values, invalid = found[name]
            assert list(zip(steps, values, strict=True)) == points
            assert not invalid  # an Arena batch holds finite values only
    assert set(found) <= {n for _, metrics in events for n in metrics}


_RULE_BODIES = [
    {"kind": "nan", "metric": "*"},
    {"kind": "threshold", "metric": "loss", "op": "above", "value": 1.0},
    {"kind": "threshold", "metric": "reward", "op": "below", "value": -1.0},
    {"kind": "change", "metric": "reward", "percent": 50, "window": 3},
    {"kind": "stall", "metric": "kl", "seconds": 60},
]


def _index() -> _Index:
    rules = tuple(Rule(i + 1, parse_rule(body)) for i, body in enumerate(_RULE_BODIES))
    return _Index.of(ProjectRules(project_id=1, version=1, rules=rules))


@settings(max_examples=200, deadline=None)
@given(batches=st.lists(_EVENTS, min_size=1, max_size=6))
def test_batches_joined_in_one_job_are_judged_as_one_after_another(
    batches: list[list[tuple[int, dict[str, float]]]],
) -> None:
    """A run's batches that wait in one job are judged together: the same transitions, in
    the same order, and the same watches as judging each batch in turn."""
    gathered = [
        ArenaPoints(
            parse_arena_batch(
                {"logs": [event(step, metrics, i) for i, (step, metrics) in enumerate(events)]}
            )
        )
        for events in batches
    ]
    index = _index()
    alone, together = _RunWatches(0.0, set()), _RunWatches(0.0, set())
    expected = [t for points in gathered for t in AlertEngine._judge(index, alone, 1, points)]
    found = AlertEngine._judge(index, together, 1, _joined(list(gathered)))
    key = lambda t: (t.rule_id, t.subject)  # noqa: E731 - the order within a rule and series
    assert sorted(found, key=key) == sorted(expected, key=key)
    assert together.watches == alone.watches
