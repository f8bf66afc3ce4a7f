"""Deleting runs and projects, for real.

Deletion is in two halves. :func:`mark_run_deleted` / :func:`mark_project_deleted` are one
short transaction each: the name becomes ``~deleted~<id>`` (no valid ID starts with ``~``,
so every read of the old name answers 404 and the name can be used again at once), the
ingest tokens of its attempts expire and its share links go. Then the server purges the
rows (server/purger.py), one bounded batch per transaction so that ingest into other runs
never waits behind a deletion: trajectory bodies first (deleted from blob storage before
their index rows), then every table that refers to the run, then the run, then the project.

The tables are found from the schema itself (every table with a ``run_id`` column, and
those keyed by a metric's id), so a table added later is purged without anyone
remembering to add it here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

from sqlalchemy import Connection, Table, delete, select, tuple_, update

from tuneplane.store.schema import (
    attempts,
    metadata,
    metrics,
    projects,
    runs,
    share_links,
    trajectories,
)

#: Rows one purge transaction deletes: a block row holds up to 1,024 points, so a batch of
#: blocks is about a million points and tens of milliseconds of work.
PURGE_BATCH: Final = 1000
#: A deleted run's or project's name: ``~`` is never part of an ID.
TOMBSTONE: Final = "~deleted~"


@cache
def _run_tables() -> tuple[Table, ...]:
    """Tables whose rows belong to one run, children before parents."""
    return tuple(
        table
        for table in reversed(metadata.sorted_tables)
        if "run_id" in table.c and table is not runs
    )


@cache
def _metric_tables() -> tuple[Table, ...]:
    return tuple(table for table in metadata.sorted_tables if "metric_id" in table.c)


@cache
def _project_tables() -> tuple[Table, ...]:
    return tuple(
        table
        for table in reversed(metadata.sorted_tables)
        if "project_id" in table.c and table is not runs
    )


def _delete_batch(connection: Connection, table: Table, condition: Any) -> int:
    """Delete up to :data:`PURGE_BATCH` rows of ``table`` matching ``condition``."""
    key = list(table.primary_key.columns)
    chosen = select(*key).where(condition).limit(PURGE_BATCH)
    where = key[0].in_(chosen) if len(key) == 1 else tuple_(*key).in_(chosen)
    return int(connection.execute(delete(table).where(where)).rowcount)


def _close(connection: Connection, run_ids: Any) -> None:
    """Nothing writes to or opens a deleted run: its tokens expire, its share links go."""
    connection.execute(
        update(attempts).where(attempts.c.run_id.in_(run_ids)).values(token_expires_at=0.0)
    )
    connection.execute(delete(share_links).where(share_links.c.run_id.in_(run_ids)))


def mark_run_deleted(connection: Connection, run_id: int) -> None:
    connection.execute(
        update(runs)
        .where(runs.c.id == run_id, runs.c.deleted_at.is_(None))
        .values(name=f"{TOMBSTONE}{run_id}", deleted_at=time.time())
    )
    _close(connection, [run_id])


def mark_project_deleted(connection: Connection, project_id: int) -> None:
    now = time.time()
    connection.execute(
        update(projects)
        .where(projects.c.id == project_id, projects.c.deleted_at.is_(None))
        .values(name=f"{TOMBSTONE}{project_id}", deleted_at=now)
    )
    connection.execute(
        update(runs)
        .where(runs.c.project_id == project_id, runs.c.deleted_at.is_(None))
        .values(deleted_at=now)
    )
    _close(connection, select(runs.c.id).where(runs.c.project_id == project_id))


@dataclass(frozen=True, slots=True)
class Pending:
    run_ids: list[int]
    project_ids: list[int]


def pending(connection: Connection, limit: int = 100) -> Pending:
    """Deleted runs (oldest deletion first) and deleted projects still to purge."""
    run_ids = connection.execute(
        select(runs.c.id)
        .where(runs.c.deleted_at.is_not(None))
        .order_by(runs.c.deleted_at, runs.c.id)
        .limit(limit)
    ).scalars()
    project_ids = connection.execute(
        select(projects.c.id).where(projects.c.deleted_at.is_not(None)).limit(limit)
    ).scalars()
    return Pending([int(i) for i in run_ids], [int(i) for i in project_ids])


def claim_bodies(connection: Connection, run_id: int) -> list[tuple[int, str]]:
    """Up to a batch of the run's trajectories whose body may still be in blob storage."""
    rows = connection.execute(
        select(trajectories.c.id, trajectories.c.body_key)
        .where(trajectories.c.run_id == run_id, trajectories.c.body_key.is_not(None))
        .limit(PURGE_BATCH)
    )
    return [(int(row.id), str(row.body_key)) for row in rows]


def forget_trajectories(connection: Connection, ids: list[int]) -> None:
    """Delete index rows whose bodies are gone from blob storage."""
    connection.execute(delete(trajectories).where(trajectories.c.id.in_(ids)))


def purge_run_step(connection: Connection, run_id: int) -> bool:
    """Delete one batch of a deleted run's rows; False once the run itself is gone. Call
    :func:`claim_bodies` until it answers nothing first: index rows of bodies still in blob
    storage are left to :func:`forget_trajectories`."""
    metric_id = connection.execute(
        select(metrics.c.id).where(metrics.c.run_id == run_id).limit(1)
    ).scalar()
    if metric_id is not None:
        for table in _metric_tables():
            if _delete_batch(connection, table, table.c.metric_id == metric_id):
                return True
        connection.execute(delete(metrics).where(metrics.c.id == metric_id))
        return True
    for table in _run_tables():
        condition = table.c.run_id == run_id
        if table is trajectories:
            condition = condition & trajectories.c.body_key.is_(None)
        if _delete_batch(connection, table, condition):
            return True
    connection.execute(delete(runs).where(runs.c.id == run_id, runs.c.deleted_at.is_not(None)))
    return False


def purge_project_step(connection: Connection, project_id: int) -> bool:
    """Delete a deleted project whose runs are purged (its memberships, then the project);
    False when it has runs still to purge, or is gone."""
    # A run that reached the project while it was being deleted goes with it.
    connection.execute(
        update(runs)
        .where(runs.c.project_id == project_id, runs.c.deleted_at.is_(None))
        .values(deleted_at=time.time())
    )
    remaining = connection.execute(
        select(runs.c.id).where(runs.c.project_id == project_id).limit(1)
    ).first()
    if remaining is not None:
        return False
    for table in _project_tables():
        while _delete_batch(connection, table, table.c.project_id == project_id):
            pass
    connection.execute(
        delete(projects).where(projects.c.id == project_id, projects.c.deleted_at.is_not(None))
    )
    return False
