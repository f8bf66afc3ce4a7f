"""The Slurm engine: jobs go to a Slurm cluster through its own commands, and their states
are what Slurm says of them. tuneplane never schedules: ``sbatch`` queues, Slurm runs.

- submit: ``sbatch --parsable`` of ``exec tuneplane run --attempt-from-env -- <command>``
  (the :class:`JobSpec`'s command line, its environment exported), named
  ``tuneplane-<job id>``, with the recipe's CPUs, memory, GPUs (GRES ``gpu``) and time;
- states: ``scontrol show job`` (the jobs the controller still holds), then ``sacct`` for
  the ones it has let go when the cluster keeps accounting; a job neither knows is lost;
- cancel: ``scancel``; fleet fit: ``sinfo``, the largest node that is up.

Slurm's states map onto the job's (docs/launch.md has the table): queued ones are pending;
started ones running; COMPLETED succeeded; FAILED (an exit code), TIMEOUT, OUT_OF_MEMORY,
DEADLINE and BOOT_FAIL failed; CANCELLED is cancelled when tuneplane cancelled it, else
lost, as a job killed by a signal tuneplane did not send, a failed node, or a preempted job.
Jobs outlive the server: at start it hands the engine its pending and running jobs again.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tuneplane.contract.launch import JobState
from tuneplane.launch.engines.base import EngineUnavailable, JobSpec, StateChange
from tuneplane.launch.readiness import Capacity

#: Seconds a Slurm command may take before the engine says Slurm did not answer.
COMMAND_TIMEOUT_SECONDS: Final = 30.0
#: Seconds between two questions to Slurm about the jobs' states: slurmctld serves
#: everyone's commands, and a job's state changes on its scheduler's time, not ours.
POLL_SECONDS: Final = 2.0
JOB_NAME_PREFIX: Final = "tuneplane-"
_FIELD: Final = re.compile(r"(?:^|\s)(JobId|JobName|UserId|JobState|Reason|ExitCode)=(\S*)")
_UID: Final = re.compile(r"\((\d+)\)$")
_GPUS: Final = re.compile(r"gpu(?::[^:,(]+)?:(\d+)")
_UP: Final = frozenset({"idle", "mix", "mixed", "alloc", "allocated", "comp", "completing"})

_PENDING: Final = frozenset({"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_FED",
                             "REQUEUE_HOLD", "RESV_DEL_HOLD"})  # fmt: skip
_RUNNING: Final = frozenset({"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING", "SUSPENDED",
                             "STOPPED", "RESIZING", "SPECIAL_EXIT"})  # fmt: skip
_FAILED: Final = {
    "TIMEOUT": "stopped by Slurm at its time limit",
    "OUT_OF_MEMORY": "ran out of memory",
    "DEADLINE": "past its deadline",
    "BOOT_FAIL": "its node failed to boot",
}
#: Ends only a job that started reaches: one that ended between two polls ran too.
_RAN: Final = frozenset({"COMPLETED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY", "DEADLINE",
                         "NODE_FAIL", "PREEMPTED"})  # fmt: skip
_LOST: Final = {
    "NODE_FAIL": "its node failed",
    "PREEMPTED": "preempted by Slurm",
    "REVOKED": "revoked by Slurm",
}


class _Refused(EngineUnavailable):
    """A Slurm command answered, with an error."""


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """What Slurm says of one job."""

    slurm_id: str
    name: str
    #: The user it runs as, by number (UserId=name(uid)).
    uid: int | None
    state: str
    reason: str
    #: The command's exit code and the signal that ended it (Slurm's ExitCode=A:B).
    exit_code: int
    signal: int


def job_state(job: SlurmJob, cancelled_here: bool) -> tuple[JobState, int | None, str]:
    """The job's state, its exit code and why, from what Slurm says."""
    state = job.state.split()[0].rstrip("+")
    if state in _PENDING:
        return "pending", None, f"{state.lower()} in Slurm ({job.reason})"
    if state in _RUNNING:
        return "running", None, f"{state.lower()} in Slurm as job {job.slurm_id}"
    if state == "COMPLETED":
        return "succeeded", 0, "exited with 0"
    if state == "CANCELLED":
        if cancelled_here:
            return "cancelled", None, "cancelled"
        return "lost", None, "cancelled in Slurm by someone other than tuneplane"
    if state == "FAILED" and job.signal:
        reason = f"killed by signal {job.signal}, which tuneplane did not send"
        return "lost", 128 + job.signal, reason
    if state == "FAILED":
        return "failed", job.exit_code, f"exited with {job.exit_code}"
    if state in _FAILED:
        return "failed", job.exit_code or None, _FAILED[state]
    return "lost", None, _LOST.get(state, f"Slurm says {state}")


