"""Observation events from the SDK to a real ``tuneplane serve`` process, on SQLite and on
PostgreSQL: queued events and distributions arrive once and read back as sent; the
synchronous ``observations()`` sends batches of at most 32 and a retry after a lost
response stores nothing twice; health snapshots stay findable; evaluation outcomes count."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.client.runs import PROJECT, Server
from tests.client.world import Fate, proxy
from tuneplane import Reporter
from tuneplane.client.transport import RetryPolicy

FAST = RetryPolicy(attempts=4, first_delay=0.01, max_delay=0.05)


@contextmanager
def reporting(server: Server, run: str, url: str | None = None) -> Iterator[Reporter]:
    token = server.start_attempt(run)
    reporter = Reporter(
        url or server.base,
        f"{PROJECT}/{run}",
        token,
        attempt=1,
        flush_interval=0.02,
        retry=FAST,
        status_retry=FAST,
    )
    with reporter:
        yield reporter


def observations(server: Server, run: str, **params: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = server.get(
        f"/api/v1/projects/{PROJECT}/runs/{run}/observations", **params
    )
    return found


def test_events_and_distributions_arrive_once(server: Server) -> None:
    with reporting(server, "events-once") as r:
        assert r.event("rollout/done", {"tokens": 512, "env": "math", "ok": True}, step=7)
        assert r.event("rollout/done", {"tokens": 512, "env": "math", "ok": True}, step=7)
        rewards = [0.0, 0.5, 1.0, 1.5, 3.0, 9.5, -2.0]
        assert r.distribution("rollout/reward", rewards, bounds=[0, 1, 2, 4, 8], step=7)
        assert r.distribution("rollout/len", bounds=[10.0, 100.0], counts=[1, 5, 2], step=8)
        assert r.flush(10)
        health = r.health()
    assert (health.events_queued, health.events_sent, health.events_dropped) == (4, 4, 0)
    assert health.events_queue_size == 0

    stored = observations(server, "events-once")
    assert len(stored) == 4
    assert len({o["event_id"] for o in stored}) == 4
    # Newest first; two identical events at one step stay two events.
    assert [o["type"] for o in stored] == ["distribution", "distribution", "event", "event"]
    assert stored[3]["fields"] == {"tokens": 512, "env": "math", "ok": True}
    assert (stored[3]["name"], stored[3]["step"], stored[3]["attempt"]) == ("rollout/done", 7, 1)
    # (-inf,0] holds 0.0 and -2.0; (0,1] holds 0.5 and 1.0; a value on a bound is in the
    # bucket it closes.
    assert stored[1]["histogram"] == {"bounds": [0, 1, 2, 4, 8], "counts": [2, 2, 1, 1, 0, 1]}
    assert stored[0]["histogram"] == {"bounds": [10.0, 100.0], "counts": [1, 5, 2]}

    # The heartbeat at close carried the event counters to the run's transport health.
    transport = server.run("events-once")["transport"]
    assert (transport["state"], transport["events_sent"], transport["events_dropped"]) == (
        "ok",
        4,
        0,
    )


def test_observations_send_batches_of_32_and_a_lost_response_stores_nothing_twice(
    server: Server,
) -> None:
    """The proxy lets the server store the first batch, then loses its answer: the SDK
    sends the same batch (same event IDs) again and the server counts it as duplicates."""
    batches: list[int] = []
    lock = threading.Lock()

    def lose_first(request: bytes) -> Fate:
        if not request.startswith(b"POST /api/v1/ingest/observations "):
            return "pass"
        body = json.loads(request.partition(b"\r\n\r\n")[2])
        with lock:
            batches.append(len(body["events"]))
            return "lose" if len(batches) == 1 else "pass"

    events = [
        {"type": "event", "name": "eval/sample", "step": i, "fields": {"i": i}} for i in range(70)
    ]
    with proxy(server.base, lose_first) as url, reporting(server, "bulk-lossy", url) as r:
        sent = r.observations(events)
        failed_sends = r.health().failed_sends
    assert batches == [32, 32, 32, 6]  # the first one twice
    assert (sent.new, sent.duplicate) == (38, 32)
    assert len(set(sent.event_ids)) == 70
    assert failed_sends == 1

    stored = observations(server, "bulk-lossy")
    assert sorted(o["step"] for o in stored) == list(range(70))
    assert {o["event_id"] for o in stored} == set(sent.event_ids)


def test_a_replay_with_the_same_event_ids_changes_nothing(server: Server) -> None:
    events = [{"event_id": f"e-{i}", "type": "event", "name": "x", "step": i} for i in range(40)]
    with reporting(server, "replay") as r:
        first = r.observations(events)
        again = r.observations(events)
    assert (first.new, first.duplicate) == (40, 0)
    assert (again.new, again.duplicate) == (0, 40)
    assert len(observations(server, "replay")) == 40


def test_health_snapshots_stay_findable_behind_later_events(server: Server) -> None:
    with reporting(server, "health-snapshot") as r:
        assert r.health_snapshot({"gpu_mem_gb": 61.5, "tokens_per_s": 1200}, step=3)
        assert r.flush(10)
        r.observations([{"type": "event", "name": "later", "step": i} for i in range(150)])
    recent = observations(server, "health-snapshot")
    assert len(recent) == 100
    assert all(o["type"] == "event" for o in recent)
    [snapshot] = observations(server, "health-snapshot", type="health")
    assert (snapshot["step"], snapshot["fields"]) == (3, {"gpu_mem_gb": 61.5, "tokens_per_s": 1200})


def test_evaluation_outcomes_from_the_convenience_functions(server: Server) -> None:
    digest = "ab" * 32
    with reporting(server, "eval-round") as r:
        # Results may arrive before the declaration.
        assert r.trial_result("val-1", "q1", "success", reward=1.0)
        assert r.trial_result("val-1", "q2", "failure", reward=0.0)
        assert r.trial_result("val-1", "q3", "infra_error", error_type="timeout")
        assert r.trial_result("val-1", "q3", "success", trial_attempt=1, reward=1.0)
        assert r.declare_population(
            "val-1", 4, dataset=digest, verifier=digest, task_name="gsm8k", task_version="1"
        )
        assert r.flush(10)
        assert r.health().events_sent == 5
    [round_] = server.get(f"/api/v1/projects/{PROJECT}/runs/eval-round/evaluation")["rounds"]
    assert round_["round_id"] == "val-1"
    assert round_["declared"] is True
    assert round_["digests"] == {
        "dataset": digest,
        "cohort": None,
        "verifier": digest,
        "settings": None,
    }
    assert round_["task"] == {"name": "gsm8k", "version": "1"}
    assert round_["counts"] == {
        "success": 2,
        "failure": 1,
        "infra_error": 0,
        "unscored": 0,
        "reported": 3,
    }
    assert round_["not_yet_reported"]["value"] == 1


def test_a_changed_outcome_loses_only_itself_not_its_batch(server: Server) -> None:
    """The server refuses a batch holding a changed re-send of an outcome whole (a batch is
    one transaction); the SDK sends the batch's other events again, without it."""
    run = "eval-conflict"
    with reporting(server, run) as r:
        assert r.trial_result("val-1", "q1", "success", reward=1.0)
        assert r.flush(10)
        # One batch: an innocent event, the changed outcome, another trial's result.
        assert r.event("rollout/done", {"tokens": 3})
        assert r.trial_result("val-1", "q1", "failure", reward=0.0)
        assert r.trial_result("val-1", "q2", "success", reward=1.0)
        assert r.flush(10)
        health = r.health()
    assert (health.events_sent, health.events_dropped) == (3, 1)
    assert list(health.events_dropped_by_reason) == ["rejected by server (409 outcome_conflict)"]
    names = [o.get("name") for o in observations(server, run) if o["type"] == "event"]
    assert names == ["rollout/done"]
    [round_] = server.get(f"/api/v1/projects/{PROJECT}/runs/{run}/evaluation")["rounds"]
    assert (round_["counts"]["success"], round_["counts"]["failure"]) == (2, 0)
