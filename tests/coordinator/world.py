"""What no machine here has, substituted where Harbor lets one be plugged in by import
path (``environment.import_path`` and ``agent.import_path`` of a TrialConfig): the sandbox
and the agent's model. Everything else of a trial (its lifecycle, timeouts, the verifier,
result.json) is Harbor's own code, run for real in its virtual environment.

This module is imported by Harbor inside that environment (Python 3.12), never by the
test process itself.

The sandbox is a scratch directory on this machine: a path the task names inside the
sandbox (``/app``, ``/tests``, ``/logs/verifier``) is that path beneath the directory,
and commands are run by bash with those paths rewritten. It isolates nothing.

The model is a script: the agent's ``answers`` kwarg says, per task, what it does
(``right`` writes the answer the task asks for, ``wrong`` another one, ``sleep`` sleeps
until cancelled, ``crash`` raises, ``wait-for-signal`` touches a file and then sleeps, or,
once that file exists, as a model that hung once, answers right). An answer keyed
``<model name>:<task>`` is that model's only: two checkpoints answer differently.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any

from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.models.agent.context import AgentContext

#: The sandbox paths Harbor and the test tasks use (harbor.models.trial.paths).
_SANDBOX_PATHS = re.compile(r"(?<![\w./-])/(app|tests|solution|logs|runtime)(?=[/\s'\"]|$)")


class ScratchSandbox(BaseEnvironment):
    """A sandbox that is a directory (nothing is isolated; tests only)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._root = Path(tempfile.mkdtemp(prefix="tuneplane-sandbox-"))
        super().__init__(*args, **kwargs)

    @staticmethod
    def type() -> str:
        return "tuneplane-test-scratch"

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        return EnvironmentCapabilities()

    def _validate_definition(self) -> None:
        return None

    def _host(self, path: str) -> Path:
        return self._root / path.lstrip("/")

    def _rewrite(self, command: str) -> str:
        return _SANDBOX_PATHS.sub(lambda m: f"{self._root}/{m.group(1)}", command)

    async def start(self, force_build: bool) -> None:
        for part in ("app", "tests", "logs/agent", "logs/verifier", "logs/artifacts"):
            (self._root / part).mkdir(parents=True, exist_ok=True)

    async def stop(self, delete: bool) -> None:
        if delete:
            shutil.rmtree(self._root, ignore_errors=True)

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        target = self._host(target_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source_path, target)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        shutil.copytree(source_dir, self._host(target_dir), dirs_exist_ok=True)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(self._host(source_path), target_path)

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        source = self._host(source_dir)
        if source.is_dir():
            shutil.copytree(source, target_dir, dirs_exist_ok=True)

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        process = await asyncio.create_subprocess_exec(
            "bash", "-c", self._rewrite(command),
            cwd=self._host(cwd or "/app"),
            env={**os.environ, **(env or {}), "SANDBOX": str(self._root)},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )  # fmt: skip
        try:
            stdout, stderr = await asyncio.wait_for(process.communicate(), timeout_sec)
        except BaseException:
            # Cancelled or timed out: the command's whole process group goes with it.
            os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
            raise
        return ExecResult(
            stdout=stdout.decode(errors="replace"),
            stderr=stderr.decode(errors="replace"),
            return_code=process.returncode or 0,
        )


class ScriptedAgent(BaseAgent):
    """An agent whose model is a script (``answers``: task name -> behaviour)."""

    def __init__(self, *args: Any, answers: dict[str, str] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._answers = answers or {}

    @staticmethod
    def name() -> str:
        return "tuneplane-scripted"

    def version(self) -> str:
        return "1"

    async def setup(self, environment: BaseEnvironment) -> None:
        return None

    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        wanted = re.search(r"the word (\w+)", instruction)
        task = re.search(r"task (\S+):", instruction)
        name = task.group(1) if task else ""
        behaviour = self._answers.get(f"{self.model_name}:{name}", self._answers.get(name, "right"))
        self._write_trajectory(instruction, behaviour)
        if behaviour == "crash":
            raise RuntimeError("the scripted model crashed")
        signal_file = Path(os.environ.get("TUNEPLANE_TEST_SIGNAL_FILE", "/nonexistent"))
        if behaviour == "wait-for-signal" and signal_file.exists():
            behaviour = "right"
        if behaviour in ("sleep", "wait-for-signal"):
            if behaviour == "wait-for-signal":
                signal_file.touch()
            await environment.exec("sleep 600")
            return
        word = wanted.group(1) if wanted and behaviour == "right" else "nonsense"
        await environment.exec(f"echo {word} > /app/answer.txt")
        context.n_input_tokens = len(instruction.split())
        context.n_output_tokens = 1

    def _write_trajectory(self, instruction: str, behaviour: str) -> None:
        """An ATIF trajectory of the scripted conversation, as agents write one."""
        steps = [
            {"step_id": 1, "source": "user", "message": instruction},
            {"step_id": 2, "source": "agent", "message": f"({behaviour})"},
        ]
        document = {
            "schema_version": "ATIF-v1.6",
            "session_id": "scripted",
            "agent": {"name": self.name(), "version": self.version()},
            "steps": steps,
        }
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        (self.logs_dir / "trajectory.json").write_text(json.dumps(document))
