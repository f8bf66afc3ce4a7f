"""The Reporter against a simulated server: queueing, steps, drops, retries, heartbeats,
lifecycle calls. The server here is a real HTTP server in a thread that records requests."""

import logging
import math
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.client.world import Recorder, Request, accept_all, dead_url, recording_server
from tuneplane import DeliveryFailed, NotConfigured, Reporter
from tuneplane.client.transport import RetryPolicy

FAST = RetryPolicy(attempts=3, first_delay=0.01, max_delay=0.02)


def reporter(url: str, **options: Any) -> Reporter:
    settings: dict[str, Any] = {
        "flush_interval": 0.02,
        "retry": FAST,
        "status_retry": FAST,
        "timeout": 2.0,
    }
    settings.update(options)
    return Reporter(url, "demo/grpo-7", "tpi_secret", **settings)


@pytest.fixture
def server() -> Iterator[tuple[str, Recorder]]:
    with recording_server() as found:
        yield found


def sent_points(recorder: Recorder) -> dict[tuple[str, int], float | str]:
    points: dict[tuple[str, int], float | str] = {}
    for request in recorder.to("/scalars"):
        for entry in request.body["series"]:
            for step, value in zip(entry["steps"], entry["values"], strict=True):
                points[(entry["name"], step)] = value
        for entry in request.body.get("invalid", []):
            for step, kind in zip(entry["steps"], entry["kinds"], strict=True):
                points[(entry["name"], step)] = kind
    return points


