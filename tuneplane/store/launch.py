"""Launched jobs: one submission is one transaction that admits it, creates its run and
attempt and records the job, or stores nothing; then the engine's states of the job.

A retried submission (the same ``Idempotency-Key`` in the same project) finds the job the
first one recorded: the unique key decides, so two submissions never make two jobs.
Admission is judged under the project's row lock on PostgreSQL (SQLite has one writer), so
two servers never both admit the job that would exceed the limit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, func, insert, or_, select, update

from tuneplane.contract.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    TooManyRequests,
    Violation,
)
from tuneplane.contract.launch import ACTIVE_JOB_STATES, JobState
from tuneplane.contract.protocol import TERMINAL_STATUSES
from tuneplane.store.credentials import start_attempt
from tuneplane.store.runs import create_or_resume
from tuneplane.store.schema import attempts, launch_jobs, projects, runs


@dataclass(frozen=True, slots=True)
class Admission:
    """The project's policy: at most this many pending or running jobs, and GPUs."""

    max_jobs: int
    max_gpus: int


@dataclass(frozen=True, slots=True)
class Submission:
    project: str
    run: str
    recipe: str
    engine: str
    config: dict[str, Any]
    cpus: int
    gpus: int
    request_key: str | None
    created_by: int | None
    token_days: float
    #: The run of the project this launch re-runs (the config's check record names it).
    parent: str | None = None


@dataclass(frozen=True, slots=True)
class Launched:
    job_id: int
    #: False: a retried submission found the job its first made (no token, nothing new).
    created: bool
    run: str
    attempt: int
    token: str | None = None

    def __repr__(self) -> str:  # the token never prints
        return f"Launched(job {self.job_id}, created={self.created})"


def _existing(connection: Connection, project_id: int, key: str | None) -> Launched | None:
    if key is None:
        return None
    row = connection.execute(
        select(launch_jobs.c.id, launch_jobs.c.attempt, runs.c.name)
        .join(runs, runs.c.id == launch_jobs.c.run_id)
        .where(launch_jobs.c.project_id == project_id, launch_jobs.c.request_key == key)
    ).first()
    return None if row is None else Launched(row.id, False, row.name, row.attempt)


def _admit(connection: Connection, project_id: int, gpus: int, policy: Admission) -> None:
    active = connection.execute(
        select(func.count(), func.coalesce(func.sum(launch_jobs.c.gpus), 0)).where(
            launch_jobs.c.project_id == project_id,
            launch_jobs.c.state.in_(sorted(ACTIVE_JOB_STATES)),
        )
    ).one()
    jobs, used = int(active[0]), int(active[1])
    if jobs >= policy.max_jobs:
        raise TooManyRequests(
            f"admission: the project has {jobs} pending or running jobs, "
            f"its limit (TUNEPLANE_LAUNCH_MAX_JOBS={policy.max_jobs})"
        )
    if used + gpus > policy.max_gpus:
        raise TooManyRequests(
            f"admission: the project's pending and running jobs hold {used} GPUs; {gpus} more "
            f"would pass its limit (TUNEPLANE_LAUNCH_MAX_GPUS={policy.max_gpus})"
        )


def submit(connection: Connection, submission: Submission, policy: Admission) -> Launched:
    """Admit the job, create its run (with the config, check record included) and its
    first attempt, and record the job as pending; or find the job a submission with the
    same key made. :class:`TooManyRequests` past the policy, :class:`Conflict` for a run
    that exists already (a launch makes a new run)."""
    project_id = connection.execute(
        select(projects.c.id)
        .where(projects.c.name == submission.project, projects.c.deleted_at.is_(None))
        .with_for_update()
    ).scalar_one_or_none()
    if project_id is None:
        raise NotFound(f"project: no project named {submission.project!r}")
    found = _existing(connection, project_id, submission.request_key)
    if found is not None:
        return found
    _admit(connection, project_id, submission.gpus, policy)
    if submission.parent is not None:
        _parent_exists(connection, project_id, submission)
    named = select(runs.c.id).where(runs.c.project_id == project_id, runs.c.name == submission.run)
    if connection.execute(named).first() is not None:
        raise Conflict(
            f"run: {submission.project}/{submission.run} exists already; a launch creates a new run"
        )
    create_or_resume(connection, submission.project, submission.run, submission.config)
    run_id = connection.execute(named).scalar_one()
    issued = start_attempt(connection, run_id, submission.token_days, submission.request_key)
    job_id = connection.execute(
        insert(launch_jobs)
        .values(
            project_id=project_id,
            run_id=run_id,
            attempt=issued.attempt,
            recipe=submission.recipe,
            engine=submission.engine,
            request_key=submission.request_key,
            state="pending",
            reason="queued",
            cpus=submission.cpus,
            gpus=submission.gpus,
            created_by=submission.created_by,
            created_at=time.time(),
        )
        .returning(launch_jobs.c.id)
    ).scalar_one()
    return Launched(job_id, True, submission.run, issued.attempt, issued.token)


