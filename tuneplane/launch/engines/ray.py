"""The Ray Jobs engine: jobs go to a Ray cluster through its job submission API (the
dashboard's address, ``TUNEPLANE_RAY_ADDRESS``) and their states are read from it there.

Each job is one Ray job whose entrypoint is the runner, ``<python env>/bin/python -m
tuneplane.cli run --attempt-from-env -- <command>``, with the attempt's ``TUNEPLANE_JOB_*``
variables in its runtime environment and its source directory uploaded as its working
directory, so it reports into its run as any ``tuneplane run`` does. Its submission ID is
derived from the job, so a submission tried again never starts a second job. The entrypoint
reserves the recipe's CPUs, GPUs and memory, so it runs on one node that has them.

Ray's states map to ours: PENDING is pending, RUNNING running, SUCCEEDED succeeded, FAILED
failed (lost when the job's supervisor died: the job's own outcome is unknown), STOPPED
cancelled (failed when it was stopped at the recipe's time limit); a job the cluster no
longer knows is lost. Jobs outlive the server: after a restart it finds them by their
submission IDs.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shlex
import shutil
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from tuneplane.contract.launch import ACTIVE_JOB_STATES, JobState
from tuneplane.launch.engines.base import EngineUnavailable, JobSpec, StateChange
from tuneplane.launch.readiness import Capacity

if TYPE_CHECKING:  # imported on first use: ray takes seconds to import
    from ray.job_submission import JobDetails, JobSubmissionClient

#: Seconds between two reads of the jobs' states from the cluster (the server polls more
#: often; a submission or a cancel reads again at once).
REFRESH_SECONDS: Final = 1.0
#: Seconds the cluster's node list may take to arrive (a preview waits for it).
NODES_TIMEOUT_SECONDS: Final = 10
#: Nodes read for fleet fit: more than any cluster tuneplane launches on has.
NODES_MAX: Final = 10_000
#: Ray's error type of a job whose supervisor, the actor that ran its entrypoint, died.
_SUPERVISOR_DIED: Final = "JOB_SUPERVISOR_ACTOR_DIED"
#: The job's metadata key holding the recipe's time_minutes.
_TIME_LIMIT: Final = "tuneplane_time_minutes"
_STATUS_CODE: Final = re.compile(r"status code (\d+)")
_MEMORY_UNIT: Final = 2**30


def submission_id(spec: JobSpec) -> str:
    """The job's name on the cluster: the same each time this job is submitted (Ray refuses
    a second job of one submission ID), another for a job of another server sharing the
    cluster (the attempt's variables, its token among them, are in the digest)."""
    attempt = "\0".join(f"{k}={v}" for k, v in sorted(spec.attempt_env.items()))
    return f"tuneplane-{spec.job_id}-{hashlib.sha256(attempt.encode()).hexdigest()[:16]}"


@dataclass(slots=True)
class _Job:
    submission_id: str
    state: JobState = "pending"
    time_minutes: float | None = None
    log_path: Path | None = None
    #: The job as handed over, until the cluster took it (submitted again at each poll).
    unsent: JobSpec | None = None
    running_since: float | None = None
    cancelled: bool = False
    timed_out: bool = False


class _Refused(Exception):
    """The cluster answered that it will not run the job."""


class RayEngine:
    """The jobs this server submitted to one Ray cluster, as the cluster reports them."""

    name: Final = "ray"

    def __init__(self, address: str) -> None:
        self.address = address.rstrip("/")
        self._client: JobSubmissionClient | None = None
        self._lock = threading.Lock()
        self._jobs: dict[int, _Job] = {}
        self._changes: list[StateChange] = []
        self._refreshed = 0.0

    def _connect(self) -> JobSubmissionClient:
        if self._client is None:  # the client asks the cluster its version when made
            from ray.job_submission import JobSubmissionClient

            try:
                self._client = JobSubmissionClient(self.address)
            except (OSError, RuntimeError) as exc:
                raise EngineUnavailable(f"Ray at {self.address}: {exc}") from exc
        return self._client

    def capacity(self) -> Capacity:
        """The largest amount of CPUs, GPUs and memory an alive node has: the entrypoint
        reserves them on one node."""
        from ray.util.state import list_nodes
        from ray.util.state.exception import RayStateApiException

        try:
            nodes = list_nodes(address=self.address, limit=NODES_MAX, timeout=NODES_TIMEOUT_SECONDS)
        except (RayStateApiException, OSError) as exc:
            raise EngineUnavailable(f"Ray at {self.address}: {exc}") from exc
        alive = [node.resources_total for node in nodes if node.state == "ALIVE"]

        def most(resource: str) -> float:
            return max((float(total.get(resource, 0)) for total in alive), default=0.0)

        return Capacity(
            self.name,
            int(most("CPU")),
            most("memory") / _MEMORY_UNIT,
            int(most("GPU")),
            frozenset({"python"}),
        )

    def submit(self, spec: JobSpec) -> None:
        """Submit the job; when the cluster does not answer, each poll tries again under
        the same submission ID."""
        job = _Job(submission_id(spec), time_minutes=spec.time_minutes, log_path=spec.log_path)
        job.unsent = spec
        with self._lock:
            self._jobs[spec.job_id] = job
        self._send(spec.job_id, job)

    def _send(self, job_id: int, job: _Job) -> None:
        spec = job.unsent
        assert spec is not None, "only a job not yet taken is sent"
        try:
            self._hand_over(spec, job.submission_id)
        except EngineUnavailable as exc:
            reason = f"not yet taken by the Ray cluster, which did not answer: {exc}"
            self._note(StateChange(job_id, "pending", None, reason, job.submission_id))
            return
        except _Refused as exc:
            self._settle(job_id, job, "failed", None, f"the Ray cluster refused it: {exc}")
        else:
            job.unsent = None
            reason = f"submitted to the Ray cluster as {job.submission_id}"
            self._note(StateChange(job_id, "pending", None, reason, job.submission_id))
        _remove(spec.checkout)  # the cluster has its own copy of the source

    def _hand_over(self, spec: JobSpec, name: str) -> None:
        if spec.python_env is None:
            raise _Refused("the ray engine runs Python environments, not images")
        runner = [str(spec.python_env / "bin" / "python"), *spec.argv()[1:]]
        resources: dict[str, Any] = {"entrypoint_num_cpus": spec.cpus}
        if spec.gpus:
            resources["entrypoint_num_gpus"] = spec.gpus
        if spec.memory_gb:
            resources["entrypoint_memory"] = int(spec.memory_gb * _MEMORY_UNIT)
        metadata = {"job_name": f"{spec.project}/{spec.run}", "tuneplane_job": str(spec.job_id)}
        if spec.time_minutes is not None:  # read again by a server restarted meanwhile
            metadata[_TIME_LIMIT] = repr(spec.time_minutes)
        # Ray puts the node's own PATH where ${PATH} stands.
        env_vars = spec.environment({"PATH": "${PATH}"})
        client = self._connect()
        try:
            client.submit_job(
                entrypoint=shlex.join(runner),
                submission_id=name,
                # A checkout's history stays here: the commit is in the check record.
                runtime_env={
                    "working_dir": str(spec.cwd),
                    "excludes": [".git"],
                    "env_vars": env_vars,
                },
                metadata=metadata,
                **resources,
            )
        except OSError as exc:
            raise EngineUnavailable(f"Ray at {self.address}: {exc}") from exc
        except (RuntimeError, ValueError) as exc:
            said = str(exc)
            if "already exists" in said:
                return  # submitted before: that job stands, and no second one starts
            code = _status_code(said)
            if code is not None and code >= 500:
                raise EngineUnavailable(f"Ray at {self.address}: {_first_line(said)}") from exc
            raise _Refused(_first_line(said)) from exc

    def knows(self, job_id: int) -> bool:
        with self._lock:
            return job_id in self._jobs

    def poll(self) -> list[StateChange]:
        """What changed since the last poll; the cluster is read at most every
        :data:`REFRESH_SECONDS`."""
        now = time.monotonic()
        if now - self._refreshed >= REFRESH_SECONDS:
            self._refreshed = now
            with self._lock:
                jobs = list(self._jobs.items())
            for job_id, job in jobs:
                if job.unsent is not None:
                    self._send(job_id, job)
                else:
                    self._refresh(job_id, job)
        with self._lock:
            changes, self._changes = self._changes, []
        return changes

    def _refresh(self, job_id: int, job: _Job) -> None:
        info = self._info(job.submission_id)
        if info is None:
            reason = f"the Ray cluster no longer knows {job.submission_id}"
            self._settle(job_id, job, "lost", None, reason)
            return
        state, code, reason = _outcome(info, job)
        metadata = info.metadata or {}
        if job.time_minutes is None and _TIME_LIMIT in metadata:
            job.time_minutes = float(metadata[_TIME_LIMIT])
        if state == "running":
            job.running_since = job.running_since or time.time()
            limit = job.time_minutes
            if limit is not None and time.time() - job.running_since > limit * 60:
                job.timed_out = True
                self._stop(job.submission_id)
        self._settle(job_id, job, state, code, reason)

    def _info(self, name: str) -> JobDetails | None:
        """What the cluster says of the job; None when it does not know it."""
        client = self._connect()
        try:
            return client.get_job_info(name)
        except OSError as exc:
            raise EngineUnavailable(f"Ray at {self.address}: {exc}") from exc
        except RuntimeError as exc:
            if _status_code(str(exc)) == 404:
                return None
            raise EngineUnavailable(f"Ray at {self.address}: {_first_line(str(exc))}") from exc

    def _stop(self, name: str) -> None:
        client = self._connect()
        try:
            client.stop_job(name)
        except OSError as exc:
            raise EngineUnavailable(f"Ray at {self.address}: {exc}") from exc
        except RuntimeError as exc:
            if _status_code(str(exc)) != 404:  # a job it forgot is found lost by a poll
                raise EngineUnavailable(f"Ray at {self.address}: {_first_line(str(exc))}") from exc
        self._refreshed = 0.0  # the next poll reads what the stop did

    def cancel(self, job_id: int) -> bool:
        """Stop the job on the cluster (Ray sends its entrypoint SIGTERM, SIGKILL a few
        seconds later; the runner passes SIGTERM on and reports the attempt cancelled).
        False when the engine does not have the job."""
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            return False
        if job.unsent is not None:  # never reached the cluster: nothing to stop there
            self._settle(job_id, job, "cancelled", None, "cancelled before the cluster took it")
            _remove(job.unsent.checkout)
            return True
        job.cancelled = True
        self._stop(job.submission_id)
        return True

    def recover(self, jobs: Mapping[int, str | None]) -> list[StateChange]:
        """At start: the jobs the store holds pending or running on Ray, found again on the
        cluster by their submission IDs (one never named was never handed over)."""
        for job_id, name in jobs.items():
            if name is None:
                reason = "the server stopped before handing it to the Ray cluster"
                self._note(StateChange(job_id, "lost", None, reason))
                continue
            with self._lock:
                self._jobs.setdefault(job_id, _Job(name))
        self._refreshed = 0.0
        return self.poll()

    def stop(self) -> list[StateChange]:
        """The server stops; its Ray jobs run on (a restarted server finds them again)."""
        with self._lock:
            for job in self._jobs.values():
                if job.unsent is not None:
                    _remove(job.unsent.checkout)
        return []

    def _note(self, change: StateChange) -> None:
        with self._lock:
            self._changes.append(change)

    def _settle(
        self, job_id: int, job: _Job, state: JobState, code: int | None, reason: str
    ) -> None:
        """Record a new state once (two polls may read it at the same time); an ended job
        leaves the engine, its log copied from the cluster."""
        with self._lock:
            if job.state == state or self._jobs.get(job_id) is not job:
                return
            job.state = state
            self._changes.append(StateChange(job_id, state, code, reason))
            if state in ACTIVE_JOB_STATES:
                return
            del self._jobs[job_id]
        if state != "lost" and job.log_path is not None:
            self._copy_log(job.submission_id, job.log_path)

    def _copy_log(self, name: str, path: Path) -> None:
        """The job's output as the cluster kept it, beside the local engine's logs."""
        with contextlib.suppress(OSError, RuntimeError, EngineUnavailable):
            logs = self._connect().get_job_logs(name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(logs)


def _outcome(info: JobDetails, job: _Job) -> tuple[JobState, int | None, str]:
    """Our state of a Ray job, its exit code and why."""
    status = str(info.status.value)
    code = info.driver_exit_code
    said = _first_line(info.message or "").split(", last available logs")[0]
    if status == "PENDING":
        return "pending", None, "pending on the Ray cluster"
    if status == "RUNNING":
        return "running", None, f"running on the Ray cluster as {job.submission_id}"
    if status == "SUCCEEDED":
        return "succeeded", code if code is not None else 0, "succeeded on the Ray cluster"
    if status == "STOPPED":
        if job.timed_out:
            return "failed", code, f"stopped at its time limit of {job.time_minutes:g} minutes"
        if job.cancelled:
            return "cancelled", code, "cancelled"
        return "cancelled", code, "stopped on the Ray cluster, not from tuneplane"
    if info.error_type == _SUPERVISOR_DIED:
        return "lost", code, f"the Ray job's supervisor died, its outcome unknown: {said}"
    return "failed", code, f"Ray: {said or status}"


def _status_code(said: str) -> int | None:
    found = _STATUS_CODE.search(said)
    return int(found.group(1)) if found else None


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0][:500]


def _remove(path: Path | None) -> None:
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)
