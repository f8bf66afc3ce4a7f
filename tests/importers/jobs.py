"""``tuneplane run`` jobs that import and upload, run as real processes against a real
server, and what the server's API says arrived."""

from __future__ import annotations

import shlex
import subprocess
import sys
from typing import Any

from tests.client.runs import PROJECT, Server, runner_env

TUNEPLANE = f"{shlex.quote(sys.executable)} -m tuneplane.cli"


def job(
    server: Server, run: str, script: str, *, url: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """``tuneplane run -- sh -c SCRIPT`` (``$TUNEPLANE`` in it is our CLI)."""
    command = [
        sys.executable, "-m", "tuneplane.cli", "run",
        "--server", url or server.base, "--data-dir", str(server.data_dir),
        "--project", PROJECT, "--run", run,
        "--", "sh", "-c", script,
    ]  # fmt: skip
    return subprocess.run(
        command,
        env=runner_env(TUNEPLANE=TUNEPLANE, **env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=240,
    )


def rounds(server: Server, run: str, attempt: int = 1) -> dict[str, dict[str, Any]]:
    answer = server.get(f"/api/v1/projects/{PROJECT}/runs/{run}/evaluation", attempt=attempt)
    return {r["round_id"]: r for r in answer["rounds"]}


def trials(server: Server, run: str, round_id: str, attempt: int = 1) -> dict[str, Any]:
    found: dict[str, Any] = {}
    after = None
    while True:
        params: dict[str, Any] = {"attempt": attempt, "limit": 100}
        if after is not None:
            params["after"] = after
        page = server.get(
            f"/api/v1/projects/{PROJECT}/runs/{run}/evaluation/{round_id}/trials", **params
        )
        found.update({t["trial_id"]: t for t in page["trials"]})
        after = page.get("next")
        if after is None:
            return found


def trajectories(server: Server, run: str, round_id: str, attempt: int = 1) -> list[Any]:
    page = server.get(
        f"/api/v1/projects/{PROJECT}/runs/{run}/trajectories",
        scope="evaluation",
        attempt=attempt,
        round_id=round_id,
        limit=200,
    )
    items: list[Any] = page["items"]
    return items


def body(server: Server, run: str, item: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = server.get(
        f"/api/v1/projects/{PROJECT}/runs/{run}/trajectories/{item['id']}", limit=200
    )
    return found


def events(server: Server, run: str, name: str) -> list[dict[str, Any]]:
    """The run's latest free events (at most 100) named ``name``."""
    latest = server.get(f"/api/v1/projects/{PROJECT}/runs/{run}/observations", type="event")
    return [event for event in latest if event["name"] == name]
