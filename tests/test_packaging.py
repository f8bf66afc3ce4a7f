"""The light install: ``pip install .`` without extras gives the SDK and the runner, none of
the server's dependencies, and the server's commands say what to install."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


@pytest.fixture(scope="module")
def light(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment with the package installed without extras."""
    home = tmp_path_factory.mktemp("light")
    venv.create(home, with_pip=True)
    python = home / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         str(ROOT)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr
    return home


def test_the_sdk_installs_without_the_server(light: Path) -> None:
    python = str(light / "bin" / "python")
    code = """
import importlib.util, tuneplane
from tuneplane.client.reporter import Reporter
from tuneplane.client import runner, session
missing = [m for m in ("fastapi", "uvicorn", "sqlalchemy", "alembic", "argon2", "authlib")
           if importlib.util.find_spec(m) is not None]
assert not missing, missing
r = tuneplane.init(project="p", name="r", server="http://127.0.0.1:9")
assert not r.reporting  # no server there: training goes on
"""
    done = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, timeout=120, cwd=light
    )
    assert done.returncode == 0, done.stderr
    assert "telemetry is off for p/r: no API key" in done.stderr


def test_server_commands_say_what_to_install(light: Path) -> None:
    done = subprocess.run(
        [str(light / "bin" / "tuneplane"), "serve"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=light,
    )
    assert done.returncode == 2
    assert "pip install 'tuneplane[server]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_runner_runs_a_command_without_the_server_packages(light: Path) -> None:
    done = subprocess.run(
        [str(light / "bin" / "tuneplane"), "run", "--project", "p", "--run", "r",
         "--server", "http://127.0.0.1:9", "--", sys.executable, "-c", "print('trained')"],
        capture_output=True, text=True, timeout=120, cwd=light,
        env={"TUNEPLANE_API_KEY": "tpk_unused", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "trained" in done.stdout


def test_the_inspect_import_says_what_to_install(light: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [str(light / "bin" / "tuneplane"), "import", "inspect", str(tmp_path),
         "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=60, cwd=light,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"tuneplane: {tmp_path}: needs the inspect_ai package, which is not installed: "
        "pip install 'tuneplane[inspect]'",
        "tuneplane: nothing was written or uploaded",
    ]
