"""The run protocol's server side (docs/sdk-protocol.md), on SQLite and PostgreSQL."""

import os
import stat
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tuneplane.server.app import create_app
from tuneplane.server.run_json import transport
from tuneplane.server.settings import Settings

RUN = "/api/v1/projects/demo/runs/grpo-7"


def admin_key(settings: Settings) -> str:
    return (settings.data_dir / "admin.key").read_text().strip()


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    """The app with the admin key as the default credential."""
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        client.headers["Authorization"] = f"Bearer {admin_key(settings)}"
        yield client


def start(api: TestClient, run: str = "grpo-7", config: Any = None) -> dict[str, str]:
    """Create (or resume) a run and start an attempt; the attempt's token headers."""
    created = api.post("/api/v1/projects/demo/runs", json={"run": run, "config": config})
    assert created.status_code in (200, 201), created.text
    attempt = api.post(f"/api/v1/projects/demo/runs/{run}/attempts")
    assert attempt.status_code == 201, attempt.text
    return {"Authorization": f"Bearer {attempt.json()['token']}"}


def scalars(api: TestClient, token: dict[str, str], body: dict[str, Any]) -> Any:
    return api.post("/api/v1/ingest/scalars", json=body, headers=token)


def summary(api: TestClient, metric: str, run: str = "grpo-7") -> dict[str, Any]:
    found: dict[str, Any] = api.get(f"/api/v1/projects/demo/runs/{run}/metrics/{metric}").json()
    return found


# --- credentials ------------------------------------------------------------------------------


def test_admin_key_file_is_private_and_stable(settings: Settings) -> None:
    with TestClient(create_app(settings)):
        pass
    path = settings.data_dir / "admin.key"
    first = path.read_text()
    assert first.startswith("tpk_")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with TestClient(create_app(settings)):
        pass
    assert path.read_text() == first


def test_creating_runs_needs_a_valid_api_key(api: TestClient) -> None:
    body = {"run": "r1"}
    for headers in ({"Authorization": ""}, {"Authorization": "Bearer tpk_wrong"}):
        response = api.post("/api/v1/projects/demo/runs", json=body, headers=headers)
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthorized"
    assert api.get("/api/v1/projects").json() == []


def test_create_then_resume_and_config_is_fixed(api: TestClient) -> None:
    first = api.post("/api/v1/projects/demo/runs", json={"run": "r1", "config": {"lr": 1e-5}})
    assert first.status_code == 201
    assert first.json()["config"] == {"lr": 1e-5}
    assert first.json()["transport"]["state"] == "unknown"
    again = api.post("/api/v1/projects/demo/runs", json={"run": "r1", "config": {"lr": 1e-5}})
    assert again.status_code == 200
    changed = api.post("/api/v1/projects/demo/runs", json={"run": "r1", "config": {"lr": 2e-5}})
    assert changed.status_code == 409
    assert "cannot change" in changed.json()["error"]["message"]
    bad = api.post("/api/v1/projects/demo/runs", json={"run": "no spaces"})
    assert bad.status_code == 422
    assert bad.json()["error"]["details"][0]["field"] == "run"


def test_attempts_carry_the_ingest_url_for_training_nodes(settings: Settings) -> None:
    nodes = replace(settings, ingest_url="http://10.0.0.5:8000")
    with TestClient(create_app(nodes)) as client:
        client.headers["Authorization"] = f"Bearer {admin_key(nodes)}"
        client.post("/api/v1/projects/demo/runs", json={"run": "grpo-7"})
        assert client.post(RUN + "/attempts").json()["ingest_url"] == "http://10.0.0.5:8000"


def test_attempts_count_up_and_tokens_are_distinct(api: TestClient) -> None:
    api.post("/api/v1/projects/demo/runs", json={"run": "grpo-7"})
    answers = [api.post(RUN + "/attempts").json() for _ in range(3)]
    assert [a["attempt"] for a in answers] == [1, 2, 3]
    assert len({a["token"] for a in answers}) == 3
    assert all(a["token"].startswith("tpi_") for a in answers)
    assert api.get(RUN).json()["attempt"] == 3
    assert api.post("/api/v1/projects/demo/runs/missing/attempts").status_code == 404


