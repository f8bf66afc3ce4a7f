"""Live streams against real server processes: a write appears on a stream that follows the
run, also when the write went to another server process on the same PostgreSQL."""

import json
import queue
import threading
from pathlib import Path

import httpx

from tests.conftest import _truncate_postgres
from tests.helpers import log
from tests.serving import running_server

ENV = {"TUNEPLANE_INGEST_SECRET": "live-secret"}
AUTH = {"Authorization": "Bearer live-secret"}
RUN = "/api/v1/projects/burtenshaw/runs/arena-run-id"


def follow(base: str, path: str, events: "queue.Queue[dict[str, object]]") -> None:
    try:
        with httpx.stream("GET", base + path, timeout=30) as response:
            for line in response.iter_lines():
                if line.startswith("data: "):
                    events.put(json.loads(line[6:]))
    except httpx.TransportError:
        pass  # the server stops at the end of the test


def watch(base: str, path: str) -> "queue.Queue[dict[str, object]]":
    events: queue.Queue[dict[str, object]] = queue.Queue()
    threading.Thread(target=follow, args=(base, path, events), daemon=True).start()
    return events


def post(base: str, log_id: str, step: int) -> None:
    body = {"logs": [log(log_id, step, {"reward": 1.0})]}
    assert httpx.post(base + "/ingest", json=body, headers=AUTH).status_code == 200


def test_run_stream_pushes_new_points(tmp_path: Path) -> None:
    with running_server("--data-dir", str(tmp_path), env=ENV) as base:
        post(base, "e0", 0)
        events = watch(base, RUN + "/stream")
        assert events.get(timeout=10)["point_count"] == 1
        post(base, "e1", 1)
        update = events.get(timeout=10)
        assert (update["point_count"], update["last_step"]) == (2, 1)


def test_run_stream_pushes_observations(tmp_path: Path) -> None:
    """Outcomes do not touch the run's points or status: ``last_observation_id`` is what
    changes, so a page showing the Validation tab knows to fetch again."""
    with running_server("--data-dir", str(tmp_path), env=ENV) as base:
        key = (tmp_path / "admin.key").read_text().strip()
        runs = base + "/api/v1/projects/burtenshaw/runs"
        admin = {"Authorization": f"Bearer {key}"}
        assert httpx.post(runs, json={"run": "arena-run-id"}, headers=admin).is_success
        token = httpx.post(runs + "/arena-run-id/attempts", headers=admin).json()["token"]
        events = watch(base, RUN + "/stream")
        assert events.get(timeout=10)["last_observation_id"] is None
        trial = {
            "event_id": "t0",
            "type": "trial",
            "round_id": "val",
            "trial_id": "q0",
            "trial_attempt": 0,
            "status": "success",
            "eligible": False,
        }
        sent = httpx.post(
            base + "/api/v1/ingest/observations",
            json={"events": [trial]},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert sent.status_code == 200, sent.text
        assert isinstance(events.get(timeout=10)["last_observation_id"], int)


def test_run_stream_follows_writes_to_another_server(pg_database_url: str) -> None:
    _truncate_postgres(pg_database_url)
    url = ["--database-url", pg_database_url]
    with running_server(*url, env=ENV) as reader, running_server(*url, env=ENV) as writer:
        post(writer, "e0", 0)
        events = watch(reader, RUN + "/stream")
        assert events.get(timeout=10)["point_count"] == 1
        post(writer, "e1", 5)
        assert events.get(timeout=10)["last_step"] == 5
