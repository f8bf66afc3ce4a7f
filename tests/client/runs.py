"""Running ``tuneplane run`` as a real process against a real server, and reading back
what arrived, for the runner's end-to-end tests."""

from __future__ import annotations

import base64
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.client import training_job
from tuneplane.client.logs import Line, encode_line

JOB = Path(training_job.__file__)
PROJECT = "e2e"


@dataclass(frozen=True)
class Server:
    base: str
    data_dir: Path

    @property
    def key(self) -> str:
        return (self.data_dir / "admin.key").read_text().strip()

    def get(self, path: str, **params: Any) -> Any:
        response = httpx.get(
            self.base + path,
            params=params,
            headers={"Authorization": f"Bearer {self.key}"},
            timeout=10,
        )
        assert response.status_code == 200, response.text
        return response.json()

    def start_attempt(self, run: str) -> str:
        """Create ``run`` (or resume it) and start an execution attempt; its ingest token."""
        headers = {"Authorization": f"Bearer {self.key}"}
        runs = f"{self.base}/api/v1/projects/{PROJECT}/runs"
        created = httpx.post(runs, json={"run": run}, headers=headers, timeout=10)
        assert created.status_code in (200, 201), created.text
        attempt = httpx.post(f"{runs}/{run}/attempts", headers=headers, timeout=10)
        assert attempt.status_code == 201, attempt.text
        token: str = attempt.json()["token"]
        return token

    def run(self, run: str) -> dict[str, Any]:
        found: dict[str, Any] = self.get(f"/api/v1/projects/{PROJECT}/runs/{run}")
        return found

    def wait_until_running(self, run: str, timeout: float = 20.0) -> None:
        """Until the runner has reported the attempt running (the run may not exist yet)."""
        deadline = time.monotonic() + timeout
        while True:
            response = httpx.get(
                f"{self.base}/api/v1/projects/{PROJECT}/runs/{run}",
                headers={"Authorization": f"Bearer {self.key}"},
                timeout=10,
            )
            if response.status_code == 200 and response.json()["status"] == "running":
                return
            assert time.monotonic() < deadline, f"{run} was not reported running"
            time.sleep(0.05)


def runner_command(url: str, data_dir: Path, run: str, *job_args: str) -> list[str]:
    return [
        sys.executable, "-m", "tuneplane.cli", "run",
        "--server", url, "--data-dir", str(data_dir),
        "--project", PROJECT, "--run", run,
        "--", sys.executable, str(JOB), *job_args,
    ]  # fmt: skip


def runner_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TUNEPLANE_JOB_") and k not in ("TUNEPLANE_API_KEY", "TUNEPLANE_URL")
    }
    return {**env, **extra}


def tuneplane_run(
    url: str, data_dir: Path, run: str, *job_args: str, **env: str
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        runner_command(url, data_dir, run, *job_args),
        env=runner_env(**env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=90,
    )


def all_log_lines(server: Server, run: str) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    after = 0
    while True:
        page = server.get(f"/api/v1/projects/{PROJECT}/runs/{run}/logs", after=after, limit=5000)
        if not page["lines"]:
            return lines
        lines += page["lines"]
        after = page["next_cursor"]


def expected_log(raw: bytes) -> tuple[str, str | None]:
    return encode_line(Line(raw))


def assert_everything_arrived_once(server: Server, run: str, steps: int) -> dict[str, Any]:
    """Every point and every log line of the training job is stored exactly once."""
    base = f"/api/v1/projects/{PROJECT}/runs/{run}"
    nans = [
        step
        for step in range(steps)
        if math.isnan(training_job.metrics(step, steps)["train/reward"])
    ]
    summaries = {m["metric"]: m for m in server.get(base + "/metrics")}
    assert set(summaries) == {"train/loss", "train/reward", "eval/acc"}
    assert summaries["train/loss"]["count"] == steps
    assert summaries["eval/acc"]["count"] == steps
    assert summaries["train/reward"]["count"] == steps - len(nans)
    assert summaries["train/reward"]["invalid_count"] == len(nans)
    for name in ("train/loss", "train/reward", "eval/acc"):
        page = server.get(f"{base}/points/{name}", limit=10_000)
        stored = [(p["step"], p["value"]) for p in page["points"]]
        expected = [
            (step, value)
            for step in range(steps)
            if not math.isnan(value := training_job.metrics(step, steps)[name])
        ]
        assert stored == expected, name
    invalid = server.get(f"{base}/invalid/train/reward")
    assert [(p["step"], p["kind"]) for p in invalid] == [(step, "nan") for step in nans]

    lines = all_log_lines(server, run)
    assert sorted(line["seq"] for line in lines) == list(range(len(lines)))
    assert {line["attempt"] for line in lines} == {1}
    for stream, expected_raw in (
        ("stdout", training_job.expected_stdout(steps)),
        ("stderr", training_job.expected_stderr(steps)),
    ):
        got = [
            (line["text"], line["data"])
            for line in sorted(lines, key=lambda line: line["seq"])
            if line["stream"] == stream
        ]
        assert got == [expected_log(raw) for raw in expected_raw], stream
    bad = next(line for line in lines if line["data"] is not None)
    assert base64.b64decode(bad["data"]) == b"bytes \xff\xfe end"
    return server.run(run)
