"""An Arena Space moved to tuneplane: ``tuneplane serve`` on a data directory that holds
Trackio's databases (``TRACKIO_DIR=/data/trackio``) serves their runs after importing them
in the background, says so, and never touches Trackio's files; a setting turns it off."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serving import running_server
from tests.trackio import local_data

RUN = "/api/v1/projects/arena-p/runs/run-1"


@pytest.fixture(scope="module")
def trackio_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("trackio")
    local_data.write(directory)
    return directory


def _trackio_files(directory: Path) -> dict[str, str]:
    own = ("arena-p", "other")
    return {k: v for k, v in local_data.fingerprint(directory).items() if k.startswith(own)}


def _wait_for(base: str, path: str, done: Any, seconds: float = 60) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        response = httpx.get(base + path, timeout=5)
        if response.status_code == 200 and done(response.json()):
            return response.json()
        assert time.monotonic() < deadline, f"{path}: {response.status_code} {response.text}"
        time.sleep(0.2)


def _serve_env(**extra: str) -> dict[str, str]:
    return {"TUNEPLANE_TRACKIO_IMPORT": "", "TUNEPLANE_DEFAULT_VISIBILITY": "", **extra}


def test_serve_imports_its_data_directory_in_the_background(
    trackio_data: Path, tmp_path: Path
) -> None:
    data = tmp_path / "trackio"  # the Space's TRACKIO_DIR, tuneplane's data directory too
    data.mkdir()
    for path in trackio_data.iterdir():
        (data / path.name).write_bytes(path.read_bytes())
    before = _trackio_files(data)
    log = tmp_path / "server.log"
    steps = local_data.expected_steps()[("arena-p", "run-1")]
    with running_server("--data-dir", str(data), env=_serve_env(), output=log) as base:
        # Public, as Arena projects are: an anonymous visitor sees the runs.
        metrics = _wait_for(
            base,
            RUN + "/metrics",
            lambda found: any(m["metric"] == "loss" and m["count"] == len(steps) for m in found),
        )
        alerts = _wait_for(base, RUN + "/alerts", lambda found: len(found) == 2)
        other = _wait_for(base, "/api/v1/projects/other/runs", lambda found: len(found) == 1)
    by_name = {m["metric"]: m for m in metrics}
    assert by_name["bad"]["invalid_count"] == sum(1 for s in steps if s % 10 in (2, 3, 4))
    assert by_name["system/gpu/util"]["count"] == 3
    assert {a["title"] for a in alerts} == {"alert 0", "alert 1"}
    assert other[0]["run"] == "r2"
    printed = log.read_text()
    assert "importing 2 Trackio project databases from" in printed
    assert "Trackio import done: 2 projects, 3 runs (3 new)" in printed
    assert _trackio_files(data) == before

    # The next start reads them again and stores nothing twice.
    log_again = tmp_path / "again.log"
    with running_server("--data-dir", str(data), env=_serve_env(), output=log_again) as base:
        deadline = time.monotonic() + 60
        while "Trackio import done" not in log_again.read_text():
            assert time.monotonic() < deadline
            time.sleep(0.2)
        again = {m["metric"]: m for m in httpx.get(base + RUN + "/metrics").json()}
    assert again == by_name
    assert "(0 new): 0 points (0 NaN/inf) in 0 events and 0 alerts stored" in log_again.read_text()


def test_the_setting_turns_it_off(trackio_data: Path, tmp_path: Path) -> None:
    data = tmp_path / "trackio"
    data.mkdir()
    for path in trackio_data.iterdir():
        (data / path.name).write_bytes(path.read_bytes())
    log = tmp_path / "server.log"
    env = _serve_env(TUNEPLANE_TRACKIO_IMPORT="off")
    with running_server("--data-dir", str(data), env=env, output=log) as base:
        time.sleep(2)
        assert httpx.get(base + "/api/v1/projects/arena-p/runs").status_code == 404
    assert "Trackio" not in log.read_text()
