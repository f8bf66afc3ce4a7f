"""Observation events against a simulated world: the bounded queue of 128, refused input,
servers that refuse or cannot be reached, the histogram helper, and the module-level
functions in a real Python process."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tuneplane
from tests.client.test_default_reporter import job_env, run_script
from tests.client.world import Recorder, Request, accept_all, dead_url, recording_server
from tuneplane import DeliveryFailed, InvalidObservation, Reporter, histogram
from tuneplane.client.events import ObservationsSent
from tuneplane.client.transport import RetryPolicy
from tuneplane.contract.observations import parse_observations

FAST = RetryPolicy(attempts=3, first_delay=0.01, max_delay=0.02)
#: Retries that outlast any test: the first batch stays in flight.
FOREVER = RetryPolicy(attempts=1000, first_delay=1.0, max_delay=1.0)


def reporter(url: str, **options: Any) -> Reporter:
    settings: dict[str, Any] = {"flush_interval": 0.02, "retry": FAST, "status_retry": FAST}
    settings.update(options)
    return Reporter(url, "demo/grpo-7", "tpi_secret", attempt=2, **settings)


def accept_events(request: Request) -> tuple[int, Any]:
    if request.path.endswith("/observations"):
        return 200, {"new": len(request.body["events"]), "duplicate": 0}
    return accept_all(request)


@pytest.fixture
def server() -> Iterator[tuple[str, Recorder]]:
    with recording_server(Recorder(answer=accept_events)) as found:
        yield found


def sent_events(recorder: Recorder) -> list[dict[str, Any]]:
    return [e for request in recorder.to("/observations") for e in request.body["events"]]


def test_the_queue_holds_128_events_and_refuses_more_without_blocking() -> None:
    r = reporter(dead_url(), retry=FOREVER)
    started = time.perf_counter()
    answers = [r.event("tick", {"i": i}, step=i) for i in range(200)]
    elapsed = time.perf_counter() - started
    assert elapsed < 0.5
    assert answers == [True] * 128 + [False] * 72
    health = r.health()
    assert (health.events_queued, health.events_queue_size) == (128, 128)
    assert health.events_queue_capacity == 128
    assert health.events_dropped_by_reason == {"queue full": 72}
    assert (health.queued, health.dropped) == (0, 0)  # the points' queue is another one
    closed = r.close(0.2)
    assert (closed.events_sent, closed.events_dropped, closed.events_queue_size) == (0, 200, 0)
    assert closed.loss_summary() == (
        "tuneplane: 0 of 200 events delivered (200 dropped: 128 server unreachable, 72 queue full)"
    )
    assert r.event("late") is False
    assert r.health().events_dropped_by_reason["reporter closed"] == 1


def test_refused_input_answers_false_is_counted_and_never_raises(
    server: tuple[str, Recorder], caplog: pytest.LogCaptureFixture
) -> None:
    url, recorder = server
    with reporter(url) as r:
        refused = [
            r.event("", {"a": 1}),
            r.event("x", {f"f{i}": i for i in range(33)}),
            r.event("x", {"a": [1, 2]}),
            r.event("x", {"a": math.nan}),
            r.event("x", {1: 2}),  # type: ignore[dict-item]
            r.event("x", "not a mapping"),  # type: ignore[arg-type]
            r.event("x", step=-1),
            r.event("x", {"a": "y" * 20_000}),
            r.distribution("d", [1.0], bounds=[1, 1]),
            r.distribution("d", [1.0, math.nan], bounds=[0, 1]),
            r.distribution("d", bounds=[0, 1], counts=[1, 2]),
            r.distribution("d", bounds=[0, 1], counts=[1, -2, 0]),
            r.distribution("d", [1.0], bounds=[0, 1], counts=[0, 1, 0]),
            r.distribution("d", bounds=list(range(65)), counts=[0] * 66),
            r.distribution("d", None, bounds=[0, 1]),
            r.trial_result("val", "q1", "infra_error", eligible=True),
            r.trial_result("val", "q1", "won"),  # type: ignore[arg-type]
            r.declare_population("val", 10, dataset="not-a-sha256"),
            r.declare_population("val", -1),
            r.observe({"type": "mystery"}),
            r.observe(None),  # type: ignore[arg-type]
        ]
        assert r.event("fine", {"a": 1})
        assert r.flush(5)
        health = r.health()
    assert refused == [False] * 21
    assert health.events_dropped_by_reason == {"invalid input": 21}
    assert (health.events_queued, health.events_sent) == (1, 1)
    assert [e["name"] for e in sent_events(recorder)] == ["fine"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("event.name: must be a string of 1-1024 characters" in w for w in warnings)
    assert any("refused: event: an observation is at most 16 KiB" in w for w in warnings)
    assert any("strictly increasing" in w for w in warnings)
    assert any("cannot be eligible" in w for w in warnings)


def test_queued_events_get_unique_ids_and_plain_numbers(server: tuple[str, Recorder]) -> None:
    class Tensor:
        """A one-element tensor or NumPy scalar: read at the call, not later."""

        def __init__(self, value: float) -> None:
            self.value = value

        def __float__(self) -> float:
            return self.value

    class Values:
        def __init__(self, values: list[float]) -> None:
            self.values = values

        def tolist(self) -> list[float]:
            return list(self.values)

    url, recorder = server
    loss = Tensor(0.25)
    values = Values([0.5, 5.0])
    with reporter(url) as r, reporter(url) as other:
        assert r.event("a", {"loss": loss}, step=1)
        loss.value = 99.0
        assert r.distribution("d", values, bounds=[1.0], step=1)
        values.values.append(0.0)
        assert other.event("a", {"loss": 0.25}, step=1)
        assert r.flush(5)
        assert other.flush(5)
    events = sent_events(recorder)
    assert [e.get("fields") for e in events if e["type"] == "event"] == [{"loss": 0.25}] * 2
    [shape] = [e["histogram"] for e in events if e["type"] == "distribution"]
    assert shape == {"bounds": [1.0], "counts": [1, 1]}
    ids = [e["event_id"] for e in events]
    assert len(set(ids)) == 3
    assert all(i.startswith("a2-") for i in ids)  # the attempt, then a random part
    parse_observations({"events": events})  # the server's own parser accepts them


def test_a_refused_batch_is_dropped_counted_and_logged_once(
    server: tuple[str, Recorder], caplog: pytest.LogCaptureFixture
) -> None:
    url, recorder = server

    def refuse(request: Request) -> tuple[int, Any]:
        if request.path.endswith("/observations"):
            error = {"status": 422, "code": "invalid", "message": "events[0]: nope"}
            return 422, {"error": error}
        return accept_events(request)

    recorder.answer = refuse
    with reporter(url) as r:
        for i in range(3):
            assert r.event("e", step=i)
            assert r.flush(5)
        health = r.health()
    assert health.events_dropped_by_reason == {"rejected by server (422 invalid)": 3}
    assert len(recorder.to("/observations")) == 3  # a refusal is not retried
    logged = [r.getMessage() for r in caplog.records if "422" in r.getMessage()]
    assert logged == [
        "tuneplane: observation events dropped (rejected by server (422 invalid)): events[0]: nope"
    ]
    # The run's transport health says events were lost.
    beat = recorder.to("/heartbeat")[-1].body
    assert (beat["events_dropped"], beat["events_sent"], beat["events_queued"]) == (3, 0, 3)


def test_observations_checks_everything_before_sending_anything(
    server: tuple[str, Recorder],
) -> None:
    url, recorder = server
    good = {"type": "event", "name": "fine"}
    bad = {"type": "distribution", "name": "d", "histogram": {"bounds": [2, 1], "counts": [0]}}
    with reporter(url) as r, pytest.raises(InvalidObservation) as refused:
        r.observations([good] * 40 + [bad])
    assert refused.value.violations[0].field == "events[40].histogram.bounds"
    assert "events[40].histogram.bounds: must be strictly increasing" in str(refused.value)
    assert isinstance(refused.value, ValueError)
    assert recorder.requests == []


def test_observations_raise_when_delivery_fails(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    answers = iter([200, 503, 503, 503])

    def fail_second(request: Request) -> tuple[int, Any]:
        status = next(answers)
        if status == 200:
            return accept_events(request)
        return status, {"error": {"code": "unavailable", "message": "busy"}}

    recorder.answer = fail_second
    events = [{"type": "event", "name": "e", "step": i} for i in range(40)]
    with reporter(url) as r, pytest.raises(DeliveryFailed, match="32 of 40 delivered") as failed:
        r.observations(events)
    assert failed.value.status == 503
    assert [len(q.body["events"]) for q in recorder.to("/observations")] == [32, 8, 8, 8]

    with reporter(dead_url()) as r, pytest.raises(DeliveryFailed, match="server unreachable"):
        r.observations(events)
    r = reporter(url)
    r.close(1)
    with pytest.raises(DeliveryFailed, match="closed"):
        r.observations(events)
    with reporter(url) as r:
        assert r.observations([]) == ObservationsSent(0, 0, ())
    assert len(recorder.to("/observations")) == 4


def test_histogram_counts_every_value_in_its_bucket() -> None:
    assert histogram([], [0]) == {"bounds": [0], "counts": [0, 0]}
    assert histogram([-1, 0, 0.0001, 1, 1.5, 2, 2.5], [0, 1, 2]) == {
        "bounds": [0, 1, 2],
        "counts": [2, 2, 2, 1],
    }
    with pytest.raises(ValueError, match="strictly increasing"):
        histogram([1.0], [0, 0])
    with pytest.raises(ValueError, match="finite numbers"):
        histogram([1.0], [0, math.inf])
    with pytest.raises(ValueError, match="finite numbers"):
        histogram([1.0], list(range(65)))
    with pytest.raises(ValueError, match="cannot be counted"):
        histogram([1.0, math.nan], [0])
    with pytest.raises(ValueError, match="cannot be counted"):
        histogram([math.inf], [0])


@given(
    st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=200),
    st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), min_size=1, max_size=64),
)
def test_histogram_agrees_with_the_bucket_definition(values: list[float], raw: list[float]) -> None:
    bounds = sorted(set(raw))
    counts = histogram(values, bounds)["counts"]
    assert sum(counts) == len(values)
    edges = [-math.inf, *bounds, math.inf]
    for index, count in enumerate(counts):
        low, high = edges[index], edges[index + 1]
        # Bucket i is (b[i-1], b[i]]; the last one is (b[n-1], +inf).
        inside = [v for v in values if low < v <= high]
        assert count == len(inside)


def test_without_a_server_the_functions_answer_false_and_say_so_once() -> None:
    script = """
