"""Server-side alert rules through the real app (docs/alerts.md), on SQLite and PostgreSQL:
the API, defaults, episodes judged as points arrive, the periodic check, evaluation rounds,
and that nothing a rule does reaches ingest."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, TypeVar

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from tests.conftest import INGEST_SECRET
from tuneplane.server.app import create_app
from tuneplane.server.settings import Settings
from tuneplane.store.schema import alert_rules, runs

P = "/api/v1/projects/demo"
RULES = P + "/alert-rules"
ARENA = {"Authorization": f"Bearer {INGEST_SECRET}"}
T = TypeVar("T")


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    """The app (alert checks every 0.2 s) with the admin key as the default credential."""
    fast = replace(settings, alert_check_interval=0.2, webhook_retry=0.2)
    with TestClient(create_app(fast), raise_server_exceptions=False) as client:
        key = (settings.data_dir / "admin.key").read_text().strip()
        client.headers["Authorization"] = f"Bearer {key}"
        yield client


def wait_for(probe: Callable[[], T], timeout: float = 10.0) -> T:
    """``probe()`` once it is truthy (it may take the engine a moment)."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def arena(api: TestClient, step: int, metrics: dict[str, float], run: str = "r1") -> None:
    body = {"logs": [{"project": "demo", "run": run, "step": step, "log_id": f"e{step}",
                      "metrics": metrics}]}  # fmt: skip
    answer = api.post("/ingest", json=body, headers=ARENA)
    assert answer.status_code == 200, answer.text


def alerts(api: TestClient, run: str = "r1") -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = api.get(f"{P}/runs/{run}/alerts").json()
    return sorted(found, key=lambda a: a["alert_id"])


def rule(api: TestClient, **body: Any) -> dict[str, Any]:
    answer = api.post(RULES, json=body)
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


def test_a_new_project_has_the_default_rules(api: TestClient) -> None:
    arena(api, 1, {"loss": 1.0})
    found = api.get(RULES).json()["rules"]
    assert [(r["kind"], r.get("metric"), r["level"], r["enabled"]) for r in found] == [
        ("nan", "*loss*", "error", True),
        ("heartbeat", None, "error", True),
    ]
    assert found[1]["seconds"] == 30.0


def test_rules_are_created_read_changed_and_deleted(api: TestClient) -> None:
    arena(api, 1, {"reward": 1.0})
    created = rule(api, kind="threshold", metric="reward", op="below", value=0.5, run="r1")
    assert created["name"] == "threshold reward"
    assert (created["run"], created["level"], created["value"]) == ("r1", "warn", 0.5)
    path = f"{RULES}/{created['id']}"
    assert api.get(path).json()["episodes"] == []
    changed = api.patch(path, json={"enabled": False, "value": 0.25})
    assert changed.status_code == 200, changed.text
    assert (changed.json()["enabled"], changed.json()["value"]) == (False, 0.25)
    assert api.patch(path, json={"kind": "nan"}).json()["error"]["message"].startswith("kind:")
    assert api.delete(path).json() == {"deleted": created["id"]}
    assert api.get(path).status_code == 404
    assert api.delete(path).status_code == 404


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"kind": "sometimes"}, "kind"),
        ({"kind": "threshold", "metric": "reward", "op": "over", "value": 1}, "op"),
        ({"kind": "threshold", "metric": "reward", "op": "above"}, "value"),
        ({"kind": "change", "metric": "loss", "percent": -5, "window": 10}, "percent"),
        ({"kind": "change", "metric": "loss", "percent": 5, "window": 0}, "window"),
        ({"kind": "stall", "metric": "loss", "seconds": 0}, "seconds"),
        ({"kind": "nan", "metric": ""}, "metric"),
        ({"kind": "nan", "metric": "loss", "run": "no such run"}, "run"),
        ({"kind": "nan", "metric": "loss", "run": "r9"}, "run"),
        ({"kind": "nan", "metric": "loss", "percent": 3}, "percent"),
        ({"kind": "nan", "metric": "loss", "level": "fatal"}, "level"),
        ({"kind": "eval_drop", "points": 5}, "baseline"),
        ({"kind": "eval_drop", "points": 5, "baseline": {"run": "r9", "round_id": "v"}},
         "baseline.run"),
    ],
)  # fmt: skip
def test_a_bad_rule_is_a_422_naming_its_field(
    api: TestClient, body: dict[str, Any], field: str
) -> None:
    arena(api, 1, {"loss": 1.0})
    answer = api.post(RULES, json=body)
    assert answer.status_code == 422, answer.text
    assert field in [d["field"] for d in answer.json()["error"]["details"]], answer.text
    assert len(api.get(RULES).json()["rules"]) == 2  # nothing stored


