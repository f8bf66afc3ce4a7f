"""Offline runs, with real processes: ``init()`` and ``tuneplane run`` journal the whole
attempt when the server cannot be reached at start (or ``TUNEPLANE_MODE=offline``), and
``tuneplane sync`` later creates the run and replays everything once, in order; a sync
killed half way and run again, and a server that goes away mid-run, lose nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from tests.client import training_job
from tests.client.runs import (
    PROJECT,
    Server,
    all_log_lines,
    expected_log,
    runner_command,
    runner_env,
)
from tests.client.world import dead_url
from tests.serving import running_server
from tuneplane.client.spool import find_journals

SCRIPT = """
import sys, tuneplane
run = tuneplane.init(project={project!r}, name={run!r}, config={{"lr": 0.25}}, tags=["t1"])
for step in range({steps}):
    run.log({{"train/loss": 1.0 / (step + 1), "train/reward": step * 0.5}})
    print(f"step {{step}}")
run.alert("reward high", "above 2", level="info", step=4)
run.reporter.event("note", {{"x": 1}}, step=3)
run.reporter.trajectory(scope="training", step=2, trajectory_id="r2",
                        messages=[{{"role": "user", "content": "hi"}}])
print("to stderr", file=sys.stderr)
{end}
"""


def run_script(
    url: str, spool: Path, run: str, *, steps: int = 20, end: str = "run.finish()", **env: str
) -> subprocess.CompletedProcess[str]:
    code = SCRIPT.format(project=PROJECT, run=run, steps=steps, end=end)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        # A key, so that only the server is missing (the live test passes the real one).
        env=runner_env(
            **{
                "TUNEPLANE_URL": url,
                "TUNEPLANE_SPOOL_DIR": str(spool),
                "TUNEPLANE_API_KEY": f"tpk_{uuid.uuid4().hex}",
                **env,
            }
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )


def tuneplane_sync(server: Server, spool: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEPLANE_")}
    return subprocess.run(
        [sys.executable, "-m", "tuneplane.cli", "sync", str(spool), *args],
        env={**env, "TUNEPLANE_API_KEY": server.key},
        capture_output=True,
        text=True,
        timeout=180,
    )


def run_or_none(server: Server, run: str) -> dict[str, Any] | None:
    found = httpx.get(
        f"{server.base}/api/v1/projects/{PROJECT}/runs/{run}",
        headers={"Authorization": f"Bearer {server.key}"},
        timeout=10,
    )
    return found.json() if found.status_code == 200 else None


def assert_script_arrived(server: Server, run: str, steps: int) -> None:
    base = f"/api/v1/projects/{PROJECT}/runs/{run}"
    found = server.run(run)
    assert found["config"] == {"lr": 0.25}
    assert found["tags"] == ["t1"]
    assert found["status"] == "succeeded"
    page = server.get(f"{base}/points/train/loss", limit=10_000)
    assert [(p["step"], p["value"]) for p in page["points"]] == [
        (step, 1.0 / (step + 1)) for step in range(steps)
    ]
    (alert,) = server.get(f"{base}/alerts")
    assert (alert["title"], alert["step"]) == ("reward high", 4)
    events = server.get(f"{base}/observations")
    assert [(e["name"], e["step"]) for e in events if e["type"] == "event"] == [("note", 3)]
    assert len(server.get(f"{base}/trajectories")["items"]) == 1
    lines = all_log_lines(server, run)
    texts = [(line["stream"], line["text"]) for line in sorted(lines, key=lambda x: x["seq"])]
    stdout = [text for stream, text in texts if stream == "stdout"]
    assert stdout == [f"step {step}" for step in range(steps)]
    assert ("stderr", "to stderr") in texts
    assert len({line["seq"] for line in lines}) == len(lines)  # each line once


def assert_job_arrived(server: Server, run: str, steps: int) -> None:
    """The training job's points and lines, each once (its reporter's own lines on stderr,
    which say what waits in the spool, come on top)."""
    base = f"/api/v1/projects/{PROJECT}/runs/{run}"
    for name in ("train/loss", "eval/acc"):
        page = server.get(f"{base}/points/{name}", limit=10_000)
        expected = [(step, training_job.metrics(step, steps)[name]) for step in range(steps)]
        assert [(p["step"], p["value"]) for p in page["points"]] == expected, name
    lines = sorted(all_log_lines(server, run), key=lambda line: line["seq"])
    assert [line["seq"] for line in lines] == list(range(len(lines)))
    for stream, expected_raw in (
        ("stdout", training_job.expected_stdout(steps)),
        ("stderr", training_job.expected_stderr(steps)),
    ):
        got = [
            (line["text"], line["data"])
            for line in lines
            if line["stream"] == stream and not line["text"].startswith("tuneplane: ")
        ]
        assert got == [expected_log(raw) for raw in expected_raw], stream


def test_without_a_key_the_run_is_untracked_not_offline(tmp_path: Path) -> None:
    done = run_script(dead_url(), tmp_path / "spool", "nokey", TUNEPLANE_API_KEY="")
    assert "telemetry is off" in done.stderr
    assert "no API key" in done.stderr
    assert not (tmp_path / "spool").exists()


def test_init_with_the_server_down_at_start_is_journaled_and_synced_once(
    sqlite_server: Server, tmp_path: Path
) -> None:
    server, spool, run = sqlite_server, tmp_path / "spool", f"off-{uuid.uuid4().hex[:8]}"
    began = time.time()
    done = run_script(dead_url(), spool, run)
    ended = time.time()
    assert done.returncode == 0, done.stderr
    assert "journaling e2e/" in done.stderr
    assert "run `tuneplane sync`" in done.stderr
    assert run_or_none(server, run) is None  # nothing reached a server
    time.sleep(2.0)  # the sync comes later: its clock must not be the points'
    synced = tuneplane_sync(server, spool, "--server", server.base)
    assert synced.returncode == 0, synced.stderr
    assert "(offline)" in synced.stderr
    assert_script_arrived(server, run, 20)
    # Each point keeps the time it was logged at, not the time sync delivered it.
    base = f"/api/v1/projects/{PROJECT}/runs/{run}"
    times = [p["time"] for p in server.get(f"{base}/points/train/loss", limit=100)["points"]]
    assert len(times) == 20
    assert all(began <= moment <= ended for moment in times), (began, times, ended)
    assert times == sorted(times)
    assert find_journals(spool) == []
    assert not any(spool.rglob("run.json"))  # the offline attempt is gone with its journals
    again = tuneplane_sync(server, spool, "--server", server.base)
    assert again.returncode == 0
    assert "nothing to deliver" in again.stderr
    assert server.run(run)["attempt"] == 1


def test_offline_mode_journals_even_with_the_server_up(
    sqlite_server: Server, tmp_path: Path
) -> None:
    server, spool, run = sqlite_server, tmp_path / "spool", f"off-{uuid.uuid4().hex[:8]}"
    done = run_script(server.base, spool, run, TUNEPLANE_MODE="offline")
    assert done.returncode == 0, done.stderr
    assert run_or_none(server, run) is None
    synced = tuneplane_sync(server, spool)  # to the server the journal names
    assert synced.returncode == 0, synced.stderr
    assert_script_arrived(server, run, 20)


def test_a_crash_offline_is_replayed_with_its_traceback_before_the_failed_status(
    sqlite_server: Server, tmp_path: Path
) -> None:
    server, spool, run = sqlite_server, tmp_path / "spool", f"off-{uuid.uuid4().hex[:8]}"
    crash = "raise RuntimeError('CUDA out of memory')"
    done = run_script(dead_url(), spool, run, steps=3, end=crash)
    assert done.returncode == 1
    synced = tuneplane_sync(server, spool, "--server", server.base)
    assert synced.returncode == 0, synced.stderr
    found = server.run(run)
    assert (found["status"], found["exit_code"]) == ("failed", 1)
    texts = [line["text"] for line in all_log_lines(server, run)]
    assert "RuntimeError: CUDA out of memory" in texts


def test_the_runner_offline_at_start_then_sync(sqlite_server: Server, tmp_path: Path) -> None:
    server, spool, run = sqlite_server, tmp_path / "spool", f"off-{uuid.uuid4().hex[:8]}"
    done = subprocess.run(
        runner_command(dead_url(), server.data_dir, run, "40", "0"),
        env=runner_env(TUNEPLANE_SPOOL_DIR=str(spool)),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
    )
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, stderr
    assert done.stdout == b"\n".join(training_job.expected_stdout(40))
    assert "journaling e2e/" in stderr
    assert run_or_none(server, run) is None
    synced = tuneplane_sync(server, spool, "--server", server.base)
    assert synced.returncode == 0, synced.stderr
    assert_job_arrived(server, run, 40)
    found = server.run(run)
    assert (found["status"], found["exit_code"]) == ("succeeded", 0)


def test_a_sync_killed_half_way_and_run_again_stores_everything_once(
    sqlite_server: Server, tmp_path: Path
) -> None:
    server, spool, run = sqlite_server, tmp_path / "spool", f"off-{uuid.uuid4().hex[:8]}"
    steps = 9_000  # 18,000 points: nine batches
    done = run_script(dead_url(), spool, run, steps=steps)
    assert done.returncode == 0, done.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEPLANE_")}
    process = subprocess.Popen(
        [sys.executable, "-m", "tuneplane.cli", "sync", str(spool), "--server", server.base],
        env={**env, "TUNEPLANE_API_KEY": server.key},
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    with process:
        for line in process.stderr:  # a tenth delivered, and more on its way: kill it
            if "items delivered" in line and not line.startswith("tuneplane: items delivered 0/"):
                process.kill()
                break
        process.wait(timeout=30)
    assert process.returncode == -9
    cut = server.run(run)
    assert cut["status"] == "running"  # the final status goes last, and did not go
    synced = tuneplane_sync(server, spool, "--server", server.base)
    assert synced.returncode == 0, synced.stderr
    assert_script_arrived(server, run, steps)
    found = server.run(run)
    assert found["attempt"] == 1  # the cut sync's attempt, continued
    base = f"/api/v1/projects/{PROJECT}/runs/{run}"
    summaries = {m["metric"]: m for m in server.get(base + "/metrics")}
    assert summaries["train/loss"]["count"] == steps
    assert tuneplane_sync(server, spool, "--server", server.base).returncode == 0


OUTAGE_JOB = """
import os, sys, time, tuneplane
ready, gate = sys.argv[1], sys.argv[2]
for step in range(10):
    tuneplane.report({"train/loss": 1.0 / (step + 1)}, step=step)
    print(f"before {step}", flush=True)
