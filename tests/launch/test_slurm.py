"""The Slurm engine against a real single-node Slurm (tests/launch/slurm_cluster.py) and a
real server: fleet fit from sinfo, submission through sbatch with an idempotent retry, jobs
that report points, logs and their status into their runs, a failing job, a cancel, jobs
killed or cancelled behind tuneplane's back (lost), and a server that finds its running
jobs again after a restart."""

from __future__ import annotations

import contextlib
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.launch.jobs import TINY, write_recipes
from tests.launch.slurm_cluster import NODE_GPUS, Cluster, slurm_cluster, write_conf
from tests.launch.test_submit import LAUNCH, PROJECT, Server
from tests.serving import running_server
from tests.test_doctor import doctor
from tuneplane.launch.engines.slurm import (
    JOB_NAME_PREFIX,
    SlurmJob,
    job_state,
    parse_show_job,
    parse_sinfo,
)

SLURM_TINY = TINY.replace('engine = "local"', 'engine = "slurm"')


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if shutil.which("sbatch") is None:  # scripts/test installs slurm-wlm and munge
        pytest.fail("Slurm's commands are not installed (apt-get install slurm-wlm munge)")
    with slurm_cluster(tmp_path_factory.mktemp("slurm")) as running:
        yield running


def _home(directory: Path) -> Path:
    """A server's data and recipes directories."""
    recipes = write_recipes(directory / "recipes")
    (recipes / "on_slurm.toml").write_text(SLURM_TINY)
    (recipes / "two_gpus.toml").write_text(SLURM_TINY + f"\n[resources]\ngpus = {NODE_GPUS + 1}\n")
    (recipes / "one_gpu.toml").write_text(SLURM_TINY + f"\n[resources]\ngpus = {NODE_GPUS}\n")
    (recipes / "many_cpus.toml").write_text(SLURM_TINY + "\n[resources]\ncpus = 4096\n")
    return directory


@contextlib.contextmanager
def _serve(home: Path, conf: Path, log: str) -> Iterator[Server]:
    env = {
        "TUNEPLANE_DIR": str(home / "data"),
        "TUNEPLANE_RECIPES_DIR": str(home / "recipes"),
        "TUNEPLANE_SLURM_CONF": str(conf),
    }
    url = f"sqlite:///{home / 'data' / 'tuneplane.db'}"
    with running_server("--database-url", url, env=env, output=home / log) as base:
        server = Server(base, (home / "data" / "admin.key").read_text().strip())
        yield server
        server.http.close()
    assert "Traceback" not in (home / log).read_text()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, cluster: Cluster) -> Iterator[Server]:
    home = _home(tmp_path_factory.mktemp("server"))
    with _serve(home, cluster.conf, "server.log") as server:
        made = server.http.post(f"/api/v1/projects/{PROJECT}/runs", json={"run": "seed"})
        assert made.status_code == 201, made.text
        yield server


def _preview(server: Server, recipe: str) -> dict[str, dict[str, str]]:
    answer = server.http.post(
        f"{LAUNCH}/preview", json={"recipe": recipe, "parameters": {"mode": "ok"}}
    )
    assert answer.status_code == 200, answer.text
    return {check["name"]: check for check in answer.json()["checks"]}


def _slurm_jobs(cluster: Cluster, job_id: int) -> list[str]:
    """Slurm's IDs of the jobs tuneplane named for ``job_id``."""
    shown = parse_show_job(cluster.command("scontrol", "show", "job", "--oneliner"))
    return [job.slurm_id for job in shown if job.name == f"{JOB_NAME_PREFIX}{job_id}"]


def _launch(server: Server, run: str, mode: str, key: str | None = None) -> dict[str, object]:
    body = {"recipe": "on_slurm", "run": run, "parameters": {"mode": mode}}
    answer = server.launch(body, key=key)
    assert answer.status_code == 201, answer.text
    job: dict[str, object] = answer.json()["job"]
    assert job["engine"] == "slurm"
    return job


def test_fleet_fit_is_what_sinfo_reports(server: Server, cluster: Cluster) -> None:
    ready = _preview(server, "on_slurm")
    assert {c["status"] for c in ready.values()} == {"passed"}, ready
    assert ready["fleet"]["reason"].endswith(
        f"{cluster.cpus} CPUs, 4.0 GB, {NODE_GPUS} GPUs reported by the slurm engine now"
    )
    assert _preview(server, "one_gpu")["fleet"]["status"] == "passed"
    two = _preview(server, "two_gpus")["fleet"]
    assert two["status"] == "failed"
    assert two["reason"].startswith(f"too few GPUs (needs {NODE_GPUS + 1}, has {NODE_GPUS})")
    many = _preview(server, "many_cpus")["fleet"]
    assert many["reason"].startswith(f"too few CPUs (needs 4096, has {cluster.cpus})")
    # A local recipe beside them is still the local engine's.
    assert "local engine now" in _preview(server, "tiny")["fleet"]["reason"]