def test_a_threshold_fires_once_per_episode_and_resolves(api: TestClient) -> None:
    arena(api, 1, {"reward": 1.0})
    made = rule(api, kind="threshold", metric="reward", op="below", value=0.5)
    for step, value in [(2, 0.4), (3, 0.3), (4, 0.1), (5, 0.2)]:
        arena(api, step, {"reward": value})
    opened = wait_for(lambda: alerts(api))
    assert [(a["alert_id"], a["level"], a["step"]) for a in opened] == [
        (f"rule-{made['id']}-1", "warn", 2)
    ]
    assert "reward below 0.5" in opened[0]["title"]
    arena(api, 6, {"reward": 0.9})
    done = wait_for(lambda: len(alerts(api)) == 2 and alerts(api))
    assert [(a["alert_id"], a["level"], a["step"]) for a in done] == [
        (f"rule-{made['id']}-1", "warn", 2),
        (f"rule-{made['id']}-1-resolved", "info", 6),
    ]
    arena(api, 7, {"reward": 0.1})  # a new episode
    again = wait_for(lambda: len(alerts(api)) == 3 and alerts(api))
    assert again[-1]["alert_id"] == f"rule-{made['id']}-2"
    episodes = api.get(f"{RULES}/{made['id']}").json()["episodes"]
    assert [(e["opened_step"], e["resolved_step"]) for e in episodes] == [(7, None), (2, 6)]
    # The reports page's data: the run's alerts count them too.
    assert api.get(f"{P}/runs/r1").json()["alert_count"] == 3


def test_the_rule_list_counts_each_rules_open_episodes(api: TestClient) -> None:
    arena(api, 1, {"reward": 1.0})
    made = rule(api, kind="threshold", metric="reward", op="below", value=0.5)

    def open_of(rule_id: int) -> int:
        found = {r["id"]: r for r in api.get(RULES).json()["rules"]}
        count: int = found[rule_id]["open_episodes"]
        return count

    assert open_of(made["id"]) == 0
    arena(api, 2, {"reward": 0.1})
    assert wait_for(lambda: open_of(made["id"]) == 1)
    assert [r["open_episodes"] for r in api.get(RULES).json()["rules"]][:2] == [0, 0]
    arena(api, 3, {"reward": 0.9})
    assert wait_for(lambda: open_of(made["id"]) == 0)


def test_a_nan_loss_from_the_sdk_fires_the_default_rule(api: TestClient) -> None:
    assert api.post(P + "/runs", json={"run": "sdk"}).status_code in (200, 201)
    token = {"Authorization": f"Bearer {api.post(P + '/runs/sdk/attempts').json()['token']}"}
    body = {
        "series": [{"name": "train/loss", "steps": [1], "values": [0.5]}],
        "invalid": [{"name": "train/loss", "steps": [2, 3], "kinds": ["nan", "inf"]}],
    }
    assert api.post("/api/v1/ingest/scalars", json=body, headers=token).status_code == 200
    found = wait_for(lambda: alerts(api, "sdk"))
    assert [(a["level"], a["step"]) for a in found] == [("error", 2)]
    assert found[0]["title"] == "train/loss is NaN or infinite at step 2"
    body = {"series": [{"name": "train/loss", "steps": [4], "values": [0.4]}]}
    api.post("/api/v1/ingest/scalars", json=body, headers=token)
    assert wait_for(lambda: len(alerts(api, "sdk")) == 2)
    assert alerts(api, "sdk")[1]["alert_id"].endswith("-resolved")


def test_a_change_rule_and_a_rule_of_one_run(api: TestClient) -> None:
    arena(api, 0, {"loss": 1.0}, run="a")
    arena(api, 0, {"loss": 1.0}, run="b")
    rule(api, kind="change", metric="loss", percent=50, window=10, direction="up", run="b")
    for step, value in [(1, 1.0), (2, 1.2), (3, 1.8)]:  # the rule sees step 1 first
        arena(api, step, {"loss": value}, run="a")
        arena(api, step, {"loss": value}, run="b")
    found = wait_for(lambda: alerts(api, "b"))
    assert [a["step"] for a in found] == [3]
    assert "+80.0%" in found[0]["text"]
    time.sleep(0.3)
    assert alerts(api, "a") == []