def test_a_retried_start_with_the_same_key_returns_the_same_attempt(api: TestClient) -> None:
    api.post("/api/v1/projects/demo/runs", json={"run": "grpo-7"})
    body = {"series": [{"name": "loss", "steps": [1], "values": [0.5]}]}
    first = api.post(RUN + "/attempts", headers={"Idempotency-Key": "k-1"}).json()
    again = api.post(RUN + "/attempts", headers={"Idempotency-Key": "k-1"}).json()
    assert (first["attempt"], again["attempt"]) == (1, 1)
    assert api.get(RUN).json()["attempt"] == 1
    # The token of the lost answer is replaced by the one delivered.
    lost = {"Authorization": f"Bearer {first['token']}"}
    delivered = {"Authorization": f"Bearer {again['token']}"}
    assert scalars(api, lost, body).status_code == 401
    assert scalars(api, delivered, body).status_code == 200
    other = api.post(RUN + "/attempts", headers={"Idempotency-Key": "k-2"}).json()
    assert other["attempt"] == 2
    bad = api.post(RUN + "/attempts", headers={"Idempotency-Key": "not a key!"})
    assert bad.status_code == 422
    assert bad.json()["error"]["details"][0]["field"] == "Idempotency-Key"
    assert api.get(RUN).json()["attempt"] == 2


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/v1/projects"),
        ("GET", RUN),
        ("GET", RUN + "/logs"),
        ("POST", "/api/v1/projects/demo/runs"),
        ("POST", RUN + "/attempts"),
        ("POST", "/ingest"),
    ],
)
def test_the_web_guard_refuses_ingest_tokens(api: TestClient, method: str, path: str) -> None:
    token = start(api)
    response = api.request(method, path, headers=token, json={"run": "other"})
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "ingest_token"


def test_a_token_writes_only_to_its_own_run(api: TestClient) -> None:
    token_a = start(api, "run-a")
    start(api, "run-b")
    body = {"series": [{"name": "loss", "steps": [1], "values": [0.5]}]}
    assert scalars(api, token_a, body).status_code == 200
    runs = {r["run"]: r for r in api.get("/api/v1/projects/demo/runs").json()}
    assert (runs["run-a"]["point_count"], runs["run-b"]["point_count"]) == (1, 0)
    assert api.get("/api/v1/projects/demo/runs/run-b/metrics").json() == []


def test_ingest_routes_refuse_other_credentials(api: TestClient, settings: Settings) -> None:
    body = {"series": [{"name": "loss", "steps": [1], "values": [0.5]}]}
    key = {"Authorization": f"Bearer {admin_key(settings)}"}
    for headers in ({"Authorization": ""}, key, {"Authorization": "Bearer tpi_forged"}):
        assert scalars(api, headers, body).status_code == 401


def test_expired_tokens_are_refused(settings: Settings) -> None:
    short = replace(settings, ingest_token_days=-1.0)
    with TestClient(create_app(short), raise_server_exceptions=False) as client:
        client.headers["Authorization"] = f"Bearer {admin_key(short)}"
        token = start(client)
        response = scalars(client, token, {"series": [{"name": "m", "steps": [1], "values": [1]}]})
    assert response.status_code == 401
    assert "expired" in response.json()["error"]["message"]


# --- scalars ----------------------------------------------------------------------------------


def test_scalars_are_stored_and_readable(api: TestClient) -> None:
    token = start(api)
    body = {"series": [{"name": "train/loss", "steps": [1, 2, 3], "values": [0.7, 0.6, 0.5]}]}
    assert scalars(api, token, body).json() == {"points": {"new": 3, "corrected": 0}, "invalid": 0}
    assert summary(api, "train/loss") | {"metric": None} == {
        "metric": None,
        "count": 3,
        "invalid_count": 0,
        "corrected": 0,
        "min": 0.5,
        "max": 0.7,
        "last": 0.5,
        "first_step": 1,
        "last_step": 3,
    }
    points = api.get(RUN + "/points/train/loss").json()["points"]
    assert [(p["step"], p["value"]) for p in points] == [(1, 0.7), (2, 0.6), (3, 0.5)]
    run = api.get(RUN).json()
    assert (run["point_count"], run["last_step"]) == (3, 3)


