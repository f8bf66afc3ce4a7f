"""The store's half of a launch on both engines: admission by jobs and by GPUs, one job per
Idempotency-Key, nothing stored when a submission is refused, and final states."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from tuneplane.contract.errors import Conflict, TooManyRequests
from tuneplane.store import launch
from tuneplane.store.database import Database
from tuneplane.store.runs import ProjectSetup, create_or_resume
from tuneplane.store.schema import attempts, launch_jobs, runs


def _submission(run: str, gpus: int = 0, key: str | None = None) -> launch.Submission:
    return launch.Submission(
        project="p", run=run, recipe="tiny", engine="local", config={"parameters": {}},
        cpus=1, gpus=gpus, request_key=key, created_by=None, token_days=1.0,
    )  # fmt: skip


@pytest.fixture
def project(database: Database) -> Database:
    database.run_write(create_or_resume, "p", "seed", None, ProjectSetup("private", None))
    return database


def _count(database: Database, table: object) -> int:
    with database.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(table)).scalar_one())


def test_admission_counts_jobs_and_gpus_and_a_refusal_stores_nothing(project: Database) -> None:
    policy = launch.Admission(max_jobs=2, max_gpus=3)
    project.run_write(launch.submit, _submission("a", gpus=2), policy)
    with pytest.raises(TooManyRequests, match="TUNEPLANE_LAUNCH_MAX_GPUS=3"):
        project.run_write(launch.submit, _submission("b", gpus=2), policy)
    second = project.run_write(launch.submit, _submission("c", gpus=1), policy)
    with pytest.raises(TooManyRequests, match="TUNEPLANE_LAUNCH_MAX_JOBS=2"):
        project.run_write(launch.submit, _submission("d"), policy)
    assert (_count(project, runs), _count(project, launch_jobs)) == (3, 2)  # seed, a, c
    # An ended job no longer counts.
    project.run_write(launch.set_state, second.job_id, "failed", 1, "exited with 1")
    project.run_write(launch.submit, _submission("d"), policy)
    with pytest.raises(Conflict, match="run: p/d exists already"):
        project.run_write(launch.submit, _submission("d"), launch.Admission(9, 9))


def test_one_job_per_idempotency_key(project: Database) -> None:
    policy = launch.Admission(max_jobs=5, max_gpus=0)
    first = project.run_write(launch.submit, _submission("a", key="k1"), policy)
    again = project.run_write(launch.submit, _submission("other", key="k1"), policy)
    assert (first.created, again.created) == (True, False)
    assert (again.job_id, again.run, again.token) == (first.job_id, "a", None)
    assert first.token is not None
    assert (_count(project, launch_jobs), _count(project, attempts)) == (1, 1)


def test_an_ended_job_s_state_is_final(project: Database) -> None:
    job = project.run_write(launch.submit, _submission("a"), launch.Admission(5, 0))
    project.run_write(launch.set_state, job.job_id, "running", None, "", "123")
    project.run_write(launch.set_state, job.job_id, "succeeded", 0, "exited with 0")
    project.run_write(launch.set_state, job.job_id, "lost", None, "late")
    with project.connect() as connection:
        shown = launch.get_job(connection, "p", job.job_id)
    assert (shown["state"], shown["exit_code"], shown["engine_id"]) == ("succeeded", 0, "123")
    # A job cancelled before it started ends its attempt, which can say nothing itself.
    queued = project.run_write(launch.submit, _submission("b"), launch.Admission(5, 0))
    project.run_write(launch.set_state, queued.job_id, "cancelled", None, "before it started")
    with project.connect() as connection:
        cancelled = launch.get_job(connection, "p", queued.job_id)
    assert cancelled["attempt_status"] == "cancelled"