def parse_show_job(text: str) -> list[SlurmJob]:
    """``scontrol show job --oneliner``: one job a line."""
    jobs = []
    for line in text.splitlines():
        fields = dict(_FIELD.findall(line))
        if "JobId" not in fields:
            continue
        code, _, signal = fields.get("ExitCode", "0:0").partition(":")
        uid = _UID.search(fields.get("UserId", ""))
        jobs.append(
            SlurmJob(
                fields["JobId"],
                fields.get("JobName", ""),
                int(uid.group(1)) if uid else None,
                fields.get("JobState", ""),
                fields.get("Reason", ""),
                int(code or 0) if code.isdigit() else 0,
                int(signal or 0) if signal.isdigit() else 0,
            )
        )
    return jobs


def parse_sinfo(text: str) -> Capacity:
    """``sinfo --Node --noheader --format=%N|%c|%m|%G|%t``: the largest node that is up."""
    cpus, memory_mib, gpus = 0, 0, 0
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 5 or parts[4].rstrip("*~#!%$@^-") not in _UP:
            continue
        cpus = max(cpus, int(parts[1]) if parts[1].isdigit() else 0)
        memory_mib = max(memory_mib, int(parts[2]) if parts[2].isdigit() else 0)
        gpus = max(gpus, sum(int(n) for n in _GPUS.findall(parts[3])))
    return Capacity("slurm", cpus, memory_mib / 1024, gpus, frozenset({"python"}))


@dataclass(slots=True)
class _Tracked:
    spec: JobSpec | None
    #: Slurm's job ID; None while unknown (found again by the job's name).
    slurm_id: str | None
    state: JobState = "pending"
    reason: str = ""
    cancelled_here: bool = False


