"""What the alert engine hands its rules from an Arena batch: each watched series' points in
step order, whatever the batch's shape (one event, events with the same metrics, events
with different ones, steps out of order)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tuneplane.contract.arena import parse_arena_batch
from tuneplane.server.alerting import ArenaPoints

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
