"""``tuneplane launch`` against a real server: recipes, a preview ready and not, a preview
that cannot reach the server (a failed check request, never a passing report), submissions
with an Idempotency-Key, a refused one naming its checks, the jobs and a cancel."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.launch.test_submit import PROJECT, Server, server  # noqa: F401 (a fixture)
from tests.serving import free_port


def _tuneplane(
    target: Server, *args: str, url: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEPLANE_")}
    env["TUNEPLANE_URL"] = url or str(target.http.base_url).rstrip("/")
    env["TUNEPLANE_API_KEY"] = target.http.headers["Authorization"].removeprefix("Bearer ")
    return subprocess.run(
        [sys.executable, "-m", "tuneplane.cli", "launch", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_launch_commands(server: Server) -> None:  # noqa: F811 (the fixture)
    listed = _tuneplane(server, "recipes")
    assert listed.returncode == 0, listed.stderr
    assert "tiny\ttraining\tlocal\ta tiny job that reports three points" in listed.stdout
    ready = _tuneplane(server, "preview", "--project", PROJECT, "tiny", "--param", "mode=ok")
    assert ready.returncode == 0, ready.stderr
    lines = ready.stdout.splitlines()
    assert lines[0].startswith("passed       Recipe compatibility: runs on the local engine")
    assert "Never checked:" in lines
    assert lines[-1] == "ready"
    not_ready = _tuneplane(
        server, "preview", "--project", PROJECT, "tiny", "--param", "mode=ok", "--param", "batch=7"
    )
    assert not_ready.returncode == 1
    assert "failed       Effective-configuration rules: batch % world_size == 0" in not_ready.stdout
    assert not_ready.stdout.splitlines()[-1] == "not ready"
    submit = ("submit", "--project", PROJECT, "tiny", "--param", "mode=ok", "--run", "from-cli")
    first = _tuneplane(server, *submit, "--key", "cli-1")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith(f"job 1: {PROJECT}/from-cli attempt 1, ")
    again = _tuneplane(server, *submit, "--key", "cli-1")  # the same request, retried
    assert again.stdout.strip().endswith("(submitted before with this key)")
    refused = _tuneplane(
        server, "submit", "--project", PROJECT, "tiny", "--param", "mode=ok", "--param", "batch=7"
    )
    assert refused.returncode == 1
    assert (
        "  checks.configuration: batch % world_size == 0: whole batches per rank" in refused.stderr
    )
    server.wait(1, "succeeded")
    jobs = _tuneplane(server, "jobs", "--project", PROJECT)
    assert jobs.stdout.startswith("1\tfrom-cli\ttiny\tsucceeded\tsucceeded\texited with 0")
    ended = _tuneplane(server, "cancel", "--project", PROJECT, "1")
    assert ended.returncode == 1
    assert "job: 1 has ended already (succeeded)" in ended.stderr


def test_a_preview_that_cannot_reach_the_server_is_a_failed_check_request(
    server: Server,  # noqa: F811 (the fixture)
) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    done = _tuneplane(
        server, "preview", "--project", PROJECT, "tiny", "--param", "mode=ok", url=nowhere
    )
    assert done.returncode == 3
    assert done.stderr.startswith(
        f"tuneplane launch preview: check request failed: {nowhere} is unreachable"
    )
    assert done.stdout == ""  # no check, and no "ready", is shown
