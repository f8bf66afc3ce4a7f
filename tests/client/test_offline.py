"""Offline runs, with real processes: ``init()`` and ``tuneplane run`` journal the whole
attempt when the server cannot be reached at start (or ``TUNEPLANE_MODE=offline``), and
``tuneplane sync`` later creates the run and replays everything once, in order; a sync
killed half way and run again, and a server that goes away mid-run, lose nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
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
        env=runner_env(TUNEPLANE_URL=url, TUNEPLANE_SPOOL_DIR=str(spool), **env),
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


def test_init_with_the_server_down_at_start_is_journaled_and_synced_once(
    sqlite_server: Server, tmp_path: Path
) -> None:
    server, spool, run = sqlite_server, tmp_path / "spool", f"off-{uuid.uuid4().hex[:8]}"
    done = run_script(dead_url(), spool, run)
    assert done.returncode == 0, done.stderr
    assert "journaling e2e/" in done.stderr
    assert "run `tuneplane sync`" in done.stderr
    assert run_or_none(server, run) is None  # nothing reached a server
    synced = tuneplane_sync(server, spool, "--server", server.base)
    assert synced.returncode == 0, synced.stderr
    assert "(offline)" in synced.stderr
    assert_script_arrived(server, run, 20)
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
