"""Trackio data on disk, written by the real Trackio 0.40.0 client in local mode, and what
tuneplane must hold once it is imported."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.trackio import venv

JOB = Path(__file__).with_name("trackio_local_job.py")

#: Two projects; a run resumed in a second session; a run name tuneplane must rename.
JOBS: list[dict[str, Any]] = [
    {
        "project": "arena-p",
        "name": "run-1",
        "config": {"lr": 0.1, "model": "m"},
        "steps": 25,
        "system": 3,
        "alerts": 2,
    },
    {"project": "arena-p", "name": "run-1", "resume": "must", "steps": 5},
    {"project": "arena-p", "name": "my run", "steps": 3, "alerts": 1},
    {
        "project": "other",
        "name": "r2",
        "config": {"seed": 7},
        "group": "seeds lr=0.1",
        "steps": 12,
        "system": 1,
    },
]


def values(step: int) -> dict[str, float]:
    """What trackio_local_job.py logs at ``step``, flattened as tuneplane names series
    (NaN and infinities included; the text value is no series)."""
    bad = {2: math.nan, 3: math.inf, 4: -math.inf}.get(step % 10, float(step))
    return {"loss": 1.0 / (step + 1), "nested/acc": step / 100, "bad": bad}


def write(directory: Path, jobs: list[dict[str, Any]] = JOBS, **popen: Any) -> Any:
    """Run the jobs with the real Trackio client into ``directory`` (``TRACKIO_DIR``).
    With ``popen`` options the process is started and returned, not waited for."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACKIO_", "TUNEPLANE_"))}
    env["TRACKIO_DIR"] = str(directory)
    command = [str(venv.python()), str(JOB), json.dumps(jobs)]
    if popen:
        return subprocess.Popen(command, env=env, **popen)
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done


def expected_steps(jobs: list[dict[str, Any]] = JOBS) -> dict[tuple[str, str], list[int]]:
    """Every (project, run)'s logged steps, each once: a resumed run goes on from its last."""
    steps: dict[tuple[str, str], list[int]] = {}
    for job in jobs:
        found = steps.setdefault((job["project"], job["name"]), [])
        first = found[-1] + 1 if found else 0
        found.extend(range(first, first + job.get("steps", 0)))
    return steps


def fingerprint(directory: Path) -> dict[str, str]:
    """Every file of the directory and its SHA-256."""
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.iterdir())
        if path.is_file()
    }
