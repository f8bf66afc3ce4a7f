import csv
import io
import itertools
import math
import random
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from tests.helpers import PROJECT, RUN, alert, log, run_url


def post(client: TestClient, **body: Any) -> dict[str, Any]:
    response = client.post("/ingest", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def ingest_series(client: TestClient, metric: str, values: list[float], run: str = RUN) -> None:
    """One log event per step, 128 per batch."""
    events = [log(f"{run}-{step}", step, {metric: v}, run=run) for step, v in enumerate(values)]
    for start in range(0, len(events), 128):
        post(client, logs=events[start : start + 128])


def test_downsampling_keeps_a_one_step_spike(client: TestClient) -> None:
    values = [math.sin(step / 50) for step in range(3000)]
    values[1789] = 1000.0
    ingest_series(client, "train/loss", values)
    answer = client.get(run_url() + "/points/train/loss", params={"max_points": 40}).json()
    assert answer["downsampled"] is True
    assert answer["total_points"] == 3000
    buckets = answer["buckets"]
    assert 1 < len(buckets) <= 40
    assert max(b["max"] for b in buckets) == 1000.0
    spike = next(b for b in buckets if b["max"] == 1000.0)
    assert spike["step_min"] <= 1789 <= spike["step_max"]
    # Buckets tile the series in order and account for every point.
    assert sum(b["count"] for b in buckets) == 3000
    assert all(a["step_max"] < b["step_min"] for a, b in itertools.pairwise(buckets))
    for b in buckets:
        window = values[b["step_min"] : b["step_max"] + 1]
        assert b["count"] == len(window)
        assert b["min"] == min(window)
        assert b["max"] == max(window)
        assert b["mean"] == pytest.approx(sum(window) / len(window))
        assert b["last"] == window[-1]


def test_downsampling_a_zoomed_range_and_a_series_that_fits(client: TestClient) -> None:
    ingest_series(client, "reward", [float(s) for s in range(1000)])
    zoomed = client.get(
        run_url() + "/points/reward", params={"max_points": 100, "start": 200, "end": 259}
    ).json()
    assert zoomed["downsampled"] is False
    assert zoomed["total_points"] == 60
    assert [b["step_min"] for b in zoomed["buckets"]] == list(range(200, 260))
    assert [b["last"] for b in zoomed["buckets"]] == [float(s) for s in range(200, 260)]
    wide = client.get(
        run_url() + "/points/reward", params={"max_points": 10, "start": 100, "end": 899}
    ).json()
    assert wide["downsampled"] is True
    assert wide["buckets"][0]["step_min"] == 100
    assert wide["buckets"][-1]["step_max"] == 899
    assert sum(b["count"] for b in wide["buckets"]) == 800


def test_last_value_of_a_bucket_with_two_points_at_its_last_step(client: TestClient) -> None:
    post(client, logs=[log(f"e{s}", s, {"m": float(s)}) for s in range(10)])
    post(client, logs=[log("late", 9, {"m": -5.0})])
    answer = client.get(run_url() + "/points/m", params={"max_points": 2}).json()
    assert answer["buckets"][-1]["last"] == -5.0
    assert answer["buckets"][-1]["count"] == 6
    summary = client.get(run_url() + "/metrics/m").json()
    assert summary["last"] == -5.0
    assert summary["min"] == -5.0
    assert summary["count"] == 11


def test_one_metric_of_several_runs_in_one_read(client: TestClient) -> None:
    ingest_series(client, "train/loss", [math.cos(step / 30) for step in range(900)], run="a")
    ingest_series(client, "train/loss", [step * 0.5 for step in range(300)], run="b")
    ingest_series(client, "other", [1.0, 2.0], run="c")
    params = {"runs": "b,a,c,a", "max_points": 50, "start": 10, "end": 600}
    answer = client.get(f"/api/v1/projects/{PROJECT}/points/train/loss", params=params).json()
    assert [entry["run"] for entry in answer["runs"]] == ["b", "a"]
    assert answer["missing"] == ["c"]
    for entry in answer["runs"]:
        # Each run's part is what the one-run read answers.
        alone = client.get(
            run_url(run=entry["run"]) + "/points/train/loss",
            params={"max_points": 50, "start": 10, "end": 600},
        ).json()
        assert {k: entry[k] for k in ("downsampled", "total_points", "buckets")} == {
            k: alone[k] for k in ("downsampled", "total_points", "buckets")
        }
    assert answer["runs"][0]["total_points"] == 290
    assert answer["runs"][1]["total_points"] == 591

    unknown = client.get(
        f"/api/v1/projects/{PROJECT}/points/train/loss", params={"runs": "a,zz", "max_points": 5}
    )
    assert unknown.status_code == 404
    assert "zz" in unknown.json()["error"]["message"]
    too_many = ",".join(f"r{i}" for i in range(65))
    refused = client.get(
        f"/api/v1/projects/{PROJECT}/points/train/loss", params={"runs": too_many, "max_points": 5}
    )
    assert refused.status_code == 422
    assert refused.json()["error"]["details"][0]["field"] == "runs"


def test_metric_summaries_of_several_runs_in_one_read(client: TestClient) -> None:
    ingest_series(client, "train/loss", [1.0, 3.0, 2.0], run="a")
    ingest_series(client, "reward", [5.0], run="b")
    answer = client.get(f"/api/v1/projects/{PROJECT}/metrics", params={"runs": "b,a"}).json()
    assert [entry["run"] for entry in answer["runs"]] == ["b", "a"]
    for entry in answer["runs"]:
        alone = client.get(run_url(run=entry["run"]) + "/metrics").json()
        assert entry["metrics"] == alone
    assert answer["runs"][1]["metrics"][0]["max"] == 3.0
    unknown = client.get(f"/api/v1/projects/{PROJECT}/metrics", params={"runs": "a,zz"})
    assert unknown.status_code == 404
    empty = client.get(f"/api/v1/projects/{PROJECT}/metrics", params={"runs": ","})
    assert empty.status_code == 422
    assert empty.json()["error"]["details"][0]["field"] == "runs"


def test_several_metrics_of_a_run_in_one_read(client: TestClient) -> None:
    events = [
        log(
            f"e{step}",
            step,
            {"train/loss": math.cos(step / 30)} | ({"reward": step * 0.5} if step < 300 else {}),
        )
        for step in range(900)
    ]
    for start in range(0, len(events), 128):
        post(client, logs=events[start : start + 128])
    params = [("metric", "reward"), ("metric", "train/loss"), ("metric", "nope")]
    params += [("max_points", "40"), ("start", "250")]
    answer = client.get(run_url() + "/points", params=params).json()
    assert [entry["metric"] for entry in answer["metrics"]] == ["reward", "train/loss"]
    assert answer["missing"] == ["nope"]
    for entry in answer["metrics"]:
        alone = client.get(
            run_url() + "/points/" + entry["metric"], params={"max_points": 40, "start": 250}
        ).json()
        assert {k: entry[k] for k in ("downsampled", "total_points", "buckets")} == {
            k: alone[k] for k in ("downsampled", "total_points", "buckets")
        }
    assert [entry["total_points"] for entry in answer["metrics"]] == [50, 650]
    many = [("metric", f"m{i}") for i in range(65)] + [("max_points", "5")]
    refused = client.get(run_url() + "/points", params=many)
    assert refused.status_code == 422
    assert refused.json()["error"]["details"][0]["field"] == "metric"


def test_raw_pages_walk_every_point_once(client: TestClient) -> None:
    rng = random.Random(7)
    events = [log(f"e{i}", i // 3, {"m": rng.random()}) for i in range(500)]
    for start in range(0, 500, 128):
        post(client, logs=events[start : start + 128])
    seen: list[tuple[int, str]] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 64}
        if cursor:
            params["cursor"] = cursor
        page = client.get(run_url() + "/points/m", params=params).json()
        seen += [(p["step"], p["log_id"]) for p in page["points"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 8
    assert len(seen) == 500
    assert sorted(seen) == sorted((i // 3, f"e{i}") for i in range(500))
    assert [s for s, _ in seen] == sorted(s for s, _ in seen)


def test_bad_read_parameters_are_named(client: TestClient) -> None:
    post(client, logs=[log("e1", 1, {"m": 1.0})])
    bad_cursor = client.get(run_url() + "/points/m", params={"cursor": "nope"})
    assert bad_cursor.status_code == 422
    assert bad_cursor.json()["error"]["details"][0]["field"] == "cursor"
    bad_max = client.get(run_url() + "/points/m", params={"max_points": 0})
    assert bad_max.status_code == 422
    assert bad_max.json()["error"]["message"].startswith("max_points:")
    bad_level = client.get(run_url() + "/alerts", params={"level": "fatal"})
    assert bad_level.status_code == 422
    assert bad_level.json()["error"]["details"][0]["field"] == "level"


@pytest.mark.parametrize("metric", ["train/loss", "a b?c#d%e", "x//y/", "ünï/cødé"])
def test_metric_names_with_slashes_and_symbols_round_trip(client: TestClient, metric: str) -> None:
    post(client, logs=[log("e1", 3, {metric: 2.5})])
    names = [m["metric"] for m in client.get(run_url() + "/metrics").json()]
    assert names == [metric]
    encoded = quote(metric, safe="/")
    page = client.get(run_url() + "/points/" + encoded).json()
    assert page["metric"] == metric
    assert [p["value"] for p in page["points"]] == [2.5]
    assert client.get(run_url() + "/metrics/" + encoded).json()["last"] == 2.5


def test_csv_export_streams_every_original_point(client: TestClient) -> None:
    rng = random.Random(3)
    expected = set()
    for batch in range(20):
        events = []
        for i in range(100):
            n = batch * 100 + i
            metrics = {"reward": rng.random(), "arena/step_seconds": rng.random() * 10}
            events.append(log(f"e{n}", n // 2, metrics))
            expected |= {(n // 2, k, v, f"e{n}") for k, v in metrics.items()}
        post(client, logs=events)
    response = client.get(run_url() + "/export.csv")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(response.text)))
    assert rows[0] == ["step", "metric", "value", "log_id", "time"]
    got = {(int(s), m, float(v), lid) for s, m, v, lid, _ in rows[1:]}
    assert len(rows) - 1 == len(expected) == 4000
    assert got == expected
    assert all(t.endswith("+00:00") for *_, t in rows[1:])


def test_alerts_newest_first_with_level_filter(client: TestClient) -> None:
    post(client, alerts=[alert("a1", "first", level="info", step=1)])
    post(client, alerts=[alert("a2", "second", level="error", step=None, text="details")])
    post(client, alerts=[alert("a3", "third", level="warn", step=3)])
    listed = client.get(run_url() + "/alerts").json()
    assert [a["alert_id"] for a in listed] == ["a3", "a2", "a1"]
    assert listed[1] == {
        "alert_id": "a2",
        "title": "second",
        "text": "details",
        "level": "error",
        "step": None,
        "received_at": listed[1]["received_at"],
    }
    assert isinstance(listed[1]["received_at"], float)
    errors = client.get(run_url() + "/alerts", params={"level": "error"}).json()
    assert [a["alert_id"] for a in errors] == ["a2"]


def test_projects_and_runs_listing(client: TestClient) -> None:
    assert client.get("/api/v1/projects").json() == []
    post(client, logs=[log("e1", 5, {"m": 1.0}, run="r1")])
    post(client, logs=[log("e1", 2, {"m": 1.0}, run="r2")])
    post(client, alerts=[alert("a1", run="r2")])
    post(client, logs=[log("e1", 1, {"m": 1.0}, project="other", run="r1")])
    projects = client.get("/api/v1/projects").json()
    assert [(p["project"], p["run_count"]) for p in projects] == [(PROJECT, 2), ("other", 1)]
    runs = {r["run"]: r for r in client.get(f"/api/v1/projects/{PROJECT}/runs").json()}
    assert runs["r1"]["last_step"] == 5
    assert (runs["r2"]["alert_count"], runs["r2"]["point_count"]) == (1, 1)
    assert runs["r1"]["metric_count"] == 1
    assert runs["r1"]["created_at"] <= runs["r1"]["updated_at"]


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/projects/nobody/runs",
        f"/api/v1/projects/{PROJECT}/runs/nothing",
        f"/api/v1/projects/{PROJECT}/runs/nothing/alerts",
        f"/api/v1/projects/{PROJECT}/runs/nothing/export.csv",
        f"/api/v1/projects/{PROJECT}/runs/{RUN}/points/missing/metric",
        f"/api/v1/projects/{PROJECT}/runs/{RUN}/metrics/missing",
        "/api/v1/no-such-route",
    ],
)
def test_unknown_things_are_404_json(client: TestClient, path: str) -> None:
    post(client, logs=[log("e1", 1, {"m": 1.0})])
    response = client.get(path)
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["status"] == 404
    assert error["code"] == "not_found"
    assert error["message"]


def test_openapi_documents_the_read_api(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for path in [
        "/ingest",
        "/api/v1/projects",
        "/api/v1/projects/{project}/runs",
        "/api/v1/projects/{project}/runs/{run}/metrics",
        "/api/v1/projects/{project}/runs/{run}/points/{metric}",
        "/api/v1/projects/{project}/points/{metric}",
        "/api/v1/projects/{project}/runs/{run}/points",
        "/api/v1/projects/{project}/metrics",
        "/api/v1/projects/{project}/runs/{run}/alerts",
        "/api/v1/projects/{project}/runs/{run}/export.csv",
    ]:
        assert path in paths, path