import tuneplane
print(tuneplane.event("a", {"x": 1}), tuneplane.distribution("d", [1.0], bounds=[0]),
      tuneplane.trial_result("r", "t", "success"), tuneplane.health_snapshot({"x": 1}),
      tuneplane.declare_population("r", 3))
tuneplane.report({"loss": 1.0})
"""
    done = run_script({}, script)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "False False False False False\n"
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("tuneplane: metrics and events are not reported")


def test_the_module_functions_queue_and_deliver_at_exit() -> None:
    script = """
import tuneplane
print(tuneplane.event("a", {"x": 1}, step=0), tuneplane.event("", {}),
      tuneplane.distribution("d", [0.5, 2.0], bounds=[1], step=0), flush=True)
"""
    with recording_server(Recorder(answer=accept_events)) as (url, recorder):
        done = run_script(job_env(url), script)
        events = sent_events(recorder)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True False True\n"
    assert [(e["type"], e["name"]) for e in events] == [("event", "a"), ("distribution", "d")]
    assert done.stderr.strip().splitlines()[-1] == (
        "tuneplane: 2 of 3 events delivered (1 dropped: invalid input)"
    )


def test_the_module_functions_have_the_methods_signatures() -> None:
    import inspect

    for name in ("event", "distribution", "health_snapshot", "trial_result"):
        method = inspect.signature(getattr(Reporter, name))
        function = inspect.signature(getattr(tuneplane, name))
        assert list(function.parameters) == list(method.parameters)[1:]