def test_a_job_runs_in_slurm_and_reports_into_its_run(server: Server, cluster: Cluster) -> None:
    job = _launch(server, "slurm-ok", "ok", key="slurm-once")
    job_id = int(str(job["id"]))
    again = server.launch(
        {"recipe": "on_slurm", "run": "slurm-ok", "parameters": {"mode": "ok"}}, key="slurm-once"
    )
    assert (again.status_code, again.json()["job"]["id"]) == (200, job_id)
    # One sbatch: Slurm has one job of that name, the one the store names.
    slurm_ids = _slurm_jobs(cluster, job_id)
    assert slurm_ids == [server.job(job_id)["engine_id"]]
    done = server.wait(job_id, "succeeded", "failed", "lost")
    assert (done["state"], done["exit_code"], done["attempt_status"]) == (
        "succeeded",
        0,
        "succeeded",
    )
    assert done["started_at"] is not None
    run = server.run("slurm-ok")
    assert (run["status"], run["attempt"], run["point_count"]) == ("succeeded", 1, 3)
    assert "job ok says hello" in server.logs("slurm-ok")


def test_a_failing_job_fails_with_its_exit_code(server: Server) -> None:
    job_id = int(str(_launch(server, "slurm-fail", "fail")["id"]))
    done = server.wait(job_id, "succeeded", "failed", "lost")
    assert (done["state"], done["exit_code"], done["reason"]) == ("failed", 3, "exited with 3")
    assert done["attempt_status"] == "failed"


def _running(server: Server, run: str) -> tuple[int, dict[str, object]]:
    job_id = int(str(_launch(server, run, "wait")["id"]))
    # Running, and the job has said hello: the runner is up and reporting.
    server.wait(job_id, "running")
    deadline = time.monotonic() + 60
    while "job wait says hello" not in server.logs(run):
        assert time.monotonic() < deadline, server.job(job_id)
        time.sleep(0.2)
    return job_id, server.job(job_id)


def test_a_cancel_goes_through_scancel(server: Server) -> None:
    job_id, _ = _running(server, "slurm-cancel")
    answer = server.http.post(f"{LAUNCH}/jobs/{job_id}/cancel")
    assert answer.status_code == 200, answer.text
    done = server.wait(job_id, "cancelled", "failed", "lost")
    assert (done["state"], done["reason"]) == ("cancelled", "cancelled")
    assert done["attempt_status"] == "cancelled"
    assert server.http.post(f"{LAUNCH}/jobs/{job_id}/cancel").status_code == 409


def test_jobs_ended_behind_tuneplanes_back_are_lost(server: Server, cluster: Cluster) -> None:
    killed, job = _running(server, "slurm-killed")
    listed = cluster.command("scontrol", "listpids", str(job["engine_id"])).splitlines()[1:]
    for pid in (int(line.split()[0]) for line in listed):
        if "--attempt-from-env" in psutil.Process(pid).cmdline():
            psutil.Process(pid).send_signal(signal.SIGKILL)  # the runner
    done = server.wait(killed, "succeeded", "failed", "cancelled", "lost")
    assert done["state"] == "lost", done
    assert done["reason"] == "killed by signal 9, which tuneplane did not send"
    scancelled, job = _running(server, "slurm-scancel")
    cluster.command("scancel", str(job["engine_id"]))
    done = server.wait(scancelled, "succeeded", "failed", "cancelled", "lost")
    assert (done["state"], done["reason"]) == (
        "lost",
        "cancelled in Slurm by someone other than tuneplane",
    )


def test_a_restarted_server_finds_its_slurm_jobs_again(tmp_path: Path, cluster: Cluster) -> None:
    home = _home(tmp_path)
    with _serve(home, cluster.conf, "server.log") as server:
        server.http.post(f"/api/v1/projects/{PROJECT}/runs", json={"run": "seed"})
        job_id, job = _running(server, "slurm-outlives")
    # The server stopped; its Slurm job goes on without it, and is found again.
    shown = cluster.command("scontrol", "show", "job", "--oneliner", str(job["engine_id"]))
    assert parse_show_job(shown)[0].state == "RUNNING"
    with _serve(home, cluster.conf, "server-again.log") as again:
        assert again.job(job_id)["state"] == "running"
        answer = again.http.post(f"{LAUNCH}/jobs/{job_id}/cancel")
        assert answer.status_code == 200, answer.text
        assert again.wait(job_id, "cancelled", "failed", "lost")["state"] == "cancelled"