def test_a_reported_step_is_a_correction_that_repairs_the_extrema(api: TestClient) -> None:
    token = start(api)
    scalars(api, token, {"series": [{"name": "m", "steps": [1, 2, 3, 4], "values": [5, -9, 2, 7]}]})
    # Replace the minimum and the last value; the maximum stays.
    answer = scalars(api, token, {"series": [{"name": "m", "steps": [2, 4], "values": [1, 3]}]})
    assert answer.json() == {"points": {"new": 0, "corrected": 2}, "invalid": 0}
    state = summary(api, "m")
    assert (state["count"], state["min"], state["max"], state["last"]) == (4, 1.0, 5.0, 3.0)
    assert state["corrected"] == 2
    # Replace the maximum too; a value that turns out NaN is removed: both are corrections.
    scalars(api, token, {"series": [{"name": "m", "steps": [1], "values": [0]}]})
    scalars(api, token, {"series": [], "invalid": [{"name": "m", "steps": [3], "kinds": ["nan"]}]})
    state = summary(api, "m")
    assert (state["min"], state["max"], state["count"], state["corrected"]) == (0.0, 3.0, 3, 4)
    scalars(api, token, {"series": [{"name": "m", "steps": [3], "values": [2]}]})
    assert summary(api, "m")["corrected"] == 4  # a new value where there was none
    assert api.get(RUN).json()["point_count"] == 4
    values = [p["value"] for p in api.get(RUN + "/points/m").json()["points"]]
    assert values == [0.0, 1.0, 2.0, 3.0]


def test_invalid_numbers_are_recorded_never_zero(api: TestClient) -> None:
    token = start(api)
    body = {
        "series": [{"name": "loss", "steps": [1, 3], "values": [0.5, 0.4]}],
        "invalid": [{"name": "loss", "steps": [2, 4], "kinds": ["nan", "inf"]}],
    }
    assert scalars(api, token, body).json()["invalid"] == 2
    state = summary(api, "loss")
    assert (state["count"], state["invalid_count"], state["min"], state["last"]) == (2, 2, 0.4, 0.4)
    assert api.get(RUN + "/invalid/loss").json() == [
        {"step": 2, "kind": "nan"},
        {"step": 4, "kind": "inf"},
    ]
    assert [p["step"] for p in api.get(RUN + "/points/loss").json()["points"]] == [1, 3]
    # A later valid report at an invalid step corrects it, and the other way round.
    scalars(api, token, {"series": [{"name": "loss", "steps": [2], "values": [0.45]}]})
    scalars(api, token, {"invalid": [{"name": "loss", "steps": [3], "kinds": ["-inf"]}]})
    state = summary(api, "loss")
    assert (state["count"], state["invalid_count"], state["min"]) == (2, 2, 0.45)
    assert api.get(RUN + "/invalid/loss").json() == [
        {"step": 3, "kind": "-inf"},
        {"step": 4, "kind": "inf"},
    ]


def test_batch_point_limit(api: TestClient) -> None:
    token = start(api)
    full = {"series": [{"name": "m", "steps": list(range(2048)), "values": [1.0] * 2048}]}
    assert scalars(api, token, full).status_code == 200
    over = {
        "series": [{"name": "a", "steps": list(range(2000)), "values": [1.0] * 2000}],
        "invalid": [{"name": "b", "steps": list(range(49)), "kinds": ["nan"] * 49}],
    }
    response = scalars(api, token, over)
    assert response.status_code == 422
    assert "2048" in response.json()["error"]["message"]
    assert [m["metric"] for m in api.get(RUN + "/metrics").json()] == ["m"]


