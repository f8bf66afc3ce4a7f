"""The local engine: jobs run as processes on the server's machine, for one machine and for
tests. One queue, first in first out: the job at its head starts once the CPUs and GPUs it
declared are free beside the running ones' (a job that needs more than the machine has is
refused before by the fleet-fit check).

Each job runs under ``tuneplane run --attempt-from-env`` with its attempt's
``TUNEPLANE_JOB_*`` variables, so it reports into its run as any ``tuneplane run`` does, in
a session of its own (its process group is what a cancel signals). Its states come from its
process: pending while queued, running once started, then succeeded (exit 0), failed (any
other exit), cancelled (after a cancel, or when the server stops) or lost (killed by a
signal nobody here sent: the engine no longer has the job's own outcome).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final

import psutil

from tuneplane.contract.launch import JobState
from tuneplane.launch.engines.base import JobSpec, StateChange
from tuneplane.launch.readiness import Capacity

#: Seconds a cancelled job has between SIGTERM and SIGKILL (the runner forwards SIGTERM to
#: the command and reports the attempt cancelled, within its flush timeout).
CANCEL_GRACE_SECONDS: Final = 15.0
_GPU_DEVICE: Final = re.compile(r"nvidia[0-9]+")


def machine_capacity() -> Capacity:
    """What this machine has: its CPUs, its memory, its NVIDIA GPUs (device files)."""
    try:
        gpus = sum(1 for name in os.listdir("/dev") if _GPU_DEVICE.fullmatch(name))
    except OSError:
        gpus = 0
    memory = psutil.virtual_memory().total / 2**30
    return Capacity("local", os.cpu_count() or 1, memory, gpus, frozenset({"python"}))


@dataclass(slots=True)
class _Started:
    spec: JobSpec
    process: subprocess.Popen[bytes]
    log: IO[bytes]
    started: float = field(default_factory=time.monotonic)
    #: When SIGKILL follows the SIGTERM sent (a cancel, the time limit, a stop).
    cancel_at: float | None = None
    timed_out: bool = False


class LocalEngine:
    """The queue and the processes of the jobs this server launched."""

    name: Final = "local"

    def __init__(self, capacity: Capacity | None = None) -> None:
        self._capacity = capacity or machine_capacity()
        self._lock = threading.Lock()
        self._queue: deque[JobSpec] = deque()
        self._running: dict[int, _Started] = {}
        self._changes: list[StateChange] = []

    def capacity(self) -> Capacity:
        return self._capacity

    def submit(self, spec: JobSpec) -> None:
        """Queue the job; it starts as soon as it fits (:meth:`poll` reports it)."""
        with self._lock:
            self._queue.append(spec)
            self._start_what_fits()

    def knows(self, job_id: int) -> bool:
        with self._lock:
            return job_id in self._running or any(s.job_id == job_id for s in self._queue)

    def poll(self) -> list[StateChange]:
        """What changed since the last poll: jobs started, jobs ended."""
        now = time.monotonic()
        with self._lock:
            for job_id, started in list(self._running.items()):
                code = started.process.poll()
                if code is None:
                    self._enforce(started, now)
                    continue
                del self._running[job_id]
                self._ended(started, code)
            self._start_what_fits()
            changes, self._changes = self._changes, []
        return changes

    @staticmethod
    def _enforce(started: _Started, now: float) -> None:
        """SIGKILL past a cancel's grace; SIGTERM past the job's time limit."""
        if started.cancel_at is not None:
            if now >= started.cancel_at:
                _signal_group(started.process, signal.SIGKILL)
            return
        limit = started.spec.time_minutes
        if limit is not None and now - started.started > limit * 60:
            started.timed_out = True
            started.cancel_at = now + CANCEL_GRACE_SECONDS
            with contextlib.suppress(ProcessLookupError):
                started.process.send_signal(signal.SIGTERM)

    def cancel(self, job_id: int) -> bool:
        """Cancel a queued job at once, or a running one by SIGTERM (SIGKILL after a
        grace). False when the engine does not have the job."""
        with self._lock:
            for spec in self._queue:
                if spec.job_id == job_id:
                    self._queue.remove(spec)
                    self._changes.append(
                        StateChange(job_id, "cancelled", None, "cancelled before it started")
                    )
                    _remove(spec.checkout)
                    return True
            started = self._running.get(job_id)
            if started is None:
                return False
            if started.cancel_at is None:
                started.cancel_at = time.monotonic() + CANCEL_GRACE_SECONDS
                with contextlib.suppress(ProcessLookupError):
                    started.process.send_signal(signal.SIGTERM)  # the runner forwards it
            return True

    def recover(self, jobs: Mapping[int, str | None]) -> list[StateChange]:
        """Jobs the store holds pending or running at start belong to a server process
        that stopped without ending them (a crash): their processes are not this one's."""
        reason = "the server process that ran it stopped without ending it"
        return [
            StateChange(job_id, "lost", None, reason) for job_id in jobs if not self.knows(job_id)
        ]

    def stop(self, timeout: float = 5.0) -> list[StateChange]:
        """The server stops: queued jobs are cancelled, running ones are sent SIGTERM and
        killed after ``timeout``. What changed, for the store."""
        with self._lock:
            for spec in self._queue:
                self._changes.append(
                    StateChange(
                        spec.job_id, "cancelled", None, "the server stopped before it started"
                    )
                )
                _remove(spec.checkout)
            self._queue.clear()
            for started in self._running.values():
                started.cancel_at = time.monotonic()
                with contextlib.suppress(ProcessLookupError):
                    started.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self.knows_running() and time.monotonic() < deadline:
            time.sleep(0.05)
            self._reap()
        with self._lock:
            for started in self._running.values():
                _signal_group(started.process, signal.SIGKILL)
        for started in list(self._running.values()):
            started.process.wait()
        return self.poll()

    def knows_running(self) -> bool:
        with self._lock:
            return bool(self._running)

    def _reap(self) -> None:
        with self._lock:
            for job_id, started in list(self._running.items()):
                code = started.process.poll()
                if code is not None:
                    del self._running[job_id]
                    self._ended(started, code)

    def _start_what_fits(self) -> None:
        while self._queue and self._fits(self._queue[0]):
            self._start(self._queue.popleft())

    def _fits(self, spec: JobSpec) -> bool:
        if not self._running:
            return True  # alone on the machine: fleet fit judged it already
        cpus = sum(s.spec.cpus for s in self._running.values()) + spec.cpus
        gpus = sum(s.spec.gpus for s in self._running.values()) + spec.gpus
        return cpus <= self._capacity.cpus and gpus <= self._capacity.gpus

    def _start(self, spec: JobSpec) -> None:
        try:
            spec.log_path.parent.mkdir(parents=True, exist_ok=True)
            log = spec.log_path.open("ab")
        except OSError as exc:
            self._changes.append(StateChange(spec.job_id, "failed", None, f"no log: {exc}"))
            _remove(spec.checkout)
            return
        try:
            process = subprocess.Popen(
                spec.argv(),
                cwd=spec.cwd,
                env=spec.environment(os.environ),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except (OSError, ValueError) as exc:  # ValueError: what the OS cannot pass on
            log.close()
            self._changes.append(StateChange(spec.job_id, "failed", None, f"not started: {exc}"))
            _remove(spec.checkout)
            return
        self._running[spec.job_id] = _Started(spec, process, log)
        self._changes.append(StateChange(spec.job_id, "running", None, "", str(process.pid)))

    def _ended(self, started: _Started, code: int) -> None:
        started.log.close()
        _remove(started.spec.checkout)
        state: JobState
        if started.timed_out:
            minutes = started.spec.time_minutes
            state, reason = "failed", f"stopped at its time limit of {minutes:g} minutes"
        elif started.cancel_at is not None:
            state, reason = "cancelled", "cancelled"
        elif code == 0:
            state, reason = "succeeded", "exited with 0"
        elif code < 0:
            state, reason = "lost", f"killed by signal {-code}, which the engine did not send"
        else:
            state, reason = "failed", f"exited with {code}"
        self._changes.append(StateChange(started.spec.job_id, state, code, reason))


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)


def _remove(path: Path | None) -> None:
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)
