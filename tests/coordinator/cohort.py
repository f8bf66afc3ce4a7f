"""Harbor tasks, evaluation plans and ``tuneplane eval run`` processes for the tests.

The tasks are real Harbor task directories (task.toml, instruction.md, environment/,
tests/test.sh) written for the substituted sandbox of :mod:`tests.coordinator.world`: a
test script finds the sandbox's paths beneath ``$SANDBOX``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.client.runs import Server
from tests.coordinator.venv import ROOT
from tests.importers.jobs import job

DIGESTS = {
    name: hashlib.sha256(name.encode()).hexdigest()
    for name in ("dataset", "verifier", "runtime", "harness")
}
WORLD = "tests.coordinator.world"

_TEST_SH = """#!/bin/bash
{sleep}
if [ "$(cat "$SANDBOX/app/answer.txt" 2>/dev/null)" = "{word}" ]; then
    echo 1 > "$SANDBOX/logs/verifier/reward.txt"
else
    echo 0 > "$SANDBOX/logs/verifier/reward.txt"
fi
"""


def write_task(
    tasks: Path,
    name: str,
    *,
    verifier_timeout: float = 30.0,
    slow: bool = False,
    agent_timeout: float = 60.0,
) -> Path:
    """A task asking for one word (its name's first part) in /app/answer.txt."""
    word = name.split("-")[0]
    task = tasks / name
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "task.toml").write_text(
        f'version = "1.0"\n\n[agent]\ntimeout_sec = {agent_timeout}\n\n'
        f"[verifier]\ntimeout_sec = {verifier_timeout}\n\n"
        "[environment]\nbuild_timeout_sec = 30.0\n"
    )
    (task / "instruction.md").write_text(
        f"This is task {name}: write the word {word} to /app/answer.txt.\n"
    )
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    script = task / "tests" / "test.sh"
    script.write_text(_TEST_SH.format(word=word, sleep="sleep 30" if slow else ""))
    script.chmod(0o755)
    return task


def write_plan(
    tmp: Path,
    tasks: list[str],
    answers: dict[str, str] | None = None,
    *,
    deadline: float = 300.0,
    repeats: int = 1,
    step: int = 1,
    **overrides: Any,
) -> Path:
    """An evaluation plan over ``tasks`` (written beneath ``tmp/tasks`` when missing),
    the scripted agent answering as ``answers`` says, in the scratch sandbox, with the
    checkpoint ``scripted/model@<step>``, whose model the agent is given as
    ``scripted/step-<step>``."""
    for name in tasks:
        if not (tmp / "tasks" / name).exists():
            write_task(tmp / "tasks", name)
    plan: dict[str, Any] = {
        "round": "scripted",
        "benchmark": {"name": "words", "version": "1"},
        "checkpoint": {
            "name": f"scripted/model@{step}",
            "model_name": f"scripted/step-{step}",
        },
        "digests": DIGESTS,
        "deadline_seconds": deadline,
        "trial_config": {
            "agent": {
                "import_path": f"{WORLD}:ScriptedAgent",
                "kwargs": {"answers": answers or {}},
            },
            "environment": {"import_path": f"{WORLD}:ScratchSandbox"},
        },
        "trials": [
            {"task": name, "repeat": repeat, "path": f"tasks/{name}"}
            for name in tasks
            for repeat in range(repeats)
        ],
        **overrides,
    }
    file = tmp / "plan.json"
    file.write_text(json.dumps(plan, indent=1))
    return file


def cli_env(harbor_python: Path | None, **extra: str) -> dict[str, str]:
    """Our CLI's environment: Harbor's interpreter configured, and this checkout on the
    path so Harbor can import the substituted world by its import path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEPLANE_")}
    env["PYTHONPATH"] = str(ROOT)
    if harbor_python is not None:
        env["TUNEPLANE_HARBOR_PYTHON"] = str(harbor_python)
    return {**env, **extra}


def eval_run(
    *args: str, harbor_python: Path | None = None, timeout: float = 120, **env: str
) -> subprocess.CompletedProcess[str]:
    """``tuneplane eval run ARGS`` by this (3.11) interpreter's CLI."""
    return subprocess.run(
        [sys.executable, "-m", "tuneplane.cli", "eval", "run", *args],
        env=cli_env(harbor_python, **env),
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def read(out: Path, name: str) -> Any:
    return json.loads((out / name).read_text())


def statuses(out: Path) -> dict[str, str]:
    return {t["trial_id"]: t["status"] for t in read(out, "snapshot.json")["trials"]}


def uploaded_execution(
    server: Server, harbor_python: Path, plan: Path, out: Path, run: str
) -> dict[str, Any]:
    """``tuneplane eval run --upload`` of ``plan`` into ``out``, inside a ``tuneplane run``
    job of ``run`` on ``server``: the snapshot it wrote (and uploaded)."""
    script = "$TUNEPLANE eval run " + shlex.join(
        ["--plan", str(plan), "--out", str(out), "--upload"]
    )
    done = job(
        server, run, script, TUNEPLANE_HARBOR_PYTHON=str(harbor_python), PYTHONPATH=str(ROOT)
    )
    assert done.returncode == 0, done.stderr
    snapshot: dict[str, Any] = read(out, "snapshot.json")
    return snapshot