def test_a_run_admits_at_most_4096_series(api: TestClient) -> None:
    token = start(api)
    for part in range(2):
        names = [f"s/{part}/{i}" for i in range(2048)]
        body = {"series": [{"name": n, "steps": [0], "values": [1.0]} for n in names]}
        assert scalars(api, token, body).status_code == 200
    assert api.get(RUN).json()["metric_count"] == 4096
    one_more = {
        "series": [
            {"name": "s/0/0", "steps": [1], "values": [2.0]},
            {"name": "extra", "steps": [0], "values": [1.0]},
        ]
    }
    response = scalars(api, token, one_more)
    assert response.status_code == 422
    assert "4096" in response.json()["error"]["message"]
    assert api.get(RUN).json()["metric_count"] == 4096
    assert summary(api, "s/0/0")["count"] == 1  # nothing of the refused batch was stored
    existing_only = {"series": [{"name": "s/1/5", "steps": [1], "values": [2.0]}]}
    assert scalars(api, token, existing_only).status_code == 200


def test_points_keep_the_time_the_client_reported_them_at(api: TestClient) -> None:
    token = start(api)
    body = {
        "series": [{"name": "m", "steps": [1, 2, 3], "values": [0.7, 0.6, 0.5]}],
        "reported_at": {"steps": [1, 2], "times": [1_700_000_000, 1_700_000_001.5]},
    }
    before = time.time()
    assert scalars(api, token, body).status_code == 200
    times = [p["time"] for p in api.get(RUN + "/points/m").json()["points"]]
    assert times[:2] == [1_700_000_000.0, 1_700_000_001.5]
    assert times[2] >= before  # a step it did not time: when the server received it
    # A correction takes the time of its own report.
    again = {
        "series": [{"name": "m", "steps": [1], "values": [0.1]}],
        "reported_at": {"steps": [1], "times": [1_700_000_100]},
    }
    scalars(api, token, again)
    assert api.get(RUN + "/points/m").json()["points"][0]["time"] == 1_700_000_100.0


def _timed(times: object, steps: object = (1,)) -> dict[str, Any]:
    return {
        "series": [{"name": "m", "steps": [1], "values": [1.0]}],
        "reported_at": {"steps": list(steps), "times": times},  # type: ignore[call-overload]
    }


@pytest.mark.parametrize(
    ("body", "field", "rule"),
    [
        (_timed([time.time() * 1000]), "reported_at.times[0]", "past the server's clock"),
        (_timed([time.time() + 2 * 86_400]), "reported_at.times[0]", "at most 86400"),
        (_timed([-1.0]), "reported_at.times[0]", "UNIX seconds"),
        (_timed(["now"]), "reported_at.times[0]", "UNIX seconds"),
        (_timed([1.0, 2.0]), "reported_at.times", "as long as steps"),
        (_timed([1.0], steps=[-3]), "reported_at.steps[0]", "integer"),
        (
            {"series": [{"name": "m", "steps": [1], "values": [1]}], "reported_at": 5},
            "reported_at",
            "object",
        ),
    ],
)
def test_bad_client_times_are_named(
    api: TestClient, body: dict[str, Any], field: str, rule: str
) -> None:
    token = start(api)
    response = scalars(api, token, body)
    assert response.status_code == 422
    detail = response.json()["error"]["details"][0]
    assert detail["field"] == field
    assert rule in detail["rule"]
    assert api.get(RUN + "/metrics").json() == []


def test_a_nan_client_time_is_refused_by_name(api: TestClient) -> None:
    token = start(api)
    raw = (
        b'{"series": [{"name": "m", "steps": [1], "values": [1]}],'
        b' "reported_at": {"steps": [1], "times": [NaN]}}'
    )
    response = api.post("/api/v1/ingest/scalars", content=raw, headers=token)
    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["field"] == "reported_at.times[0]"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"series": [{"name": "m", "steps": [1], "values": ["x"]}]}, "series[0].values[0]"),
        ({"series": [{"name": "m", "steps": [1, 1], "values": [1, 2]}]}, "series[0].steps"),
        ({"series": [{"name": "m", "steps": [-1], "values": [1]}]}, "series[0].steps[0]"),
        ({"series": [{"name": "m", "steps": [1], "values": [1, 2]}]}, "series[0].values"),
        ({"series": [{"name": "a\nb", "steps": [1], "values": [1]}]}, "series[0].name"),
        ({"invalid": [{"name": "m", "steps": [1], "kinds": ["zero"]}]}, "invalid[0].kinds"),
        ({"series": []}, "series"),
    ],
)
def test_bad_scalars_are_named(api: TestClient, body: dict[str, Any], field: str) -> None:
    token = start(api)
    response = scalars(api, token, body)
    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["field"] == field
    assert api.get(RUN + "/metrics").json() == []


