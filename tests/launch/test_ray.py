"""The Ray Jobs engine against a real local Ray cluster (one head for the module, started by
the package's own ``ray start``): fleet fit from the cluster's nodes, jobs that report into
their runs, their states to succeeded, failed and cancelled (by a cancel, by the time
limit), jobs a restarted server finds again (one of them lost: its process was killed), a
job the cluster does not know (lost), a submission tried again that starts no second job,
and tuneplane doctor asking the cluster."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from ray.job_submission import JobSubmissionClient
from ray.util.state import list_actors

from tests.launch.jobs import TINY, write_recipes
from tests.launch.ray_cluster import ray_cluster
from tests.launch.test_submit import LAUNCH, Server
from tests.serving import free_port, running_server
from tuneplane.contract import environment
from tuneplane.launch.engines.base import JobSpec
from tuneplane.launch.engines.ray import RayEngine, submission_id

PROJECT = "launches"
RAY_TINY = TINY.replace('engine = "local"', 'engine = "ray"')


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    with ray_cluster(cpus=2) as address:
        yield address


def _write_recipes(directory: Path) -> Path:
    """The launch tests' recipes, and the tiny one on Ray: as it is, asking more CPUs than
    the cluster has, with a time limit; and one listing its git source's files."""
    write_recipes(directory)
    (directory / "ray_tiny.toml").write_text(RAY_TINY)
    (directory / "ray_big.toml").write_text(RAY_TINY + "\n[resources]\ncpus = 64\n")
    (directory / "ray_short.toml").write_text(RAY_TINY + "\n[resources]\ntime_minutes = 0.05\n")
    listing = """command = ["python", "-c", 'import os; print("files", sorted(os.listdir()))']"""
    from_git = (directory / "from_git.toml").read_text()
    from_git = from_git.replace('engine = "local"', 'engine = "ray"')
    from_git = from_git.replace('command = ["python", "job.py", "{mode}"]', listing)
    (directory / "ray_git.toml").write_text(from_git)
    return directory


def _serve(cluster: str, data: Path, recipes: Path) -> Any:
    env = {
        "TUNEPLANE_DIR": str(data),
        "TUNEPLANE_RECIPES_DIR": str(recipes),
        "TUNEPLANE_RAY_ADDRESS": cluster,
    }
    url = f"sqlite:///{data / 'tuneplane.db'}"
    return running_server("--database-url", url, env=env, output=data.parent / "server.log")