def _parent_exists(connection: Connection, project_id: int, submission: Submission) -> None:
    found = connection.execute(
        select(runs.c.id).where(
            runs.c.project_id == project_id,
            runs.c.name == submission.parent,
            runs.c.deleted_at.is_(None),
        )
    ).first()
    if found is None:
        rule = f"no run named {submission.parent!r} in project {submission.project!r}"
        raise InvalidInput((Violation("parent", rule),))


def set_state(
    connection: Connection,
    job_id: int,
    state: JobState,
    exit_code: int | None = None,
    reason: str = "",
    engine_id: str | None = None,
) -> None:
    """Record what the engine says of a job. An ended job's state is final."""
    now = time.time()
    values: dict[str, Any] = {"state": state, "reason": reason[:1024]}
    if engine_id is not None:
        values["engine_id"] = engine_id
    if state == "running":
        # Once: an engine that finds a running job again after a restart says so again.
        values["started_at"] = func.coalesce(launch_jobs.c.started_at, now)
    elif state not in ACTIVE_JOB_STATES:
        values.update(ended_at=now, exit_code=exit_code)
    ended = connection.execute(
        update(launch_jobs)
        .where(launch_jobs.c.id == job_id, launch_jobs.c.state.in_(sorted(ACTIVE_JOB_STATES)))
        .values(**values)
        .returning(launch_jobs.c.run_id, launch_jobs.c.attempt, launch_jobs.c.started_at)
    ).first()
    if ended is None:
        return
    # A job that never started reports nothing, and one cancelled here may not have been
    # heard (a server that stops no longer listens): its attempt ends as the job did. A
    # lost job's attempt keeps what it said last: unknown is not a failure.
    if state == "cancelled" or (state == "failed" and ended.started_at is None):
        _end_attempt(connection, ended.run_id, ended.attempt, state, now)


def _end_attempt(
    connection: Connection, run_id: int, attempt: int, status: str, now: float
) -> None:
    """End an attempt that has not ended itself (an ended one keeps its own status)."""
    ended = sorted(TERMINAL_STATUSES)
    connection.execute(
        update(attempts)
        .where(
            attempts.c.run_id == run_id,
            attempts.c.attempt == attempt,
            or_(attempts.c.status.is_(None), attempts.c.status.not_in(ended)),
        )
        .values(status=status, ended_at=now)
    )
    connection.execute(
        update(runs)
        .where(
            runs.c.id == run_id,
            runs.c.attempt_count == attempt,
            or_(runs.c.status.is_(None), runs.c.status.not_in(ended)),
        )
        .values(status=status, updated_at=now)
    )


def _job_query() -> Any:
    return (
        select(
            launch_jobs,
            runs.c.name.label("run"),
            attempts.c.status.label("attempt_status"),
        )
        .join(runs, runs.c.id == launch_jobs.c.run_id)
        .outerjoin(
            attempts,
            (attempts.c.run_id == launch_jobs.c.run_id)
            & (attempts.c.attempt == launch_jobs.c.attempt),
        )
        .join(projects, projects.c.id == launch_jobs.c.project_id)
    )


def job_json(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "run": row.run,
        "attempt": row.attempt,
        "recipe": row.recipe,
        "engine": row.engine,
        # The engine's own name for the job (the local engine: its runner's process ID).
        "engine_id": row.engine_id,
        "state": row.state,
        "reason": row.reason,
        "exit_code": row.exit_code,
        # Beside the engine's word, the attempt's own (what the job reported, if anything).
        "attempt_status": row.attempt_status,
        "cpus": row.cpus,
        "gpus": row.gpus,
        "created_at": row.created_at,
        "started_at": row.started_at,
        "ended_at": row.ended_at,
    }


def list_jobs(
    connection: Connection, project: str, run: str | None = None, limit: int = 200
) -> list[dict[str, Any]]:
    """The project's launched jobs (``run``: that run's only), newest first."""
    query = _job_query().where(projects.c.name == project, runs.c.deleted_at.is_(None))
    if run is not None:
        query = query.where(runs.c.name == run)
    rows = connection.execute(query.order_by(launch_jobs.c.id.desc()).limit(limit)).all()
    return [job_json(row) for row in rows]


def get_job(connection: Connection, project: str, job_id: int) -> dict[str, Any]:
    row = connection.execute(
        _job_query().where(projects.c.name == project, launch_jobs.c.id == job_id)
    ).first()
    if row is None:
        raise NotFound(f"job: no job {job_id} in project {project!r}")
    return job_json(row)


def find_job(connection: Connection, project: str, request_key: str) -> dict[str, Any] | None:
    """The job a submission with ``request_key`` made in ``project``, if any."""
    row = connection.execute(
        _job_query().where(projects.c.name == project, launch_jobs.c.request_key == request_key)
    ).first()
    return None if row is None else job_json(row)


def active_jobs(connection: Connection, engine: str) -> dict[int, str | None]:
    """The jobs of ``engine`` still pending or running, by the store's record, with the
    engine's name for each (None before it had one)."""
    rows = connection.execute(
        select(launch_jobs.c.id, launch_jobs.c.engine_id).where(
            launch_jobs.c.engine == engine,
            launch_jobs.c.state.in_(sorted(ACTIVE_JOB_STATES)),
        )
    ).all()
    return {row.id: row.engine_id for row in rows}
