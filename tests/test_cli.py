"""The command line, run as real processes."""

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from tests.helpers import log
from tests.serving import running_server, serve_command

SECRET = {"TUNEPLANE_INGEST_SECRET": "cli-secret"}
AUTH = {"Authorization": "Bearer cli-secret"}


def test_serve_defaults_to_sqlite_in_the_working_directory(tmp_path: Path) -> None:
    env = {**SECRET, "TUNEPLANE_DIR": "", "TRACKIO_DIR": ""}
    with running_server(env=env, cwd=tmp_path) as base:
        body = {"logs": [log("e1", 1, {"reward": 0.5})]}
        assert httpx.post(base + "/ingest", json=body, headers=AUTH).status_code == 200
        assert httpx.get(base + "/api/v1/projects").json()[0]["project"] == "burtenshaw"
    assert (tmp_path / "tuneplane-data" / "tuneplane.db").exists()


def test_trackio_dir_is_honoured(tmp_path: Path) -> None:
    env = {**SECRET, "TRACKIO_DIR": str(tmp_path / "trackio"), "TUNEPLANE_DIR": ""}
    with running_server(env=env, cwd=tmp_path):
        pass
    assert (tmp_path / "trackio" / "tuneplane.db").exists()


def test_second_server_on_the_same_data_directory_is_refused(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    with running_server("--data-dir", data, env=SECRET) as base:
        second = subprocess.run(
            [*serve_command("--data-dir", data, "--port", "1")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 2
        assert "already used by another tuneplane server" in second.stderr
        assert "Traceback" not in second.stderr
        # The first server is unharmed.
        assert httpx.get(base + "/healthz").status_code == 200


def test_concurrent_workers_never_see_database_locked(tmp_path: Path) -> None:
    """32 workers post at once to one SQLite-backed server: every batch is stored."""
    with running_server("--data-dir", str(tmp_path / "data"), env=SECRET) as base:

        def worker(n: int) -> list[int]:
            statuses = []
            with httpx.Client(base_url=base, headers=AUTH) as http:
                for batch in range(10):
                    events = [
                        log(f"w{n}-b{batch}-{i}", batch * 8 + i, {"reward": float(i), "loss": 1.0})
                        for i in range(8)
                    ]
                    statuses.append(http.post("/ingest", json={"logs": events}).status_code)
            return statuses

        with ThreadPoolExecutor(32) as pool:
            statuses = [s for result in pool.map(worker, range(32)) for s in result]
        assert statuses == [200] * 320
        run = httpx.get(base + "/api/v1/projects/burtenshaw/runs").json()[0]
        assert run["point_count"] == 32 * 10 * 8 * 2


def test_db_upgrade_is_idempotent(tmp_path: Path) -> None:
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-m", "tuneplane.cli", "db", "upgrade", "--data-dir", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert "up to date" in done.stdout