def test_a_cluster_that_does_not_answer_is_a_failed_check_request(tmp_path: Path) -> None:
    home = _home(tmp_path)
    dead = write_conf(tmp_path / "dead")  # nothing listens on its ports
    with _serve(home, dead, "server.log") as server:
        made = server.http.post(f"/api/v1/projects/{PROJECT}/runs", json={"run": "seed"})
        assert made.status_code == 201, made.text
        body = {"recipe": "on_slurm", "parameters": {"mode": "ok"}}
        for answer in (server.http.post(f"{LAUNCH}/preview", json=body), server.launch(body)):
            assert answer.status_code == 503, answer.text
            message = answer.json()["error"]["message"]
            assert message.startswith("engine: the slurm engine did not answer: sinfo failed")
        assert server.jobs() == []
        # The local engine beside it still answers.
        local = server.http.post(f"{LAUNCH}/preview", json={**body, "recipe": "tiny"})
        assert local.json()["ready"] is True


def test_doctor_asks_the_configured_slurm_engine(tmp_path: Path, cluster: Cluster) -> None:
    home = _home(tmp_path)
    data = str(home / "data")
    env = {
        "TUNEPLANE_RECIPES_DIR": str(home / "recipes"),
        "TUNEPLANE_SLURM_CONF": str(cluster.conf),
    }
    lines = doctor("--data-dir", data, **env).stdout.splitlines()
    has = f"{cluster.cpus} CPUs, 4.0 GB, {NODE_GPUS} GPUs"
    assert f"OK    the slurm engine has {has}" in lines, lines
    assert any(line.startswith("OK    recipe one_gpu: ") for line in lines), lines
    assert any(line.startswith("FAIL  recipe two_gpus: too few GPUs") for line in lines), lines
    # A cluster that does not answer (nothing listens on its ports) fails, and its recipes
    # are not judged.
    dead = write_conf(tmp_path / "dead")
    env["TUNEPLANE_SLURM_CONF"] = str(dead)
    lines = doctor("--data-dir", data, **env).stdout.splitlines()
    assert any(line.startswith("FAIL  the slurm engine does not answer: sinfo failed")
               for line in lines), lines  # fmt: skip
    assert "SKIP  recipe one_gpu: the slurm engine did not answer" in lines
    env.pop("TUNEPLANE_SLURM_CONF")
    lines = doctor("--data-dir", data, **env).stdout.splitlines()
    assert "FAIL  recipe one_gpu: the slurm engine is not configured" in lines


@pytest.mark.parametrize(
    ("state", "exit_code", "signal", "ours", "expected"),
    [
        ("PENDING", 0, 0, False, ("pending", None, "pending in Slurm (Priority)")),
        ("REQUEUED", 0, 0, False, ("pending", None, "requeued in Slurm (Priority)")),
        ("SUSPENDED", 0, 0, False, ("running", None, "suspended in Slurm as job 7")),
        ("COMPLETED", 0, 0, False, ("succeeded", 0, "exited with 0")),
        ("FAILED", 2, 0, False, ("failed", 2, "exited with 2")),
        ("TIMEOUT", 0, 15, False, ("failed", None, "stopped by Slurm at its time limit")),
        ("OUT_OF_MEMORY", 0, 9, False, ("failed", None, "ran out of memory")),
        ("CANCELLED+", 0, 15, True, ("cancelled", None, "cancelled")),
        ("NODE_FAIL", 0, 0, False, ("lost", None, "its node failed")),
        ("PREEMPTED", 0, 0, False, ("lost", None, "preempted by Slurm")),
        ("SOMETHING_NEW", 0, 0, False, ("lost", None, "Slurm says SOMETHING_NEW")),
    ],
)
def test_the_states_slurm_reports_that_this_cluster_does_not_reach(
    state: str, exit_code: int, signal: int, ours: bool, expected: tuple[object, ...]
) -> None:
    job = SlurmJob("7", "tuneplane-1", 0, state, "Priority", exit_code, signal)
    assert job_state(job, cancelled_here=ours) == expected


def test_fleet_fit_reads_the_largest_node_that_is_up() -> None:
    shown = parse_sinfo(
        "a|64|512000|gpu:a100:4(S:0-1)|mix\n"
        "b|128|256000|(null)|idle\n"
        "c|256|1024000|gpu:8|down*\n"
        "d|8|16000|gpu:h100:2,gpu:l4:1|drain\n"
    )
    assert (shown.cpus, shown.memory_gb, shown.gpus) == (128, 500.0, 4)
