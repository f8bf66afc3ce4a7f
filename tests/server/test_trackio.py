"""The Trackio protocol's routes in-process, on SQLite and PostgreSQL: the answers a Trackio
client (0.40.0 to 0.43.0) reads, who may write with which write token, what is stored, left
out or refused. The real clients against a real server are in tests/trackio/."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from tests.conftest import INGEST_SECRET
from tests.server.conftest import OPEN_PROJECT, SECRET_PROJECT, World
from tuneplane.server.app import create_app
from tuneplane.server.settings import Settings
from tuneplane.store.schema import runs

TOKEN = "x-trackio-write-token"
Admin = tuple[TestClient, dict[str, str]]


@pytest.fixture
def admin(client: TestClient, settings: Settings) -> Admin:
    """The app with the admin key: in Authorization for tuneplane's API, in the write token
    header for Trackio's routes (which read only that)."""
    key = (settings.data_dir / "admin.key").read_text().strip()
    client.headers["Authorization"] = f"Bearer {key}"
    return client, {TOKEN: key}


def key_of(world: World, caller: str) -> dict[str, str]:
    """The caller's API key as a Trackio client sends it."""
    return {TOKEN: world.callers[caller]["Authorization"].removeprefix("Bearer ")}


def call(client: TestClient, name: str, token: dict[str, str], **kwargs: Any) -> Any:
    return client.post(f"/api/{name}", json={"args": [], "kwargs": kwargs}, headers=token)


def entry(project: str, run: str, step: int, log_id: str, **metrics: Any) -> dict[str, Any]:
    return {
        "project": project, "run": run, "run_id": "0f" * 16, "step": step,
        "metrics": metrics, "config": None, "log_id": log_id,
    }  # fmt: skip


def test_version_says_http_api_1_to_anyone(client: TestClient) -> None:
    answer = client.get("/version", headers={"Authorization": ""})
    assert answer.status_code == 200
    assert answer.json()["api_version"] == 1
    assert answer.json()["api_transport"] == "http"
    # As a Trackio 0.43.0 server answers: writes are never paused for an upgrade here.
    assert (answer.json()["version"], answer.json()["writes_paused"]) == ("0.43.0", False)


def test_resent_logs_and_alerts_are_duplicates(admin: Admin) -> None:
    client, token = admin
    logs = [entry("tk", "r", 0, "a0", loss=1.0), entry("tk", "r", 1, "a1", loss=0.5)]
    logs[0]["config"] = {"lr": 0.1, "_Created": "then"}
    # Positional args, as Trackio's server also takes them.
    first = client.post("/api/bulk_log", json={"args": [logs, None]}, headers=token)
    assert first.status_code == 200, first.text
    assert first.json()["data"] == {"new": 2, "duplicate": 0, "runs_created": 1, "dropped": []}
    again = call(client, "bulk_log", token, logs=logs, hf_token=None)
    assert again.json()["data"]["new"] == 0
    assert again.json()["data"]["duplicate"] == 2
    alert = {
        "project": "tk", "run": "r", "title": "t", "text": None, "level": "warn",
        "step": 1, "timestamp": "2026-01-01T00:00:00+00:00", "alert_id": "al1",
    }  # fmt: skip
    for expected in (1, 0):
        answer = call(client, "bulk_alert", token, alerts=[alert])
        assert answer.json()["data"]["new"] == expected, answer.text
    summary = call(client, "get_run_summary", token, project="tk", run_id="r")
    assert summary.json()["data"]["last_step"] == 1
    assert summary.json()["data"]["config"] == {"lr": 0.1, "_Created": "then"}
    runs = call(client, "get_runs_for_project", token, project="tk").json()["data"]
    assert [(r["id"], r["name"]) for r in runs] == [("r", "r")]
    stored = client.get("/api/v1/projects/tk/runs/r").json()
    assert (stored["point_count"], stored["alert_count"]) == (2, 1)
    # Made as the run API makes projects: private by default.
    assert (
        client.get("/api/v1/projects/tk/runs/r", headers={"Authorization": ""}).status_code == 404
    )


def test_a_resumed_run_keeps_its_config_and_the_answer_says_so(admin: Admin) -> None:
    client, token = admin
    for step, created in enumerate(("first", "second")):
        logs = [entry("tk", "r", step, f"c{step}", loss=1.0)]
        logs[0]["config"] = {"lr": 0.1, "_Created": created}
        answer = call(client, "bulk_log", token, logs=logs)
        assert answer.status_code == 200, answer.text
    assert answer.json()["data"]["new"] == 1
    assert answer.json()["data"]["dropped"] == [
        {"field": "logs[0].config", "rule": "the run exists with another config, which it keeps"}
    ]
    assert client.get("/api/v1/projects/tk/runs/r").json()["config"]["_Created"] == "first"


