"""The real ``trackio`` clients (0.40.0 and 0.43.0), unchanged, logging into a real
``tuneplane serve`` on each engine: every point, the config and the alert stored exactly once;
a resumed run continues after its last step; an answer lost on the way makes the client send
the same events again, and they are still stored once; a wrong write token keeps the data on
the client's disk and says so. The tests that matter most run each release; the rest run the
newest, the one ``pip install trackio`` gives."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.client.runs import Server
from tests.client.world import Fate, proxy
from tests.trackio import venv

JOB = Path(__file__).with_name("trackio_job.py")


@pytest.fixture(params=venv.VERSIONS, ids=lambda version: f"trackio-{version}")
def release(request: pytest.FixtureRequest) -> str:
    """Each Trackio release tuneplane speaks for."""
    version: str = request.param
    return version


def trackio_run(
    url: str, token: str, home: Path, version: str = venv.NEWEST, **job: Any
) -> dict[str, Any]:
    """Run the Trackio script with ``trackio==version`` in its venv; what it printed, as
    JSON."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("TRACKIO_", "TUNEPLANE_", "HF_"))
    }
    env |= {
        "TRACKIO_SERVER_URL": url,
        "TRACKIO_WRITE_TOKEN": token,
        # Where the client keeps what it could not send, and Hugging Face's cache: ours.
        "TRACKIO_DIR": str(home / "trackio"),
        "HF_HOME": str(home / "hf"),
        "HF_HUB_OFFLINE": "1",
    }
    done = subprocess.run(
        [str(venv.python(version)), str(JOB), json.dumps(job)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    printed: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    printed["stderr"] = done.stderr
    return printed


def metrics_of(server: Server, project: str, run: str) -> dict[str, tuple[int, int | None]]:
    found = server.get(f"/api/v1/projects/{project}/runs/{run}/metrics")
    return {m["metric"]: (m["count"], m["last_step"]) for m in found}


def test_a_trackio_script_logs_into_tuneplane_exactly_once_and_resumes(
    server: Server, tmp_path: Path, release: str
) -> None:
    project = f"tk-{uuid.uuid4().hex[:8]}"
    first = trackio_run(
        server.base,
        server.key,
        tmp_path,
        release,
        project=project,
        name="r1",
        config={"lr": 0.001, "layers": [2, 3]},
        group="lr 1e-3",
        steps=5,
        system=True,
        alert=True,
    )
    assert first["first_step"] == 0
    assert "could not" not in first["stderr"], first["stderr"]
    run = server.get(f"/api/v1/projects/{project}/runs/r1")
    assert run["last_step"] == 4
    assert run["config"]["lr"] == 0.001
    assert run["config"]["layers"] == [2, 3]
    assert run["group"] == "lr-1e-3"  # init(group=), as a group may be written
    assert metrics_of(server, project, "r1") == {
        "loss": (5, 4),
        "nested/acc": (5, 4),
        "system/cpu/utilization": (1, 4),
        "system/memory_gb": (1, 4),
    }
    alerts = server.get(f"/api/v1/projects/{project}/runs/r1/alerts")
    assert [(a["title"], a["text"], a["level"], a["step"]) for a in alerts] == [
        ("loss spiked", "at the last step", "error", 4)
    ]
    # Made as the run API makes projects: private to the key's holder.
    assert httpx.get(f"{server.base}/api/v1/projects/{project}/runs/r1").status_code == 404

    resumed = trackio_run(
        server.base,
        server.key,
        tmp_path,
        release,
        project=project,
        name="r1",
        config={"lr": 0.002},
        resume="allow",
        steps=3,
    )
    assert resumed["first_step"] == 5
    run = server.get(f"/api/v1/projects/{project}/runs/r1")
    assert run["last_step"] == 7
    assert run["config"]["lr"] == 0.001  # a run keeps the config it was created with
    assert metrics_of(server, project, "r1")["loss"] == (8, 7)
    points = server.get(f"/api/v1/projects/{project}/runs/r1/points/loss")["points"]
    assert [p["step"] for p in points] == list(range(8))


def test_a_run_named_as_people_name_runs_is_stored_and_resumed(
    server: Server, tmp_path: Path
) -> None:
    """``qwen2.5-sft lr=1e-5`` (Trackio accepts it): the run gets the ID every path derives
    (contract.ids.id_for_name), keeps the name as its display name, and resumes by it."""
    from tuneplane.contract.ids import id_for_name

    project, name = f"tk {uuid.uuid4().hex[:6]}.demo", "qwen2.5-sft lr=1e-5"
    first = trackio_run(server.base, server.key, tmp_path, project=project, name=name, steps=3)
    assert "could not" not in first["stderr"], first["stderr"]
    path = f"/api/v1/projects/{id_for_name(project, 'project')}/runs/{id_for_name(name)}"
    run = server.get(path)
    assert (run["display_name"], run["last_step"]) == (name, 2)
    (listed,) = [p for p in server.get("/api/v1/projects") if p["project"] == id_for_name(project)]
    assert listed["display_name"] == project  # the project's name is kept as it was given
    resumed = trackio_run(
        server.base, server.key, tmp_path, project=project, name=name, resume="must", steps=2
    )
    assert resumed["first_step"] == 3
    assert server.get(path)["last_step"] == 4


def test_nan_and_infinities_are_invalid_points_that_fire_the_default_rule(
    server: Server, tmp_path: Path, release: str
) -> None:
    """The client sends NaN as the string "NaN" (and "Infinity", "-Infinity"): stored as
    the SDK's are, as invalid points, and judged by the project's rules."""
    project = f"tk-{uuid.uuid4().hex[:8]}"
    for run, kind in (("nan", "nan"), ("inf", "inf"), ("minus", "-inf")):
        trackio_run(
            server.base, server.key, tmp_path, release, project=project, name=run, steps=4,
            nan_at=2, nan=kind,
        )  # fmt: skip
        base = f"/api/v1/projects/{project}/runs/{run}"
        assert metrics_of(server, project, run)["loss"] == (3, 3)
        invalid = server.get(f"{base}/invalid/loss")
        assert [(p["step"], p["kind"]) for p in invalid] == [(2, kind)], invalid
    deadline = time.monotonic() + 20
    while True:
        alerts = server.get(f"/api/v1/projects/{project}/runs/nan/alerts")
        if any("NaN" in a["title"] for a in alerts) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert [a["step"] for a in alerts if "NaN" in a["title"]] == [2], alerts


#: Every call a Trackio client makes while a run logs metrics, system metrics and an alert
#: and finishes: none says that the run ended.
RUN_CALLS = {
    b"GET /version", b"POST /api/get_runs_for_project", b"POST /api/get_run_summary",
    b"POST /api/bulk_log", b"POST /api/bulk_log_system", b"POST /api/bulk_alert",
}  # fmt: skip


def test_a_finished_run_says_its_end_is_unknown_and_awaits_no_heartbeat(
    server: Server, tmp_path: Path, release: str
) -> None:
    """``trackio.finish()`` only sends what is still queued: no call tells the server that
    the run ended, or that it still lives. So the run is ``unknown`` (never a ``running``
    that nothing will end), and has no heartbeat for the default rule to find stale."""
    project = f"tk-{uuid.uuid4().hex[:8]}"
    calls: set[bytes] = set()

    def fate(request: bytes) -> Fate:
        calls.add(b" ".join(request.split(b" ", 2)[:2]).partition(b"?")[0])
        return "pass"

    with proxy(server.base, fate) as url:
        done = trackio_run(
            url, server.key, tmp_path, release, project=project, name="r", steps=3, system=True,
            alert=True,
        )  # fmt: skip
    assert "could not" not in done["stderr"], done["stderr"]
    assert b"POST /api/bulk_log" in calls
    assert calls <= RUN_CALLS, calls - RUN_CALLS
    run = server.get(f"/api/v1/projects/{project}/runs/r")
    assert (run["status"], run["exit_code"], run["last_step"]) == ("unknown", None, 2)
    assert run["transport"]["heartbeat_at"] is None
    rules = server.get(f"/api/v1/projects/{project}/alert-rules")["rules"]
    assert [r["open_episodes"] for r in rules if r["kind"] == "heartbeat"] == [0]
    alerts = server.get(f"/api/v1/projects/{project}/runs/r/alerts")
    assert [a["title"] for a in alerts] == ["loss spiked"]


def _log_ids(request: bytes) -> list[str]:
    return re.findall(rb'"log_id":\s*"([0-9a-f]+)"', request)  # type: ignore[return-value]


def test_a_lost_answer_is_sent_again_with_the_same_log_ids_and_stored_once(
    server: Server, tmp_path: Path, release: str
) -> None:
    project = f"tk-{uuid.uuid4().hex[:8]}"
    lost: list[bytes] = []
    later: list[bytes] = []

    def fate(request: bytes) -> Fate:
        if request.startswith(b"POST /api/bulk_log "):
            if not lost:
                lost.append(request)
                return "lose"  # stored by the server; the client never hears it
            later.append(request)
        return "pass"

    with proxy(server.base, fate) as url:
        trackio_run(url, server.key, tmp_path, release, project=project, name="r", steps=6)
    assert lost, "the client sent no bulk_log"
    resent = set(_log_ids(lost[0]))
    assert resent
    assert resent <= {i for r in later for i in _log_ids(r)}
    assert metrics_of(server, project, "r")["loss"] == (6, 5)
    assert server.get(f"/api/v1/projects/{project}/runs/r")["point_count"] == 12


def test_a_wrong_write_token_keeps_the_data_on_the_client_and_says_so(
    sqlite_server: Server, tmp_path: Path
) -> None:
    project = f"tk-{uuid.uuid4().hex[:8]}"
    done = trackio_run(
        sqlite_server.base, "tpk_not-a-key", tmp_path, project=project, name="r", steps=2
    )
    assert "401 Unauthorized" in done["stderr"]
    assert "saved locally" in done["stderr"]
    answer = httpx.get(
        f"{sqlite_server.base}/api/v1/projects/{project}/runs",
        headers={"Authorization": f"Bearer {sqlite_server.key}"},
    )
    assert answer.status_code == 404