class SlurmEngine:
    """The jobs this server submitted to one Slurm cluster."""

    name: Final = "slurm"

    def __init__(
        self, conf: Path | None = None, partition: str | None = None, interval: float = POLL_SECONDS
    ) -> None:
        """``conf``: the cluster's slurm.conf (None: the commands' own default);
        ``interval``: seconds between two questions about the jobs' states."""
        self._interval = interval
        self._asked = -math.inf
        self._env = dict(os.environ)
        if conf is not None:
            self._env["SLURM_CONF"] = str(conf)
        self._partition = partition
        self._lock = threading.Lock()
        self._jobs: dict[int, _Tracked] = {}
        self._changes: list[StateChange] = []
        self._accounting: bool | None = None

    def _run(self, *argv: str, env: Mapping[str, str] | None = None) -> str:
        try:
            done = subprocess.run(
                argv,
                env=self._env if env is None else env,
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_SECONDS,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EngineUnavailable(f"{argv[0]} did not run: {exc}") from exc
        if done.returncode != 0:
            said = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
            raise _Refused(f"{argv[0]} failed: {said}")
        return done.stdout

    def capacity(self) -> Capacity:
        argv = ["sinfo", "--Node", "--noheader", "--format=%N|%c|%m|%G|%t"]
        if self._partition is not None:
            argv.append(f"--partition={self._partition}")
        return parse_sinfo(self._run(*argv))

    def sbatch_argv(self, spec: JobSpec) -> list[str]:
        """The job as ``sbatch`` takes it: its resources, and the runner's command line."""
        argv = [
            "sbatch",
            "--parsable",
            f"--job-name={JOB_NAME_PREFIX}{spec.job_id}",
            f"--chdir={spec.cwd}",
            f"--output={spec.log_path}",
            "--ntasks=1",
            f"--cpus-per-task={spec.cpus}",
            f"--mem={math.ceil(spec.memory_gb * 1024)}M",
            "--export=ALL",
        ]
        if spec.gpus:
            argv.append(f"--gres=gpu:{spec.gpus}")
        if spec.time_minutes is not None:
            minutes, seconds = divmod(math.ceil(spec.time_minutes * 60), 60)
            argv.append(f"--time={minutes}:{seconds:02d}")
        if self._partition is not None:
            argv.append(f"--partition={self._partition}")
        # exec: the runner is the batch step's process, which a cancel's SIGTERM reaches.
        return [*argv, f"--wrap=exec {shlex.join(spec.argv())}"]

    def submit(self, spec: JobSpec) -> None:
        """``sbatch`` the job; a refusal fails it. One call per job: the store's
        submission key decides that a retried submission never reaches here."""
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**spec.environment(os.environ), **_slurm_vars(self._env)}
        try:
            answer = self._run(*self.sbatch_argv(spec), env=env)
        except _Refused as exc:
            with self._lock:
                self._changes.append(StateChange(spec.job_id, "failed", None, f"not queued: {exc}"))
            _remove(spec.checkout)
            return
        except EngineUnavailable:
            # sbatch said nothing: the job may be queued. The next poll finds it by name,
            # or reports it lost; it is never submitted twice.
            with self._lock:
                self._jobs[spec.job_id] = _Tracked(spec, None, reason="sbatch did not answer")
            return
        slurm_id = answer.strip().split(";")[0]  # "<id>" or "<id>;<cluster>"
        with self._lock:
            self._jobs[spec.job_id] = _Tracked(spec, slurm_id, reason="queued")
            reason = f"queued in Slurm as job {slurm_id}"
            self._changes.append(StateChange(spec.job_id, "pending", None, reason, slurm_id))

    def knows(self, job_id: int) -> bool:
        with self._lock:
            return job_id in self._jobs

    def recover(self, jobs: Mapping[int, str | None]) -> list[StateChange]:
        """The server's pending and running Slurm jobs, watched again from now."""
        with self._lock:
            for job_id, slurm_id in jobs.items():
                self._jobs.setdefault(job_id, _Tracked(None, slurm_id))
        return self.poll()

    def cancel(self, job_id: int) -> bool:
        with self._lock:
            tracked = self._jobs.get(job_id)
        if tracked is None or tracked.slurm_id is None:
            return False
        tracked.cancelled_here = True
        try:
            self._run("scancel", tracked.slurm_id)
        except EngineUnavailable:
            tracked.cancelled_here = False  # not cancelled: whoever does it later is not us
            raise
        return True

    def poll(self) -> list[StateChange]:
        """Ask Slurm about every job it still has of ours: what changed since last time."""
        with self._lock:
            now = time.monotonic()
            if not self._jobs or now - self._asked < self._interval:
                changes, self._changes = self._changes, []
                return changes
            self._asked = now
        shown = parse_show_job(self._run("scontrol", "show", "job", "--oneliner"))
        by_id = {job.slurm_id: job for job in shown}
        # A job whose ID was never recorded (the server stopped while submitting it) is
        # found by its name among this user's jobs.
        by_name = {job.name: job for job in shown if job.uid == os.getuid()}
        with self._lock:
            tracked = list(self._jobs.items())
        gone = []
        for job_id, job in tracked:
            found = by_id.get(job.slurm_id or "") or by_name.get(f"{JOB_NAME_PREFIX}{job_id}")
            if found is None:
                gone.append(job_id)
            else:
                self._update(job_id, job, found)
        self._resolve_gone(gone)
        with self._lock:
            changes, self._changes = self._changes, []
        return changes

    def _update(self, job_id: int, job: _Tracked, found: SlurmJob) -> None:
        state, code, reason = job_state(found, job.cancelled_here)
        with self._lock:
            if self._jobs.get(job_id) is not job:
                return  # a poll beside this one (a slow Slurm) has ended it already
            if (state, reason) == (job.state, job.reason) and job.slurm_id == found.slurm_id:
                return
            engine_id = found.slurm_id if job.slurm_id is None else None
            if job.state == "pending" and found.state.split()[0].rstrip("+") in _RAN:
                started = f"ran in Slurm as job {found.slurm_id}"
                self._changes.append(StateChange(job_id, "running", None, started, engine_id))
            job.slurm_id, job.state, job.reason = found.slurm_id, state, reason
            self._changes.append(StateChange(job_id, state, code, reason, engine_id))
            if state not in ("pending", "running"):
                del self._jobs[job_id]
                if job.spec is not None:
                    _remove(job.spec.checkout)

    def _resolve_gone(self, gone: list[int]) -> None:
        """Jobs the controller no longer holds: from accounting when there is any, else
        lost (their outcome went with the controller's memory)."""
        for job_id in gone:
            with self._lock:
                job = self._jobs.get(job_id)
            if job is None:
                continue
            found = self._accounted(job.slurm_id) if job.slurm_id else None
            if found is not None:
                self._update(job_id, job, found)
                continue
            with self._lock:
                if self._jobs.pop(job_id, None) is None:
                    continue
                self._changes.append(
                    StateChange(job_id, "lost", None, "Slurm no longer knows the job")
                )
            if job.spec is not None:
                _remove(job.spec.checkout)

    def _accounted(self, slurm_id: str) -> SlurmJob | None:
        if self._accounting is None:
            config = self._run("scontrol", "show", "config")
            self._accounting = "accounting_storage/none" not in config
        if not self._accounting:
            return None
        text = self._run(
            "sacct", "--noheader", "--parsable2", "--jobs", slurm_id,
            "--format=JobID,JobName,State,ExitCode",
        )  # fmt: skip
        for line in text.splitlines():
            parts = line.split("|")
            if len(parts) == 4 and parts[0] == slurm_id:
                code, _, signal = parts[3].partition(":")
                return SlurmJob(slurm_id, parts[1], None, parts[2], "", int(code or 0),
                                int(signal or 0))  # fmt: skip
        return None

    def stop(self) -> list[StateChange]:
        """Slurm jobs outlive the server: they are left running, found again at start."""
        with self._lock:
            changes, self._changes = self._changes, []
        return changes


def _slurm_vars(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k == "SLURM_CONF"}


def _remove(path: Path | None) -> None:
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)
