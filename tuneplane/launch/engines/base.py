"""What every engine offers the server: a job as it is handed over, the states it reports,
and the few calls the server makes. Several engines run side by side, each under its name
(``contract/launch.py``'s ``ENGINES``); a recipe names the one that runs it.

The server calls :meth:`Engine.submit` once per job (the store's unique submission key
decides that), records what :meth:`Engine.poll` says, and at start hands the engine the jobs
the store holds pending or running (:meth:`Engine.recover`): an engine whose jobs outlive
the server finds them again, one whose jobs die with it reports them lost.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

from tuneplane.contract.launch import JobState
from tuneplane.launch.readiness import Capacity

#: Variables of the server's own environment a job never sees: its settings and secrets
#: (a database URL with its password, the ingest secret, object-storage credentials).
_PRIVATE: Final = ("TUNEPLANE_", "TRACKIO_", "AWS_")


class EngineUnavailable(Exception):
    """The engine did not answer (its commands failed, its service is unreachable): what
    it would say is unknown, never assumed."""


@dataclass(frozen=True, slots=True)
class JobSpec:
    """A job as an engine is handed it: the runner's command line and environment are the
    same on every engine, so every job reports into its run as ``tuneplane run`` does."""

    job_id: int
    command: tuple[str, ...]
    project: str
    run: str
    cwd: Path
    #: The attempt's variables: endpoint, run ID, token, attempt number.
    attempt_env: Mapping[str, str] = field(repr=False)
    python_env: Path | None
    cpus: int
    gpus: int
    log_path: Path
    #: A checkout made for the job, removed when it ends.
    checkout: Path | None = None
    #: Minutes the job may run before it is stopped (the recipe's time_minutes).
    time_minutes: float | None = None
    memory_gb: float = 1.0
    #: The recipe's secrets by name, read from the server's environment at submission:
    #: in the job's environment, never in a record.
    secrets: Mapping[str, str] = field(default_factory=dict, repr=False)

    def argv(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "tuneplane.cli",
            "run",
            "--project",
            self.project,
            "--run",
            self.run,
            "--attempt-from-env",
            "--",
            *self.command,
        ]

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        env = {k: v for k, v in base.items() if not k.startswith(_PRIVATE)}
        if self.python_env is not None:
            # As activating the environment does: its programs come first.
            env["PATH"] = f"{self.python_env / 'bin'}{os.pathsep}{env.get('PATH', os.defpath)}"
            env["VIRTUAL_ENV"] = str(self.python_env)
        env["PYTHONUNBUFFERED"] = "1"
        return {**env, **self.secrets, **self.attempt_env}


@dataclass(frozen=True, slots=True)
class StateChange:
    job_id: int
    state: JobState
    exit_code: int | None = None
    reason: str = ""
    #: The engine's name for the job (a process ID, a Slurm job ID), once it has one.
    engine_id: str | None = None


class Engine(Protocol):
    """One job engine, as the server drives it."""

    @property
    def name(self) -> str:
        """The name recipes use for it (one of ``ENGINES``)."""
        ...

    def capacity(self) -> Capacity:
        """What the engine reports it has now (fleet fit); :class:`EngineUnavailable`
        when it does not answer."""
        ...

    def submit(self, spec: JobSpec) -> None:
        """Hand the job over; its states, a failure to start included, come by :meth:`poll`."""
        ...

    def poll(self) -> list[StateChange]:
        """What changed since the last poll."""
        ...

    def cancel(self, job_id: int) -> bool:
        """Cancel the job; False when the engine does not have it."""
        ...

    def knows(self, job_id: int) -> bool:
        """Whether the engine has the job (pending or running)."""
        ...

    def recover(self, jobs: Mapping[int, str | None]) -> list[StateChange]:
        """At start: the jobs the store holds pending or running on this engine, with the
        engine's name for each when one was recorded. What became of each."""
        ...

    def stop(self) -> list[StateChange]:
        """The server stops: what the engine did to its jobs (jobs that outlive the
        server are left as they are)."""
        ...