def test_nan_literal_in_values_is_refused_by_name(api: TestClient) -> None:
    token = start(api)
    raw = b'{"series": [{"name": "m", "steps": [1], "values": [NaN]}]}'
    response = api.post("/api/v1/ingest/scalars", content=raw, headers=token)
    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["field"] == "series[0].values[0]"


# --- logs -------------------------------------------------------------------------------------


def lines(*texts: str, first: int = 0, stream: str = "stdout") -> dict[str, Any]:
    return {
        "lines": [
            {"seq": first + i, "stream": stream, "time": 1.0 + i, "text": text}
            for i, text in enumerate(texts)
        ]
    }


def test_log_lines_are_stored_once_and_paged(api: TestClient) -> None:
    token = start(api)
    texts = [f"line {i}" for i in range(25)]
    first = api.post("/api/v1/ingest/logs", json=lines(*texts), headers=token)
    assert first.json() == {"new": 25, "duplicate": 0}
    retry = api.post("/api/v1/ingest/logs", json=lines(*texts[:10]), headers=token)
    assert retry.json() == {"new": 0, "duplicate": 10}
    seen, cursor = [], 0
    while True:
        page = api.get(RUN + "/logs", params={"after": cursor, "limit": 10}).json()
        if not page["lines"]:
            break
        seen += [line["text"] for line in page["lines"]]
        cursor = page["next_cursor"]
    assert seen == texts


def test_a_new_attempt_numbers_its_lines_again(api: TestClient) -> None:
    first = start(api)
    api.post("/api/v1/ingest/logs", json=lines("first attempt"), headers=first)
    second = start(api)
    answer = api.post("/api/v1/ingest/logs", json=lines("second attempt"), headers=second)
    assert answer.json()["new"] == 1
    stored = api.get(RUN + "/logs").json()["lines"]
    assert [(line["attempt"], line["seq"], line["text"]) for line in stored] == [
        (1, 0, "first attempt"),
        (2, 0, "second attempt"),
    ]


def test_binary_output_is_kept(api: TestClient) -> None:
    token = start(api)
    body = {
        "lines": [{"seq": 0, "stream": "stderr", "time": 1.0, "text": "\ufffd", "data": "//4A"}]
    }
    assert api.post("/api/v1/ingest/logs", json=body, headers=token).status_code == 200
    (line,) = api.get(RUN + "/logs").json()["lines"]
    assert (line["stream"], line["data"]) == ("stderr", "//4A")


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ({"seq": -1, "stream": "stdout", "time": 1, "text": "x"}, "lines[0].seq"),
        ({"seq": 0, "stream": "stdlog", "time": 1, "text": "x"}, "lines[0].stream"),
        ({"seq": 0, "stream": "stdout", "time": 1, "text": "x" * 16385}, "lines[0].text"),
        ({"seq": 0, "stream": "stdout", "time": 1, "text": "x", "data": "%%"}, "lines[0].data"),
    ],
)
def test_bad_log_lines_are_named(api: TestClient, line: dict[str, Any], field: str) -> None:
    token = start(api)
    response = api.post("/api/v1/ingest/logs", json={"lines": [line]}, headers=token)
    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["field"] == field
    assert api.get(RUN + "/logs").json()["lines"] == []


def read_events(api: TestClient, count: int, headers: dict[str, str]) -> list[tuple[str, str]]:
    """The first ``count`` (id, data) events of the log stream."""
    events: list[tuple[str, str]] = []
    event_id = ""
    with api.stream("GET", RUN + "/logs/stream", headers=headers) as response:
        assert response.headers["x-accel-buffering"] == "no"
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("data: "):
                events.append((event_id, line[6:]))
                if len(events) == count:
                    break
    return events