def test_points_arrive_with_the_token_and_in_batches(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    with reporter(url) as r:
        for step in range(3000):
            r.report({"train/loss": 1.0 / (step + 1), "train/reward": float(step)}, step=step)
        assert r.flush(10)
        health = r.health()
    assert (health.queued, health.sent, health.dropped, health.queue_size) == (6000, 6000, 0, 0)
    requests = recorder.to("/api/v1/ingest/scalars")
    assert all(req.headers["Authorization"] == "Bearer tpi_secret" for req in requests)
    sizes = [sum(len(e["steps"]) for e in req.body["series"]) for req in requests]
    assert max(sizes) <= 2048
    assert sum(sizes) == 6000
    points = sent_points(recorder)
    assert len(points) == 6000
    assert points[("train/reward", 2999)] == 2999.0


def test_steps_count_on_from_the_last_one(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    with reporter(url) as r:
        r.report({"a": 1.0})
        r.report({"a": 2.0})
        r.report({"a": 3.0}, step=10)
        r.report({"a": 4.0})
        r.flush(5)
    assert sorted(sent_points(recorder)) == [("a", 0), ("a", 1), ("a", 10), ("a", 11)]


def test_the_metrics_are_copied_at_the_call(server: tuple[str, Recorder]) -> None:
    """The caller may reuse its dict, and a tensor-like value is read at report time."""

    class Tensor:
        def __init__(self, value: float) -> None:
            self.value = value

        def __float__(self) -> float:
            return self.value

    url, recorder = server
    metrics: dict[str, Any] = {"loss": 0.5}
    tensor = Tensor(7.0)
    with reporter(url, flush_interval=5.0) as r:
        r.report(metrics, step=0)
        metrics["loss"] = 99.0
        metrics["new"] = 1.0
        r.report({"t": tensor}, step=0)
        tensor.value = -1.0
        r.flush(5)
    assert sent_points(recorder) == {("loss", 0): 0.5, ("t", 0): 7.0}


def test_nested_mappings_are_flattened_as_w_and_b_and_trackio_store_them(
    server: tuple[str, Recorder],
) -> None:
    url, recorder = server
    looped: dict[str, Any] = {}
    looped["again"] = looped  # a mapping that holds itself: refused, not followed forever
    with reporter(url) as r:
        r.report({"loss": 0.5, "eval": {"acc": 0.75, "pass": {"at1": 0.25}}}, step=1)
        r.report({"loop": looped}, step=2)
        r.flush(5)
        health = r.health()
    assert sent_points(recorder) == {
        ("loss", 1): 0.5,
        ("eval/acc", 1): 0.75,
        ("eval/pass/at1", 1): 0.25,
    }
    assert health.dropped == 1


def test_an_alert_without_a_step_is_at_the_step_the_run_reached(
    server: tuple[str, Recorder],
) -> None:
    url, recorder = server
    with reporter(url) as r:
        assert r.alert("before any point")
        r.report({"loss": 0.5})
        r.report({"loss": 0.4}, step=41)
        assert r.alert("loss spiked")
        assert r.alert("explicit", step=7)
        r.flush(5)
    sent = [a for q in recorder.to("/api/v1/ingest/alerts") for a in q.body["alerts"]]
    assert [(a["title"], a["step"]) for a in sent] == [
        ("before any point", None),
        ("loss spiked", 41),
        ("explicit", 7),
    ]


def test_invalid_numbers_are_sent_as_invalid_and_counted(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    with reporter(url) as r:
        r.report({"r": math.nan, "s": math.inf, "t": -math.inf, "u": 1.0}, step=3)
        r.flush(5)
        health = r.health()
    assert sent_points(recorder) == {
        ("r", 3): "nan",
        ("s", 3): "inf",
        ("t", 3): "-inf",
        ("u", 3): 1.0,
    }
    assert (health.sent, health.invalid, health.dropped) == (4, 3, 0)


def test_bad_input_never_raises_and_is_counted(
    server: tuple[str, Recorder], caplog: pytest.LogCaptureFixture
) -> None:
    url, recorder = server
    with reporter(url) as r:
        r.report(None)  # type: ignore[arg-type]
        r.report("loss")  # type: ignore[arg-type]
        r.report({"": 1.0, "ok": 1.0, "bad": "x"}, step=0)
        r.report({"ok": 1.0}, step=-5)
        r.report({"ok": 2.0}, step="seven")  # type: ignore[arg-type]
        r.report({"ok": 3.0})  # the counter carries on from the last good step
        r.flush(5)
        health = r.health()
    assert sent_points(recorder) == {("ok", 0): 1.0, ("ok", 1): 3.0}
    assert health.sent == 2
    assert health.dropped_by_reason == {
        "invalid input": 2,
        "invalid metric name": 1,
        "not a number": 1,
        "invalid step": 2,
    }
    assert health.dropped == 6
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("report() ignored" in w for w in warnings)
    assert any("invalid metric name" in w for w in warnings)


def test_over_capacity_points_are_dropped_and_counted_without_blocking() -> None:
    r = reporter(dead_url(), queue_capacity=100, retry=RetryPolicy(attempts=1000, first_delay=1))
    started = time.perf_counter()
    for step in range(100):
        r.report({"a": 1.0, "b": 2.0, "c": 3.0}, step=step)
    elapsed = time.perf_counter() - started
    health = r.health()
    assert elapsed < 0.5
    assert health.queue_capacity == 100
    assert health.queued == 99  # 33 whole calls; a call's points are kept or dropped together
    assert health.queue_size == 99
    assert health.dropped_by_reason == {"queue full": 201}
    closed = r.close(0.2)
    assert closed.sent == 0
    assert closed.dropped == 300
    assert closed.queue_size == 0
    assert closed.loss_summary() == (
        "tuneplane: 0 of 300 points delivered (300 dropped: 201 queue full, 99 server unreachable)"
    )


def test_retries_5xx_and_transport_errors_then_delivers(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    failures = iter([503, 500])

    def flaky(request: Request) -> tuple[int, Any]:
        if request.path.endswith("/scalars"):
            status = next(failures, 200)
            if status != 200:
                return status, {"error": {"code": "unavailable", "message": "busy"}}
        return accept_all(request)

    recorder.answer = flaky
    with reporter(url) as r:
        r.report({"a": 1.0}, step=1)
        assert r.flush(5)
        health = r.health()
    assert (health.sent, health.dropped, health.failed_sends) == (1, 0, 2)
    assert len(recorder.to("/scalars")) == 3


def test_a_4xx_drops_the_batch_and_logs_once(
    server: tuple[str, Recorder], caplog: pytest.LogCaptureFixture
) -> None:
    url, recorder = server

    def refuse(request: Request) -> tuple[int, Any]:
        if request.path.endswith("/scalars"):
            error = {"status": 422, "code": "invalid", "message": "series: too many"}
            return 422, {"error": error}
        return accept_all(request)

    recorder.answer = refuse
    with reporter(url) as r:
        for step in range(3):
            r.report({"a": 1.0}, step=step)
            r.flush(5)
        health = r.health()
    assert len(recorder.to("/scalars")) == 3  # no retries
    assert health.dropped_by_reason == {"rejected by server (422 invalid)": 3}
    assert health.failed_sends == 3
    logged = [r.getMessage() for r in caplog.records if "422" in r.getMessage()]
    assert logged == [
        "tuneplane: metric points dropped (rejected by server (422 invalid)): series: too many"
    ]


def test_heartbeats_carry_the_counters(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    r = reporter(url, heartbeat_interval=0.1)
    r.report({"a": 1.0, "b": 2.0})
    recorder.wait_for(lambda: len(recorder.to("/heartbeat")) >= 3)
    r.close(5)
    beats = recorder.to("/api/v1/ingest/heartbeat")
    assert beats[-1].body == {
        "queued": 2,
        "sent": 2,
        "dropped": 0,
        "failed_sends": 0,
        "queue_size": 0,
        "queue_capacity": 100_000,
        "events_queued": 0,
        "events_sent": 0,
        "events_dropped": 0,
        "events_queue_size": 0,
        "events_queue_capacity": 128,
        "trajectories_queued": 0,
        "trajectories_sent": 0,
        "trajectories_dropped": 0,
        "trajectories_queue_size": 0,
        "trajectories_queue_capacity": 256,
        "trajectories_not_uploaded": 0,
        "interval": 0.1,
    }
    assert all(set(beat.body) == set(beats[-1].body) for beat in beats)
    assert beats[0].headers["Authorization"] == "Bearer tpi_secret"


def test_nothing_is_sent_before_the_first_report(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    r = reporter(url, heartbeat_interval=0.05)
    time.sleep(0.2)
    r.close(1)
    assert recorder.requests == []


def test_close_is_bounded_when_the_server_is_down() -> None:
    r = reporter(dead_url(), retry=RetryPolicy(attempts=100, first_delay=0.05, max_delay=0.1))
    for step in range(2000):
        r.report({"a": float(step)}, step=step)
    started = time.perf_counter()
    health = r.close(0.5)
    assert time.perf_counter() - started < 2.0
    assert (health.sent, health.dropped, health.queue_size) == (0, 2000, 0)
    assert health.failed_sends >= 1
    assert health.loss_summary() == (
        "tuneplane: 0 of 2000 points delivered (2000 dropped: server unreachable)"
    )
    r.report({"a": 1.0}, step=0)  # after close: counted, not raised
    assert r.health().dropped_by_reason["reporter closed"] == 1


def test_flush_waits_only_for_what_was_reported_before(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    release = threading.Event()

    def slow(request: Request) -> tuple[int, Any]:
        release.wait(5)
        return accept_all(request)

    recorder.answer = slow
    with reporter(url) as r:
        r.report({"a": 1.0}, step=0)
        assert not r.flush(0.1)
        release.set()
        assert r.flush(5)
        assert r.health().sent == 1


def test_status_is_strict(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    with reporter(url) as r:
        r.status("running")
        r.status("failed", exit_code=3)
        with pytest.raises(ValueError, match="status must be one of"):
            r.status("done")  # type: ignore[arg-type]
    assert [q.body for q in recorder.to("/status")] == [
        {"status": "running"},
        {"status": "failed", "exit_code": 3},
    ]


def test_status_retries_then_raises(server: tuple[str, Recorder]) -> None:
    url, recorder = server
    answers = iter([(502, {}), (200, {})])
    recorder.answer = lambda request: next(answers)
    with reporter(url) as r:
        r.status("running")
    assert len(recorder.to("/status")) == 2

    recorder.answer = lambda request: (409, {"error": {"code": "conflict", "message": "final"}})
    with reporter(url) as r, pytest.raises(DeliveryFailed, match="final") as refused:
        r.status("running")
    assert refused.value.status == 409

    with reporter(dead_url()) as r, pytest.raises(DeliveryFailed, match="server unreachable"):
        r.status("succeeded", exit_code=0)


def test_from_env() -> None:
    with pytest.raises(NotConfigured, match="TUNEPLANE_JOB_TOKEN"):
        Reporter.from_env({"TUNEPLANE_JOB_ENDPOINT": "http://x", "TUNEPLANE_JOB_RUN_ID": "a/b"})
    with pytest.raises(NotConfigured, match="project/run"):
        Reporter.from_env(
            {
                "TUNEPLANE_JOB_ENDPOINT": "http://x",
                "TUNEPLANE_JOB_RUN_ID": "no-slash",
                "TUNEPLANE_JOB_TOKEN": "tpi_x",
            }
        )
    r = Reporter.from_env(
        {
            "TUNEPLANE_JOB_ENDPOINT": "http://x:1/",
            "TUNEPLANE_JOB_RUN_ID": "demo/grpo-7",
            "TUNEPLANE_JOB_TOKEN": "tpi_x",
            "TUNEPLANE_JOB_ATTEMPT": "3",
            "TUNEPLANE_QUEUE_MAX_POINTS": "500",
        }
    )
    assert (r.project, r.run, r.attempt, r.endpoint) == ("demo", "grpo-7", 3, "http://x:1")
    assert r.health().queue_capacity == 500
    assert "tpi_x" not in repr(r)
    r.close(0)