def test_stall_and_stale_heartbeat_are_found_by_the_periodic_check(
    api: TestClient, settings: Settings
) -> None:
    assert api.post(P + "/runs", json={"run": "sdk"}).status_code in (200, 201)
    token = {"Authorization": f"Bearer {api.post(P + '/runs/sdk/attempts').json()['token']}"}
    rule(api, kind="stall", metric="reward", seconds=0.5)
    body = {"series": [{"name": "reward", "steps": [1], "values": [0.5]}]}
    api.post("/api/v1/ingest/scalars", json=body, headers=token)
    health = {"queued": 0, "sent": 1, "dropped": 0, "failed_sends": 0, "queue_size": 0,
              "queue_capacity": 10, "interval": 10}  # fmt: skip
    assert api.post("/api/v1/ingest/heartbeat", json=health, headers=token).status_code == 200
    database = api.app.state.tuneplane.database  # type: ignore[attr-defined]
    database.run_write(
        lambda c: c.execute(update(runs).values(health_at=time.time() - 120))
    )  # a heartbeat two minutes old
    found = wait_for(lambda: len(alerts(api, "sdk")) == 2 and alerts(api, "sdk"))
    titles = sorted(a["title"] for a in found)
    assert titles[0].startswith("heartbeat stale for ")
    assert titles[1].startswith("reward: no point for ")
    # A point resolves the stall; a fresh heartbeat resolves the other.
    api.post("/api/v1/ingest/scalars", json={"series": [{"name": "reward", "steps": [2],
             "values": [0.6]}]}, headers=token)  # fmt: skip
    api.post("/api/v1/ingest/heartbeat", json=health, headers=token)
    done = wait_for(lambda: len(alerts(api, "sdk")) == 4 and alerts(api, "sdk"))
    assert sum(a["alert_id"].endswith("-resolved") for a in done) == 2


def test_a_stall_after_a_late_final_status_s_end_is_withdrawn(api: TestClient) -> None:
    """Points delivered late keep the time they were logged at, so a series of a run whose
    final status has not yet arrived looks stalled; the status, with the time the run
    ended, withdraws the stall that opened after that end (it was false)."""
    assert api.post(P + "/runs", json={"run": "late"}).status_code in (200, 201)
    token = {"Authorization": f"Bearer {api.post(P + '/runs/late/attempts').json()['token']}"}
    rule(api, kind="stall", metric="reward", seconds=0.5)
    logged = time.time()
    body = {
        "series": [{"name": "reward", "steps": [1], "values": [0.5]}],
        "reported_at": {"steps": [1], "times": [logged]},
    }
    assert api.post("/api/v1/ingest/scalars", json=body, headers=token).status_code == 200
    (stalled,) = wait_for(lambda: alerts(api, "late"))
    assert stalled["title"].startswith("reward: no point for ")
    ended = {"status": "succeeded", "exit_code": 0, "time": logged + 0.1}
    assert api.post("/api/v1/ingest/status", json=ended, headers=token).status_code == 200
    assert alerts(api, "late") == []
    time.sleep(0.5)  # the periodic check does not open it again: the run has ended
    assert alerts(api, "late") == []


def _round(api: TestClient, token: dict[str, str], round_id: str, wins: int) -> None:
    events: list[dict[str, Any]] = [
        {"event_id": f"{round_id}-pop", "type": "population", "round_id": round_id,
         "expected": 10, "digests": dict.fromkeys(("dataset", "cohort", "verifier", "settings"),
                                                  "ab" * 32)},
    ]  # fmt: skip
    events += [
        {"event_id": f"{round_id}-{i}", "type": "trial", "round_id": round_id,
         "trial_id": f"t{i}", "trial_attempt": 0,
         "status": "success" if i < wins else "failure", "eligible": True}
        for i in range(10)
    ]  # fmt: skip
    sent = api.post("/api/v1/ingest/observations", json={"events": events}, headers=token)
    assert sent.status_code == 200, sent.text


def test_an_evaluation_round_that_drops_against_its_baseline(api: TestClient) -> None:
    assert api.post(P + "/runs", json={"run": "sdk"}).status_code in (200, 201)
    token = {"Authorization": f"Bearer {api.post(P + '/runs/sdk/attempts').json()['token']}"}
    _round(api, token, "base", wins=8)
    rule(api, kind="eval_drop", points=15, baseline={"run": "sdk", "round_id": "base"})
    _round(api, token, "r2", wins=7)  # 10 points down: within the rule
    time.sleep(0.5)
    assert alerts(api, "sdk") == []
    _round(api, token, "r3", wins=5)  # 30 points down
    found = wait_for(lambda: alerts(api, "sdk"))
    assert len(found) == 1
    assert found[0]["title"].startswith("round r3 (execution attempt 1): success rate 30.0")


def test_a_rule_the_server_cannot_read_never_breaks_ingest(api: TestClient) -> None:
    arena(api, 1, {"reward": 1.0})
    made = rule(api, kind="threshold", metric="reward", op="above", value=5)
    database = api.app.state.tuneplane.database  # type: ignore[attr-defined]
    broken = {"kind": "threshold", "metric": "reward", "op": "sideways"}
    database.run_write(
        lambda c: c.execute(update(alert_rules).where(alert_rules.c.id == made["id"])
                            .values(spec=broken))
    )  # fmt: skip
    rule(api, kind="threshold", metric="reward", op="above", value=10)
    arena(api, 2, {"reward": 20.0})
    found = wait_for(lambda: alerts(api))
    assert [a["title"] for a in found] == ["reward above 10 at step 2"]
    assert api.get(RULES).status_code == 200
