from fastapi.testclient import TestClient

from tests.helpers import RUN, alert, log, run_url


def test_seed_example_is_stored_and_readable(client: TestClient) -> None:
    body = {
        "logs": [
            log(
                "unique-event-id",
                1,
                {"reward": 0.75, "arena/step_seconds": 1.2},
                run_id=RUN,
                config={"submission_id": "submission-id"},
            )
        ]
    }
    response = client.post("/ingest", json=body)
    assert response.status_code == 200, response.text
    assert response.json() == {
        "logs": {"new": 1, "duplicate": 0},
        "alerts": {"new": 0, "duplicate": 0},
        "points": 2,
        "run_created": True,
    }
    runs = client.get("/api/v1/projects/burtenshaw/runs").json()
    assert [r["run"] for r in runs] == [RUN]
    assert runs[0]["config"] == {"submission_id": "submission-id"}
    assert runs[0]["last_step"] == 1
    assert runs[0]["point_count"] == 2
    metrics = client.get(run_url() + "/metrics").json()
    assert {m["metric"]: m["last"] for m in metrics} == {"reward": 0.75, "arena/step_seconds": 1.2}
    points = client.get(run_url() + "/points/arena/step_seconds").json()["points"]
    assert [(p["step"], p["value"], p["log_id"]) for p in points] == [(1, 1.2, "unique-event-id")]


def test_retry_is_duplicate(client: TestClient) -> None:
    body = {"logs": [log("e1", 1, {"reward": 1.0})], "alerts": [alert("a1")]}
    assert client.post("/ingest", json=body).json()["logs"]["new"] == 1
    again = client.post("/ingest", json=body).json()
    assert again["logs"] == {"new": 0, "duplicate": 1}
    assert again["alerts"] == {"new": 0, "duplicate": 1}
    assert client.get(run_url() + "/metrics").json()[0]["count"] == 1