@pytest.fixture(scope="module")
def server(cluster: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A real server whose Ray engine submits to the module's cluster, with a project."""
    where = tmp_path_factory.mktemp("ray-server")
    with _serve(cluster, where / "data", _write_recipes(where / "recipes")) as base:
        server = Server.opened(base, where / "data")
        yield server
        server.http.close()
    assert "Traceback" not in (where / "server.log").read_text()


def _until(predicate: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.2)


def _cluster_jobs(cluster: str, name: str) -> int:
    """How many jobs of the cluster carry the submission ID ``name``."""
    return sum(job.submission_id == name for job in JobSubmissionClient(cluster).list_jobs())


def test_preview_judges_fleet_fit_by_what_the_cluster_reports(server: Server) -> None:
    fits = server.http.post(
        f"{LAUNCH}/preview", json={"recipe": "ray_tiny", "parameters": {"mode": "ok"}}
    )
    assert fits.status_code == 200, fits.text
    checks = {check["name"]: check for check in fits.json()["checks"]}
    assert fits.json()["ready"] is True
    assert checks["recipe"]["reason"].startswith("runs on the ray engine")
    assert "2 CPUs" in checks["fleet"]["reason"]
    assert "reported by the ray engine now" in checks["fleet"]["reason"]
    big = server.http.post(
        f"{LAUNCH}/preview", json={"recipe": "ray_big", "parameters": {"mode": "ok"}}
    )
    fleet = next(check for check in big.json()["checks"] if check["name"] == "fleet")
    assert big.json()["ready"] is False
    assert fleet["status"] == "failed"
    assert fleet["reason"].startswith("too few CPUs (needs 64, has 2)")
    assert big.json()["submitted"] is False


def test_a_cluster_that_does_not_answer_fails_the_check_request(tmp_path: Path) -> None:
    """Never a report that passes without the engine's word: a 503 naming it, and nothing
    stored or submitted."""
    nowhere = f"http://127.0.0.1:{free_port()}"
    with _serve(nowhere, tmp_path / "data", _write_recipes(tmp_path / "recipes")) as base:
        server = Server.opened(base, tmp_path / "data")
        body = {"recipe": "ray_tiny", "run": "nowhere", "parameters": {"mode": "ok"}}
        for answer in (server.http.post(f"{LAUNCH}/preview", json=body), server.launch(body)):
            assert answer.status_code == 503, answer.text
            assert "the ray engine did not answer" in answer.text
            assert nowhere in answer.text
        assert server.jobs() == []
        # The local engine is asked on its own.
        local = {"recipe": "tiny", "parameters": {"mode": "ok"}}
        assert server.http.post(f"{LAUNCH}/preview", json=local).json()["ready"] is True
        server.http.close()


def test_a_ray_job_reports_points_logs_and_its_status_into_its_run(
    server: Server, cluster: str
) -> None:
    body = {"recipe": "ray_tiny", "run": "ray-ok", "parameters": {"mode": "ok"}}
    first = server.launch(body, key="ray-1")
    assert first.status_code == 201, first.text
    job = first.json()["job"]
    # A retried submission answers the same job and starts nothing.
    again = server.launch(body, key="ray-1")
    assert (again.status_code, again.json()["job"]["id"]) == (200, job["id"])
    listing = server.launch({"recipe": "ray_git", "run": "ray-git", "parameters": {"mode": "ok"}})
    assert listing.status_code == 201, listing.text
    done = server.wait(job["id"], "succeeded", timeout=120)
    assert (done["engine"], done["exit_code"], done["attempt_status"]) == ("ray", 0, "succeeded")
    assert done["engine_id"].startswith(f"tuneplane-{job['id']}-")
    assert _cluster_jobs(cluster, done["engine_id"]) == 1
    run = server.run("ray-ok")
    assert (run["status"], run["attempt"], run["point_count"]) == ("succeeded", 1, 3)
    assert "job ok says hello" in server.logs("ray-ok")
    # A git source is checked out, uploaded without its history, and removed here.
    server.wait(listing.json()["job"]["id"], "succeeded", timeout=120)
    assert "files ['job.py']" in server.logs("ray-git")


def test_a_failing_ray_job_fails_with_its_exit_code(server: Server) -> None:
    made = server.launch({"recipe": "ray_tiny", "run": "ray-fail", "parameters": {"mode": "fail"}})
    assert made.status_code == 201, made.text
    job = server.wait(made.json()["job"]["id"], "failed", timeout=120)
    assert job["exit_code"] == 3
    assert job["reason"] == "Ray: Job entrypoint command failed with exit code 3"
    assert job["attempt_status"] == "failed"
    assert "job fail says hello" in server.logs("ray-fail")


def test_a_ray_job_is_cancelled_and_another_stopped_at_its_time_limit(server: Server) -> None:
    made = server.launch({"recipe": "ray_tiny", "run": "ray-wait", "parameters": {"mode": "wait"}})
    short = server.launch(
        {"recipe": "ray_short", "run": "ray-slow", "parameters": {"mode": "wait"}}
    )
    assert (made.status_code, short.status_code) == (201, 201), made.text + short.text
    job_id = made.json()["job"]["id"]
    server.wait(job_id, "running", timeout=120)
    _until(lambda: "job wait says hello" in server.logs("ray-wait"))
    cancelled = server.http.post(f"{LAUNCH}/jobs/{job_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    job = server.wait(job_id, "cancelled")
    assert job["reason"] == "cancelled"
    # The runner had SIGTERM from Ray, passed it on and said so.
    _until(lambda: server.run("ray-wait")["status"] == "cancelled")
    slow = server.wait(short.json()["job"]["id"], "failed", timeout=120)
    assert slow["reason"] == "stopped at its time limit of 0.05 minutes"
    again = server.http.post(f"{LAUNCH}/jobs/{job_id}/cancel")
    assert again.status_code == 409


def _kill_supervisor(cluster: str, name: str) -> None:
    """Kill the actor that runs the job's entrypoint (Ray then ends the entrypoint)."""
    actor = f"_ray_internal_job_actor_{name}"
    (found,) = list_actors(address=cluster, filters=[("name", "=", actor)], detail=True)
    assert found.pid is not None
    psutil.Process(found.pid).kill()


def test_a_restarted_server_finds_its_ray_jobs_and_a_lost_one(cluster: str, tmp_path: Path) -> None:
    recipes = _write_recipes(tmp_path / "recipes")
    ids = []
    with _serve(cluster, tmp_path / "data", recipes) as base:
        server = Server.opened(base, tmp_path / "data")
        for run in ("kept", "killed"):
            made = server.launch({"recipe": "ray_tiny", "run": run, "parameters": {"mode": "wait"}})
            assert made.status_code == 201, made.text
            ids.append(made.json()["job"]["id"])
        running = [server.wait(job_id, "running", timeout=120) for job_id in ids]
        for run in ("kept", "killed"):
            _until(lambda run=run: "job wait says hello" in server.logs(run))
        server.http.close()
    # The server stopped; its Ray jobs did not. The process running one of them is killed
    # meanwhile.
    names = [job["engine_id"] for job in running]
    client = JobSubmissionClient(cluster)
    assert client.get_job_status(names[0]) == "RUNNING"
    _kill_supervisor(cluster, names[1])
    with _serve(cluster, tmp_path / "data", recipes) as base:
        server = Server(base, (tmp_path / "data" / "admin.key").read_text().strip())
        lost = server.wait(ids[1], "lost")
        assert lost["reason"].startswith("the Ray job's supervisor died, its outcome unknown")
        assert lost["attempt_status"] == "running"  # what the job last said of itself
        kept = server.job(ids[0])
        assert (kept["state"], kept["started_at"]) == ("running", running[0]["started_at"])
        # The job it found again is its own: it cancels it.
        cancelled = server.http.post(f"{LAUNCH}/jobs/{ids[0]}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        server.wait(ids[0], "cancelled")
        server.http.close()
    assert client.get_job_status(names[0]) == "STOPPED"


def test_a_submission_handed_over_again_starts_no_second_ray_job(
    cluster: str, tmp_path: Path
) -> None:
    """As a server does after a lost answer, or a second server process with the same job:
    the submission ID decides, and the cluster runs one job."""
    (tmp_path / "src").mkdir()
    spec = JobSpec(
        job_id=424242,
        command=("python", "-c", "print('once')"),
        project=PROJECT,
        run="twice",
        cwd=tmp_path / "src",
        attempt_env={environment.JOB_RUN_ID: f"{PROJECT}/twice", environment.JOB_TOKEN: "t"},
        python_env=Path(sys.prefix),
        cpus=1,
        gpus=0,
        log_path=tmp_path / "job.log",
    )
    changes = []
    for _ in range(2):
        engine = RayEngine(cluster)
        engine.submit(spec)
        changes += engine.poll()
    name = submission_id(spec)
    assert [(c.state, c.engine_id) for c in changes] == [("pending", name)] * 2
    assert all(c.reason == f"submitted to the Ray cluster as {name}" for c in changes)
    assert _cluster_jobs(cluster, name) == 1
    # A job the cluster does not know, and one never handed to it, are lost.
    found = RayEngine(cluster).recover({7: "tuneplane-7-0000000000000000", 8: None})
    assert sorted((c.job_id, c.state, c.reason) for c in found) == [
        (7, "lost", "the Ray cluster no longer knows tuneplane-7-0000000000000000"),
        (8, "lost", "the server stopped before handing it to the Ray cluster"),
    ]


def test_doctor_asks_the_ray_cluster_and_judges_its_recipes_by_it(
    server: Server, cluster: str, tmp_path: Path
) -> None:
    recipes = _write_recipes(tmp_path / "recipes")
    nowhere = f"http://127.0.0.1:{free_port()}"
    base = str(server.http.base_url)
    said = {}
    for address in (cluster, nowhere):
        done = subprocess.run(
            [sys.executable, "-m", "tuneplane.cli", "doctor", "--server", base],
            env={**os.environ, "TUNEPLANE_DIR": str(tmp_path / "data"),
                 "TUNEPLANE_RECIPES_DIR": str(recipes), "TUNEPLANE_RAY_ADDRESS": address},
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert "Traceback" not in done.stderr, done.stderr
        said[address] = done.stdout.splitlines()
    assert any(line.startswith("OK    the ray engine has 2 CPUs") for line in said[cluster])
    assert any(line.startswith("OK    recipe ray_tiny: needs 1 CPUs") for line in said[cluster])
    assert any(line.startswith("FAIL  recipe ray_big: too few CPUs (needs 64, has 2)")
               for line in said[cluster])  # fmt: skip
    assert any(line.startswith(f"FAIL  the ray engine does not answer: Ray at {nowhere}")
               for line in said[nowhere])  # fmt: skip
    assert "SKIP  recipe ray_tiny: the ray engine did not answer" in said[nowhere]