def test_the_log_stream_resumes_after_last_event_id(api: TestClient) -> None:
    token = start(api)
    api.post("/api/v1/ingest/logs", json=lines("a", "b", "c", "d"), headers=token)
    first = read_events(api, 2, {})
    assert ['"text":"a"' in data for _, data in first] == [True, False]
    resumed = read_events(api, 2, {"Last-Event-ID": first[-1][0]})
    assert ['"text":"c"' in resumed[0][1], '"text":"d"' in resumed[1][1]] == [True, True]


# --- lifecycle and health ---------------------------------------------------------------------


def test_status_is_final_per_attempt_and_shown_for_the_latest(api: TestClient) -> None:
    old = start(api)
    assert (
        api.post("/api/v1/ingest/status", json={"status": "running"}, headers=old).status_code
        == 200
    )
    assert api.get(RUN).json()["status"] == "running"
    new = start(api)
    api.post("/api/v1/ingest/status", json={"status": "running"}, headers=new)
    # The first attempt's late ending is refused: it cannot overwrite the second's status.
    late = api.post("/api/v1/ingest/status", json={"status": "failed", "exit_code": 1}, headers=old)
    assert late.status_code == 409
    assert late.json()["error"]["code"] == "attempt_superseded"
    assert api.get(RUN).json()["status"] == "running"
    done = {"status": "succeeded", "exit_code": 0}
    assert api.post("/api/v1/ingest/status", json=done, headers=new).status_code == 200
    assert api.post("/api/v1/ingest/status", json=done, headers=new).status_code == 200
    changed = api.post("/api/v1/ingest/status", json={"status": "failed"}, headers=new)
    assert changed.status_code == 409
    run = api.get(RUN).json()
    assert (run["status"], run["exit_code"]) == ("succeeded", 0)
    bad = api.post("/api/v1/ingest/status", json={"status": "stopped"}, headers=new)
    assert bad.json()["error"]["details"][0]["field"] == "status"


def heartbeat(**counters: float) -> dict[str, float]:
    base = {"queued": 10, "sent": 10, "dropped": 0, "failed_sends": 0, "queue_size": 0}
    return {**base, "queue_capacity": 100_000, "interval": 10.0, **counters}


def test_heartbeats_show_transport_health(api: TestClient) -> None:
    token = start(api)
    assert api.get(RUN).json()["transport"]["state"] == "unknown"
    api.post("/api/v1/ingest/heartbeat", json=heartbeat(), headers=token)
    shown = api.get(RUN).json()["transport"]
    assert (shown["state"], shown["sent"], shown["queue_capacity"]) == ("ok", 10, 100_000)
    # A failed send that a retry made good is counted but nothing was lost.
    api.post("/api/v1/ingest/heartbeat", json=heartbeat(failed_sends=2), headers=token)
    shown = api.get(RUN).json()["transport"]
    assert (shown["state"], shown["failed_sends"]) == ("ok", 2)
    api.post("/api/v1/ingest/heartbeat", json=heartbeat(dropped=5), headers=token)
    assert api.get(RUN).json()["transport"]["state"] == "lossy"
    bad = api.post("/api/v1/ingest/heartbeat", json=heartbeat(sent=-1), headers=token)
    assert bad.json()["error"]["details"][0]["field"] == "sent"


def test_heartbeats_carry_the_event_queue_when_the_sender_has_one(api: TestClient) -> None:
    token = start(api)
    api.post("/api/v1/ingest/heartbeat", json=heartbeat(), headers=token)
    shown = api.get(RUN).json()["transport"]
    assert (shown["state"], shown["events_sent"], shown["events_dropped"]) == ("ok", None, None)
    events = {"events_queued": 3, "events_sent": 2, "events_dropped": 0}
    events |= {"events_queue_size": 1, "events_queue_capacity": 128}
    api.post("/api/v1/ingest/heartbeat", json=heartbeat(**events), headers=token)
    shown = api.get(RUN).json()["transport"]
    assert shown["state"] == "ok"
    assert {key: shown[key] for key in events} == events
    lost = heartbeat(**{**events, "events_dropped": 1})
    api.post("/api/v1/ingest/heartbeat", json=lost, headers=token)
    assert api.get(RUN).json()["transport"]["state"] == "lossy"
    bad = heartbeat(events_sent=-2)
    refused = api.post("/api/v1/ingest/heartbeat", json=bad, headers=token)
    assert refused.json()["error"]["details"][0]["field"] == "events_sent"