open(ready, "w").close()
deadline = time.monotonic() + 60
while not os.path.exists(gate) and time.monotonic() < deadline:
    time.sleep(0.05)
for step in range(10, 20):
    tuneplane.report({"train/loss": 1.0 / (step + 1)}, step=step)
    print(f"during {step}", flush=True)
"""


def test_after_an_outage_sync_ends_the_run_without_a_false_heartbeat_alert(
    tmp_path: Path,
) -> None:
    """The server stops mid-run and comes back after the job ended; a heartbeat rule
    judges the run stale meanwhile. Sync replays the outage's points, log lines and the
    final status with the time the job ended: the run is finished and the stale episode,
    opened after that, is withdrawn."""
    data, spool, run = tmp_path / "data", tmp_path / "spool", f"out-{uuid.uuid4().hex[:8]}"
    ready, gate = tmp_path / "ready", tmp_path / "gate"
    job = tmp_path / "job.py"
    job.write_text(OUTAGE_JOB)
    quick = {"TUNEPLANE_ALERT_CHECK_INTERVAL": "0.2"}
    with running_server("--data-dir", str(data), env=quick) as first:
        server = Server(first, data)
        command = [
            sys.executable, "-m", "tuneplane.cli", "run", "--server", first,
            "--data-dir", str(data), "--project", PROJECT, "--run", run,
            "--", sys.executable, str(job), str(ready), str(gate),
        ]  # fmt: skip
        process = subprocess.Popen(
            command,
            env=runner_env(TUNEPLANE_SPOOL_DIR=str(spool), TUNEPLANE_FLUSH_TIMEOUT="1"),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        rule = {"name": "quick heartbeat", "kind": "heartbeat", "seconds": 2}
        wait_for(lambda: ready.exists() and run_or_none(server, run) is not None)
        wait_for(lambda: (server.run(run)["transport"] or {}).get("heartbeat_at") is not None)
        wait_for(
            lambda: len(server.get(f"/api/v1/projects/{PROJECT}/runs/{run}/logs")["lines"]) >= 10
        )
        created = httpx.post(
            f"{first}/api/v1/projects/{PROJECT}/alert-rules",
            json=rule,
            headers={"Authorization": f"Bearer {server.key}"},
            timeout=10,
        )
        assert created.status_code == 201, created.text
        rule_id = created.json()["id"]
    gate.touch()  # the server is gone: the job trains on and ends
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr.decode()
    assert "kept in the spool" in stderr.decode()
    with running_server("--data-dir", str(data), env=quick) as second:
        server = Server(second, data)
        assert server.run(run)["status"] == "running"
        # Back, the server sees a quiet heartbeat: the rule opens a stale episode.
        wait_for(lambda: any("heartbeat stale" in a["title"] for a in alerts(server, run)))
        synced = tuneplane_sync(server, spool, "--server", second)
        assert synced.returncode == 0, synced.stderr
        found = server.run(run)
        assert (found["status"], found["exit_code"]) == ("succeeded", 0)
        time.sleep(1.0)  # a few checks of the rule after the status
        titles = [a["title"] for a in alerts(server, run)]
        assert not any("heartbeat" in title for title in titles), titles
        episodes = server.get(f"/api/v1/projects/{PROJECT}/alert-rules/{rule_id}")["episodes"]
        assert episodes == []  # withdrawn: it opened after the run had ended
        page = server.get(f"/api/v1/projects/{PROJECT}/runs/{run}/points/train/loss")
        assert [p["step"] for p in page["points"]] == list(range(20))
        texts = [line["text"] for line in all_log_lines(server, run)]
        assert [t for t in texts if t.startswith("during")] == [
            f"during {s}" for s in range(10, 20)
        ]


def alerts(server: Server, run: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = server.get(f"/api/v1/projects/{PROJECT}/runs/{run}/alerts")
    return found


def wait_for(condition: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.1)


def test_a_status_says_when_it_was_reached_or_is_refused(server: Server) -> None:
    run = f"late-{uuid.uuid4().hex[:8]}"
    token = server.start_attempt(run)
    url = f"{server.base}/api/v1/ingest/status"
    auth = {"Authorization": f"Bearer {token}"}
    for bad in (-1, "yesterday", float("inf")):
        body = {"status": "succeeded", "time": bad}
        refused = httpx.post(url, content=json_text(body), headers=auth, timeout=10)
        assert refused.status_code in (400, 422), refused.text
        assert "time" in refused.text
    late = httpx.post(url, json={"status": "failed", "exit_code": 3, "time": 1.0}, headers=auth)
    assert late.status_code == 200, late.text
    assert (server.run(run)["status"], server.run(run)["exit_code"]) == ("failed", 3)


def json_text(body: object) -> str:
    return json.dumps(body)  # Infinity too, which httpx's json= refuses


def test_init_with_the_spool_and_the_server_up_delivers_live_and_leaves_nothing(
    sqlite_server: Server, tmp_path: Path
) -> None:
    server, spool, run = sqlite_server, tmp_path / "spool", f"on-{uuid.uuid4().hex[:8]}"
    began = time.time()
    done = run_script(server.base, spool, run, TUNEPLANE_API_KEY=server.key)
    ended = time.time()
    assert done.returncode == 0, done.stderr
    assert "kept in the spool" not in done.stderr
    assert_script_arrived(server, run, 20)
    base = f"/api/v1/projects/{PROJECT}/runs/{run}"
    times = [p["time"] for p in server.get(f"{base}/points/train/loss", limit=100)["points"]]
    assert all(began <= moment <= ended for moment in times), (began, times, ended)
    assert find_journals(spool) == []


def test_init_s_config_under_an_offline_runner_is_replayed(
    sqlite_server: Server, tmp_path: Path
) -> None:
    server, spool, run = sqlite_server, tmp_path / "spool", f"off-{uuid.uuid4().hex[:8]}"
    code = (
        "import tuneplane\n"
        "with tuneplane.init(config={'lr': 0.5}) as r:\n"
        "    r.log({'train/loss': 1.0})\n"
    )
    command = [
        sys.executable, "-m", "tuneplane.cli", "run", "--server", server.base,
        "--data-dir", str(server.data_dir), "--project", PROJECT, "--run", run,
        "--config", '{"recipe": "sft"}', "--", sys.executable, "-c", code,
    ]  # fmt: skip
    done = subprocess.run(
        command,
        env=runner_env(TUNEPLANE_SPOOL_DIR=str(spool), TUNEPLANE_MODE="offline"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "config is kept in the spool" in done.stderr
    assert run_or_none(server, run) is None
    synced = tuneplane_sync(server, spool)
    assert synced.returncode == 0, synced.stderr
    found = server.run(run)
    assert found["config"] == {"recipe": "sft"}  # the runner's --config made the run
    assert found["attempt_configs"] == [{"attempt": 1, "config": {"lr": 0.5}}]
    assert found["status"] == "succeeded"
