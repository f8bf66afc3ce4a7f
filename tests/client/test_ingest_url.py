"""The runner hands training nodes the server's TUNEPLANE_INGEST_URL when it has one."""

import subprocess
import sys
from pathlib import Path

from tests.serving import running_server


def test_the_command_reports_to_the_servers_ingest_url(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_server("--data-dir", str(data)) as base:
        done = subprocess.run(
            [sys.executable, "-m", "tuneplane.cli", "run", "--project", "p", "--run", "r",
             "--server", base, "--data-dir", str(data), "--", sys.executable, "-c",
             "import os; print(os.environ['TUNEPLANE_JOB_ENDPOINT'])"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == base
    with running_server(
        "--data-dir", str(data), env={"TUNEPLANE_INGEST_URL": "http://nodes:1"}
    ) as base:
        done = subprocess.run(
            [sys.executable, "-m", "tuneplane.cli", "run", "--project", "p", "--run", "r",
             "--server", base, "--data-dir", str(data), "--", sys.executable, "-c",
             "import os; print(os.environ['TUNEPLANE_JOB_ENDPOINT'])"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "http://nodes:1"