def test_values_that_are_no_number_are_left_out_and_named(admin: Admin) -> None:
    client, token = admin
    image = {"_type": "trackio.image", "file_path": "x.png"}
    logs = [entry("tk", "r", 0, "v0", loss=1.0, img=image, nan="NaN", text="hi", flag=True)]
    answer = call(client, "bulk_log", token, logs=logs)
    assert answer.status_code == 200, answer.text
    dropped = {d["field"]: d["rule"] for d in answer.json()["data"]["dropped"]}
    assert dropped == {
        "logs[0].metrics.img": "trackio.image: not stored",
        "logs[0].metrics.text": "str, not a number",
        "logs[0].metrics.flag": "a boolean, not a number",
    }
    # NaN (as the client writes it) is an invalid point, as the SDK's NaN is.
    metrics = client.get("/api/v1/projects/tk/runs/r/metrics").json()
    assert [(m["metric"], m["invalid_count"]) for m in metrics] == [("loss", 0), ("nan", 1)]


def test_system_metrics_are_system_series_at_the_runs_step(admin: Admin) -> None:
    client, token = admin
    call(client, "bulk_log", token, logs=[entry("tk", "r", 7, "s0", loss=1.0)])
    sample = {"project": "tk", "run": "r", "metrics": {"gpu": {"0": {"util": 50}}},
              "timestamp": "2026-01-01T00:00:00+00:00", "log_id": "sys0"}  # fmt: skip
    for expected in (1, 0):
        answer = call(client, "bulk_log_system", token, logs=[sample])
        assert answer.json()["data"]["new"] == expected, answer.text
    metrics = client.get("/api/v1/projects/tk/runs/r/metrics").json()
    found = {m["metric"]: (m["count"], m["last_step"]) for m in metrics}
    assert found == {"loss": (1, 7), "system/gpu/0/util": (1, 7)}


def test_bad_payloads_are_refused_naming_the_field(admin: Admin) -> None:
    client, token = admin
    cases: list[tuple[Any, str]] = [
        ([entry("tk", "r", -1, "b", x=1)], "logs[0].step"),
        # Any name people give is kept (test_trackio_client.py); a control character is not.
        ([entry("tab\there", "r", 0, "b", x=1)], "logs[0].project"),
        ([{**entry("tk", "r", 0, "b"), "metrics": 3}], "logs[0].metrics"),
        ("nope", "logs"),
    ]
    for logs, field in cases:
        answer = call(client, "bulk_log", token, logs=logs)
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["details"][0]["field"] == field
    assert client.post("/api/bulk_log", json=[1], headers=token).status_code == 400
    assert client.get("/api/v1/projects/tk/runs").status_code == 404  # nothing stored


def test_media_is_refused_with_a_reason(admin: Admin) -> None:
    client, token = admin
    answer = call(client, "bulk_upload_media", token, uploads=[])
    assert answer.status_code == 422
    assert "does not store Trackio media" in answer.json()["error"]["message"]
    files = client.post("/api/upload", files={"files": ("a.png", b"png")}, headers=token)
    assert files.status_code == 422


def test_no_api_key_no_call(client: TestClient) -> None:
    for headers in (
        {},
        {TOKEN: "tpk_unknown"},
        {TOKEN: INGEST_SECRET},  # the Arena secret writes POST /ingest only
        {"Authorization": f"Bearer {INGEST_SECRET}"},
    ):
        for name in ("bulk_log", "get_runs_for_project", "upload"):
            answer = client.post(
                f"/api/{name}",
                json={"kwargs": {"logs": [entry("tk", "r", 0, "n", x=1)], "project": "tk"}},
                headers={"Authorization": "", **headers},
            )
            assert answer.status_code == 401, (headers, answer.text)
            assert answer.json()["error"]["message"].startswith(f"{TOKEN}: ")


WRITES = [
    ("owner", SECRET_PROJECT, 200),
    ("editor", SECRET_PROJECT, 200),
    ("admin", SECRET_PROJECT, 200),
    ("viewer", SECRET_PROJECT, 403),
    ("owner_read_key", SECRET_PROJECT, 403),
    ("outsider", SECRET_PROJECT, 403),  # not the rest of the API's 404: see trackio.py
    ("outsider", OPEN_PROJECT, 403),
    ("outsider", "brand-new", 200),
    ("owner_read_key", "other-new", 403),
]


def test_who_may_write_and_read_with_which_key(world: World) -> None:
    client = world.client
    for caller, project, status in WRITES:
        logs = [entry(project, "r1", 9, f"w-{caller}", x=1)]
        answer = call(client, "bulk_log", key_of(world, caller), logs=logs)
        assert answer.status_code == status, (caller, project, answer.text)
        if status == 403:
            assert f"project {project!r}: this API key may not write to it" in answer.text
    # The new project is the outsider's, and private.
    made = client.get("/api/v1/projects/brand-new/runs/r1", headers=world.callers["outsider"])
    assert made.json()["you"]["manage"] is True
    assert (
        client.get("/api/v1/projects/brand-new/runs/r1", headers={"Authorization": ""}).status_code
        == 404
    )
    # A project the key may not read answers as a missing one.
    outsider = key_of(world, "outsider")
    runs = call(client, "get_runs_for_project", outsider, project=SECRET_PROJECT)
    assert runs.json() == {"data": []}
    summary = call(client, "get_run_summary", outsider, project=SECRET_PROJECT, run="r1")
    assert summary.json()["data"]["last_step"] is None
    viewer = call(client, "get_runs_for_project", key_of(world, "viewer"), project=SECRET_PROJECT)
    assert [r["name"] for r in viewer.json()["data"]] == ["r1", "r2"]


