"""``tuneplane doctor`` against a real server, directly and through a real nginx that
buffers responses, and with storage that takes no writes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from tests.launch.jobs import write_recipes
from tests.nginx import running_nginx
from tests.serving import running_server


def doctor(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tuneplane.cli", "doctor", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def _with_a_run(base: str, data: Path) -> None:
    admin = {"Authorization": f"Bearer {(data / 'admin.key').read_text().strip()}"}
    made = httpx.post(f"{base}/api/v1/projects/demo/runs", json={"run": "r1"}, headers=admin)
    assert made.status_code == 201, made.text


def test_a_healthy_server_passes_with_a_warning_for_its_loopback_address(tmp_path: Path) -> None:
    with running_server("--data-dir", str(tmp_path)) as base:
        _with_a_run(base, tmp_path)
        done = doctor("--server", base, "--data-dir", str(tmp_path))
        in_a_cluster = doctor("--server", base, "--data-dir", str(tmp_path),
                              KUBERNETES_SERVICE_HOST="10.0.0.1")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("WARN  ")
    assert "loopback" in lines[0]
    assert any(line.startswith("OK    ") and "answers (store ok)" in line for line in lines)
    assert any(line.startswith("OK    live streams arrive unbuffered") for line in lines)
    assert "OK    the database takes writes" in lines
    assert any(line.startswith("OK    the blob store takes writes") for line in lines)
    assert in_a_cluster.returncode == 1
    assert "FAIL  " in in_a_cluster.stdout
    assert "inside a cluster (KUBERNETES_SERVICE_HOST is set)" in in_a_cluster.stdout


def test_a_proxy_that_buffers_live_streams_is_named_with_the_fix(tmp_path: Path) -> None:
    with running_server("--data-dir", str(tmp_path / "data")) as base:
        _with_a_run(base, tmp_path / "data")
        upstream = base.removeprefix("http://")
        with running_nginx(upstream, "/tp", tmp_path / "nginx", buffering=True) as proxy:
            done = doctor("--server", f"{proxy.origin}/tp", "--workers-only",
                          "--data-dir", str(tmp_path / "data"))  # fmt: skip
        with running_nginx(upstream, "/tp", tmp_path / "nginx2") as proxy:
            unbuffered = doctor("--server", f"{proxy.origin}/tp", "--workers-only",
                                "--data-dir", str(tmp_path / "data"))  # fmt: skip
    assert done.returncode == 1, done.stdout
    assert "FAIL  live streams are buffered" in done.stdout
    assert "proxy_buffering off" in done.stdout
    assert unbuffered.returncode == 0, unbuffered.stdout
    assert "OK    live streams arrive unbuffered" in unbuffered.stdout


def test_an_unreachable_server_and_unwritable_storage_fail_clearly(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "tuneplane.db").write_bytes(b"")
    done = doctor("--server", "http://127.0.0.1:9", "--data-dir", str(tmp_path / "data"),
                  TUNEPLANE_BLOB_URL="/dev/null/blobs")  # fmt: skip
    assert done.returncode == 1
    assert "FAIL  http://127.0.0.1:9 does not answer" in done.stdout
    assert "FAIL  the blob store does not take writes" in done.stdout
    assert "Traceback" not in done.stderr


def test_the_recipes_and_what_the_local_engine_can_run_now(tmp_path: Path) -> None:
    recipes = write_recipes(tmp_path / "recipes")
    with running_server("--data-dir", str(tmp_path / "data")) as base:
        done = doctor("--server", base, "--data-dir", str(tmp_path / "data"),
                      TUNEPLANE_RECIPES_DIR=str(recipes))  # fmt: skip
        broken = tmp_path / "broken"
        broken.mkdir()
        (broken / "x.toml").write_text('engine = "kubernetes"')
        refused = doctor("--server", base, "--data-dir", str(tmp_path / "data"),
                         TUNEPLANE_RECIPES_DIR=str(broken))  # fmt: skip
    lines = done.stdout.splitlines()
    assert f"OK    10 recipes in {recipes}" in lines, done.stdout
    assert any(line.startswith("OK    the local engine has ") for line in lines), done.stdout
    assert any(line.startswith("OK    recipe tiny: ") and "bin/python runs (Python 3." in line
               for line in lines)  # fmt: skip
    assert any(line.startswith("FAIL  recipe gpu: too few GPUs (needs 1, has 0)")
               for line in lines)  # fmt: skip
    assert any(line.startswith("FAIL  recipe no_env: ") and line.endswith("does not exist")
               for line in lines)  # fmt: skip
    assert any(line.startswith("SKIP  recipe image: the image ghcr.io/example/trainer:1")
               for line in lines)  # fmt: skip
    assert done.returncode == 1
    assert f"FAIL  the recipes have 4 problems, the first: {broken / 'x.toml'}: " in refused.stdout