def test_a_stale_heartbeat_is_unknown_never_stopped() -> None:
    health = heartbeat()
    assert transport(health, 1000.0, now=1010.0)["state"] == "ok"
    stale = transport(health, 1000.0, now=1031.0)
    assert stale["state"] == "unknown"
    assert "31 s ago" in str(stale["reason"])
    assert transport(None, None, now=5.0)["state"] == "unknown"


def test_sdk_points_export_without_a_log_id(api: TestClient) -> None:
    token = start(api)
    scalars(api, token, {"series": [{"name": "a,b", "steps": [7], "values": [0.25]}]})
    rows = api.get(RUN + "/export.csv").text.splitlines()
    assert rows[0] == "step,metric,value,log_id,time"
    assert rows[1].startswith('7,"a,b",0.25,,')


# --- metric names a path cannot carry ---------------------------------------------------------

#: Legal names that URL normalisation would change or cut in a path (dot segments, "%", "?",
#: "#", empty segments), and plain ones.
ODD_NAMES = ["a/../b", "..", ".", "./x/.", "p%41q", "what?#now", " spaced ", "x//y/", "train/loss"]


def test_every_legal_metric_name_reads_through_the_query_forms(api: TestClient) -> None:
    token = start(api)
    body = {
        "series": [
            {"name": name, "steps": [1, 2], "values": [i, i + 0.5]}
            for i, name in enumerate(ODD_NAMES)
        ],
        "invalid": [{"name": name, "steps": [3], "kinds": ["nan"]} for name in ODD_NAMES],
    }
    assert scalars(api, token, body).status_code == 200
    for i, name in enumerate(ODD_NAMES):
        listed = api.get(RUN + "/metrics", params={"metric": name})
        assert [(m["metric"], m["count"], m["last"]) for m in listed.json()] == [(name, 2, i + 0.5)]
        page = api.get(RUN + "/points", params={"metric": name}).json()
        assert page["metric"] == name
        assert [(p["step"], p["value"]) for p in page["points"]] == [(1, i), (2, i + 0.5)]
        reduced = api.get(RUN + "/points", params={"metric": name, "max_points": 10}).json()
        assert [(m["metric"], len(m["buckets"])) for m in reduced["metrics"]] == [(name, 2)]
        runs = api.get(
            "/api/v1/projects/demo/points",
            params={"metric": name, "runs": "grpo-7", "max_points": 10, "start": 2},
        ).json()
        assert runs["metric"] == name
        assert [b["last"] for b in runs["runs"][0]["buckets"]] == [i + 0.5]
        invalid = api.get(RUN + "/invalid", params={"metric": name}).json()
        assert invalid == [{"step": 3, "kind": "nan"}]


def test_query_forms_refuse_what_they_cannot_answer(api: TestClient) -> None:
    token = start(api)
    scalars(api, token, {"series": [{"name": "a/../b", "steps": [1], "values": [1.0]}]})
    two = api.get(RUN + "/points", params={"metric": ["a/../b", "b"]})
    assert two.status_code == 422
    assert two.json()["error"]["details"] == [
        {"field": "metric", "rule": "name exactly one metric when max_points is not given"}
    ]
    # "a/../b" is not "b": no name is rewritten on the way.
    for path, params in (
        (RUN + "/metrics", {"metric": "b"}),
        (RUN + "/points", {"metric": "b"}),
        (RUN + "/invalid", {"metric": "b"}),
    ):
        answer = api.get(path, params=params)
        assert answer.status_code == 404, (path, answer.text)
        assert "'b'" in answer.json()["error"]["message"]
    missing = api.get(RUN + "/invalid")
    assert missing.status_code == 422
    assert missing.json()["error"]["details"][0]["field"] == "metric"