def _status(client: TestClient, run: str) -> str | None:
    status: str | None = client.get(f"/api/v1/projects/tk/runs/{run}").json()["status"]
    return status


def test_a_trackio_run_says_its_end_is_unknown_and_a_reported_status_wins(admin: Admin) -> None:
    """No Trackio release tells its server that a run finished, so a run it writes is
    ``unknown``: not ``running`` forever, not a status nobody reported. A status an SDK
    attempt reports is the run's, whichever came first."""
    client, token = admin
    assert call(client, "bulk_log", token, logs=[entry("tk", "r", 0, "a0", x=1)]).status_code == 200
    alert = {"project": "tk", "run": "only-alerts", "title": "t", "level": "warn", "step": 0}
    assert call(client, "bulk_alert", token, alerts=[{**alert, "alert_id": "al"}]).is_success
    assert (_status(client, "r"), _status(client, "only-alerts")) == ("unknown", "unknown")
    found = client.get("/api/v1/projects/tk/runs", params={"q": "status=unknown"}).json()
    assert sorted(r["run"] for r in found) == ["only-alerts", "r"]

    assert client.post("/api/v1/projects/tk/runs", json={"run": "sdk"}).status_code == 201
    ingest = {"Authorization": f"Bearer {start(client, 'sdk')}"}
    assert client.post(
        "/api/v1/ingest/status", json={"status": "running"}, headers=ingest
    ).is_success
    assert call(client, "bulk_log", token, logs=[entry("tk", "sdk", 5, "b0", x=1)]).is_success
    assert _status(client, "sdk") == "running"
    # An SDK attempt that resumes the Trackio run reports its own status.
    ingest = {"Authorization": f"Bearer {start(client, 'r')}"}
    done = {"status": "succeeded", "exit_code": 0}
    assert client.post("/api/v1/ingest/status", json=done, headers=ingest).is_success
    assert call(client, "bulk_log", token, logs=[entry("tk", "r", 1, "a1", x=1)]).is_success
    assert _status(client, "r") == "succeeded"


def start(client: TestClient, run: str) -> str:
    """A new attempt of the run; its ingest token."""
    answer = client.post(f"/api/v1/projects/tk/runs/{run}/attempts")
    assert answer.status_code == 201, answer.text
    token: str = answer.json()["token"]
    return token


def test_stall_and_heartbeat_rules_still_watch_a_trackio_run(settings: Settings) -> None:
    """``unknown`` is no end: a run that stops sending points is what a ``stall`` rule is
    for, and for a Trackio run (no heartbeat) the only sign that it died."""
    with TestClient(create_app(replace(settings, alert_check_interval=0.2))) as client:
        key = (settings.data_dir / "admin.key").read_text().strip()
        client.headers["Authorization"] = f"Bearer {key}"
        token = {TOKEN: key}
        assert call(client, "bulk_log", token, logs=[entry("tk", "r", 0, "a0", loss=1)]).is_success
        stall = {"kind": "stall", "metric": "loss", "seconds": 0.5}
        assert client.post("/api/v1/projects/tk/alert-rules", json=stall).status_code == 201
        assert call(client, "bulk_log", token, logs=[entry("tk", "r", 1, "a1", loss=1)]).is_success
        assert _status(client, "r") == "unknown"
        deadline = time.monotonic() + 10
        while not (found := client.get("/api/v1/projects/tk/runs/r/alerts").json()):
            assert time.monotonic() < deadline, "the stall rule never fired"
            time.sleep(0.1)
        assert found[0]["title"].startswith("loss: no point for "), found
        # An SDK attempt that resumes the run heartbeats before it reports a status: its
        # heartbeat is watched from the first one.
        ingest = {"Authorization": f"Bearer {start(client, 'r')}"}
        health = {"queued": 0, "sent": 1, "dropped": 0, "failed_sends": 0, "queue_size": 0,
                  "queue_capacity": 10, "interval": 10}  # fmt: skip
        assert client.post("/api/v1/ingest/heartbeat", json=health, headers=ingest).is_success
        database = client.app.state.tuneplane.database  # type: ignore[attr-defined]
        database.run_write(lambda c: c.execute(update(runs).values(health_at=time.time() - 120)))
        assert _status(client, "r") == "unknown"
        while not any("heartbeat stale" in a["title"] for a in _alerts(client)):
            assert time.monotonic() < deadline + 10, "the heartbeat rule never fired"
            time.sleep(0.1)


def _alerts(client: TestClient) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = client.get("/api/v1/projects/tk/runs/r/alerts").json()
    return found
