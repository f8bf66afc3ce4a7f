"""Submission through real server processes on both engines, with real jobs on the local
engine: the gates run again, admission, the run and its attempt with the check record in its
config, the job reporting into its run, its states (succeeded, failed, cancelled, lost), an
idempotent retry, and jobs stopped with the server."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.launch.jobs import write_recipes
from tests.serving import running_server
from tuneplane.contract.launch import CHECK_NAMES, CHECK_RECORD_KEY, input_fingerprint
from tuneplane.launch.recipes import load_recipes

PROJECT = "launches"
LAUNCH = f"/api/v1/projects/{PROJECT}/launch"


class Server:
    def __init__(self, base: str, key: str) -> None:
        self.http = httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30
        )

    @classmethod
    def opened(cls, base: str, data: Path) -> Server:
        """The server at ``base`` with the admin key of its data directory, and a project."""
        server = cls(base, (data / "admin.key").read_text().strip())
        made = server.http.post(f"/api/v1/projects/{PROJECT}/runs", json={"run": "seed"})
        assert made.status_code == 201, made.text
        return server

    def launch(self, body: dict[str, Any], key: str | None = None) -> httpx.Response:
        headers = {"Idempotency-Key": key} if key else {}
        return self.http.post(LAUNCH, json=body, headers=headers)

    def jobs(self) -> list[dict[str, Any]]:
        answer = self.http.get(f"{LAUNCH}/jobs")
        assert answer.status_code == 200, answer.text
        jobs: list[dict[str, Any]] = answer.json()
        return jobs

    def job(self, job_id: int) -> dict[str, Any]:
        return next(job for job in self.jobs() if job["id"] == job_id)

    def wait(self, job_id: int, *states: str, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if job["state"] in states:
                return job
            assert time.monotonic() < deadline, f"job {job_id} is still {job}"
            time.sleep(0.2)

    def run(self, run: str) -> dict[str, Any]:
        answer = self.http.get(f"/api/v1/projects/{PROJECT}/runs/{run}")
        assert answer.status_code == 200, answer.text
        found: dict[str, Any] = answer.json()
        return found

    def logs(self, run: str) -> list[str]:
        answer = self.http.get(f"/api/v1/projects/{PROJECT}/runs/{run}/logs")
        return [line["text"] for line in answer.json()["lines"]]


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[Server]:
    """A real server on each engine, its recipes, a project, the admin key."""
    recipes = write_recipes(tmp_path / "recipes")
    env = {
        "TUNEPLANE_DIR": str(tmp_path / "data"),
        "TUNEPLANE_RECIPES_DIR": str(recipes),
        "TUNEPLANE_LAUNCH_MAX_JOBS": "2",
    }
    with running_server(
        "--database-url", database_url, env=env, output=tmp_path / "server.log"
    ) as base:
        server = Server.opened(base, tmp_path / "data")
        yield server
        server.http.close()
    # The server stopped: no job of it is left running.
    assert "Traceback" not in (tmp_path / "server.log").read_text()


def test_a_job_runs_under_its_attempt_and_reports_into_its_run(
    server: Server, tmp_path: Path
) -> None:
    body = {
        "recipe": "tiny",
        "run": "job-ok",
        "parameters": {"mode": "ok"},
        "config": {"model": {"layers": 2}},
    }
    first = server.launch(body, key="submit-1")
    assert first.status_code == 201, first.text
    job = first.json()["job"]
    assert first.json()["created"] is True
    assert (job["run"], job["attempt"], job["recipe"], job["engine"]) == (
        "job-ok",
        1,
        "tiny",
        "local",
    )
    # A retried submission answers the same job and starts nothing.
    again = server.launch(body, key="submit-1")
    assert again.status_code == 200, again.text
    assert again.json()["job"]["id"] == job["id"]
    assert again.json()["created"] is False
    done = server.wait(job["id"], "succeeded")
    assert done["exit_code"] == 0
    assert done["attempt_status"] == "succeeded"
    assert len(server.jobs()) == 1
    run = server.run("job-ok")
    assert (run["status"], run["attempt"], run["point_count"]) == ("succeeded", 1, 3)
    assert "job ok says hello" in server.logs("job-ok")
    # The check record: when, what, and the fingerprint of the inputs.
    record = run["config"][CHECK_RECORD_KEY]
    assert [c["name"] for c in record["checks"]] == list(CHECK_NAMES)
    assert {c["status"] for c in record["checks"]} == {"passed"}
    assert record["checked_at"] <= time.time()
    assert len(record["not_checked"]) == 6
    parameters = {"mode": "ok", "lr": 0.001, "batch": 8, "world_size": 2}
    assert run["config"]["parameters"] == parameters
    assert run["config"]["config"] == {"model": {"layers": 2}}
    recipe = load_recipes(tmp_path / "recipes")["tiny"]
    expected = input_fingerprint(recipe.spec(), parameters, {"model": {"layers": 2}})
    assert record["fingerprint"]["sha256"] == expected
    assert first.json()["check_record"]["fingerprint"]["sha256"] == expected


def test_a_failing_job_fails_and_the_gates_run_again_at_submission(server: Server) -> None:
    failing = server.launch({"recipe": "tiny", "run": "job-fail", "parameters": {"mode": "fail"}})
    assert failing.status_code == 201, failing.text
    job = server.wait(failing.json()["job"]["id"], "failed")
    assert job["exit_code"] == 3
    assert server.run("job-fail")["status"] == "failed"
    # Whatever a preview said: a check that fails now refuses the launch, storing nothing.
    refused = server.launch(
        {"recipe": "tiny", "run": "job-bad", "parameters": {"mode": "ok", "batch": 7}}
    )
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["details"] == [
        {"field": "checks.configuration", "rule": "batch % world_size == 0: whole batches per rank"}
    ]
    assert server.http.get(f"/api/v1/projects/{PROJECT}/runs/job-bad").status_code == 404
    assert len(server.jobs()) == 1


def test_cancel_lost_and_admission(server: Server) -> None:
    waiting = [
        server.launch({"recipe": "tiny", "run": f"wait-{i}", "parameters": {"mode": "wait"}})
        for i in range(2)
    ]
    assert [w.status_code for w in waiting] == [201, 201], [w.text for w in waiting]
    ids = [w.json()["job"]["id"] for w in waiting]
    # TUNEPLANE_LAUNCH_MAX_JOBS=2: a third is refused while both are pending or running.
    third = server.launch({"recipe": "tiny", "run": "wait-2", "parameters": {"mode": "wait"}})
    assert third.status_code == 429, third.text
    assert "TUNEPLANE_LAUNCH_MAX_JOBS=2" in third.json()["error"]["message"]
    assert server.http.get(f"/api/v1/projects/{PROJECT}/runs/wait-2").status_code == 404
    for job_id, run in zip(ids, ("wait-0", "wait-1"), strict=True):
        server.wait(job_id, "running")
        _wait_for(lambda run=run: "job wait says hello" in server.logs(run))
    cancelled = server.http.post(f"{LAUNCH}/jobs/{ids[0]}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    job = server.wait(ids[0], "cancelled")
    _wait_for(lambda: server.run("wait-0")["status"] == "cancelled")
    assert job["reason"] == "cancelled"
    # The engine loses a job whose runner dies by a signal it did not send.
    runner = int(server.job(ids[1])["engine_id"])
    os.kill(runner, signal.SIGKILL)
    lost = server.wait(ids[1], "lost")
    assert lost["reason"] == "killed by signal 9, which the engine did not send"
    assert lost["attempt_status"] == "running"  # what the job last said of itself
    again = server.http.post(f"{LAUNCH}/jobs/{ids[1]}/cancel")
    assert again.status_code == 409
    # Nothing is pending or running any more: admitted again.
    ok = server.launch({"recipe": "tiny", "run": "after", "parameters": {"mode": "ok"}})
    assert ok.status_code == 201, ok.text
    server.wait(ok.json()["job"]["id"], "succeeded")


def _wait_for(condition: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_jobs_stop_with_the_server(database_url: str, tmp_path: Path) -> None:
    recipes = write_recipes(tmp_path / "recipes")
    env = {"TUNEPLANE_DIR": str(tmp_path / "data"), "TUNEPLANE_RECIPES_DIR": str(recipes)}
    with running_server("--database-url", database_url, env=env) as base:
        server = Server(base, (tmp_path / "data" / "admin.key").read_text().strip())
        server.http.post(f"/api/v1/projects/{PROJECT}/runs", json={"run": "seed"})
        made = server.launch({"recipe": "tiny", "run": "w", "parameters": {"mode": "wait"}})
        runner = int(server.wait(made.json()["job"]["id"], "running")["engine_id"])
        _wait_for(lambda: "job wait says hello" in server.logs("w"))
        server.http.close()
    with pytest.raises(ProcessLookupError):
        os.kill(runner, 0)
    with running_server("--database-url", database_url, env=env) as base:
        server = Server(base, (tmp_path / "data" / "admin.key").read_text().strip())
        job = server.jobs()[0]
        # The job is cancelled, and so is its attempt, which could not say so itself (and
        # a cancelled job is not taken for one a crashed server left behind).
        assert (job["state"], job["attempt_status"]) == ("cancelled", "cancelled")
        assert server.run("w")["status"] == "cancelled"
        server.http.close()


def test_the_runner_needs_every_job_variable_with_attempt_from_env() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEPLANE_JOB_")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tuneplane.cli",
            "run",
            "--project",
            "p",
            "--run",
            "r",
            "--attempt-from-env",
            "--",
            "true",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--attempt-from-env: TUNEPLANE_JOB_ENDPOINT, TUNEPLANE_JOB_RUN_ID" in done.stderr


def _kill_server(base: str) -> None:
    """SIGKILL the server listening at ``base``: a crash, with no shutdown of its own."""
    port = int(base.rsplit(":", 1)[1])
    listening = [
        c
        for c in psutil.net_connections("tcp")
        if c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN
    ]
    pid = listening[0].pid if listening else None
    assert pid is not None, f"nothing listens on {port}"
    os.kill(pid, signal.SIGKILL)


def test_a_crashed_server_s_jobs_are_lost_when_it_starts_again(
    database_url: str, tmp_path: Path
) -> None:
    recipes = write_recipes(tmp_path / "recipes")
    env = {"TUNEPLANE_DIR": str(tmp_path / "data"), "TUNEPLANE_RECIPES_DIR": str(recipes)}
    runner = None
    try:
        with running_server("--database-url", database_url, env=env) as base:
            server = Server(base, (tmp_path / "data" / "admin.key").read_text().strip())
            server.http.post(f"/api/v1/projects/{PROJECT}/runs", json={"run": "seed"})
            made = server.launch({"recipe": "tiny", "run": "w", "parameters": {"mode": "wait"}})
            runner = int(server.wait(made.json()["job"]["id"], "running")["engine_id"])
            _wait_for(lambda: server.run("w")["status"] == "running")
            server.http.close()
            _kill_server(base)
        with running_server("--database-url", database_url, env=env) as base:
            server = Server(base, (tmp_path / "data" / "admin.key").read_text().strip())
            _wait_for(lambda: server.jobs()[0]["state"] == "lost")
            job = server.jobs()[0]
            assert job["reason"] == "the server process that ran it stopped without ending it"
            assert job["attempt_status"] == "running"
            server.http.close()
    finally:
        if runner is not None:  # the job outlived its server: it is ours to end
            with contextlib.suppress(ProcessLookupError):
                os.killpg(runner, signal.SIGKILL)


def test_two_submissions_with_one_key_at_once_start_one_job(server: Server) -> None:
    body = {"recipe": "tiny", "parameters": {"mode": "ok"}}
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: server.launch(body, key="same-key"), range(4)))
    assert sorted(a.status_code for a in answers) == [200, 200, 200, 201], [a.text for a in answers]
    assert len({a.json()["job"]["id"] for a in answers}) == 1
    job = server.wait(answers[0].json()["job"]["id"], "succeeded")
    assert [j["id"] for j in server.jobs()] == [job["id"]]
    runs = server.http.get(f"/api/v1/projects/{PROJECT}/runs").json()
    assert sorted(r["run"] for r in runs) == sorted(["seed", job["run"]])


def test_a_job_past_its_time_limit_is_stopped_and_fails(server: Server) -> None:
    made = server.launch({"recipe": "short", "run": "slow", "parameters": {"mode": "wait"}})
    assert made.status_code == 201, made.text
    job = server.wait(made.json()["job"]["id"], "failed", timeout=90)
    assert job["reason"] == "stopped at its time limit of 0.05 minutes"
    assert job["ended_at"] - job["started_at"] >= 3
    # The runner passed SIGTERM on to the command and said so.
    _wait_for(lambda: server.run("slow")["status"] == "cancelled")


def test_a_git_source_is_checked_out_for_its_job_and_removed_after(
    server: Server, tmp_path: Path
) -> None:
    checkouts = tmp_path / "data" / "launch" / "checkouts"
    refused = server.launch(
        {"recipe": "from_git", "run": "g0", "parameters": {"mode": "ok", "batch": 7}}
    )
    assert refused.status_code == 422, refused.text
    assert not checkouts.exists() or list(checkouts.iterdir()) == []
    made = server.launch({"recipe": "from_git", "run": "g1", "parameters": {"mode": "ok"}})
    assert made.status_code == 201, made.text
    server.wait(made.json()["job"]["id"], "succeeded")
    assert "job ok says hello" in server.logs("g1")
    assert list(checkouts.iterdir()) == []
