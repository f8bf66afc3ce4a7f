"""Bodies that go: expiry, early deletion by an owner, orphans of failed uploads.

The index rows stay (result counts and outcome metadata never go with a body); each says
``expired`` or ``deleted`` and since when. Physical deletion happens outside the database
(blob storage), so the database side is in two halves: :func:`claim_removals` names bodies
to delete, :func:`forget_keys` (store/trajectories.py) clears them once they are gone.
Everything works in batches of ``SWEEP_BATCH`` so that no transaction holds up ingest.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, insert, select, update

from tuneplane.contract.limits import PENDING_BODY_SECONDS, SWEEP_BATCH
from tuneplane.store.schema import body_sweeps, pending_bodies, trajectories
from tuneplane.store.trajectories import touch_runs

_t = trajectories.c


@dataclass(frozen=True, slots=True)
class Removal:
    key: str
    bytes: int


def expire(connection: Connection, now: float) -> int:
    """Mark up to a batch of stored bodies past their expiry as expired."""
    ids = [
        row.id
        for row in connection.execute(
            select(_t.id).where(_t.body_state == "stored", _t.expires_at <= now).limit(SWEEP_BATCH)
        )
    ]
    if ids:
        connection.execute(
            update(trajectories)
            .where(_t.id.in_(ids))
            .values(body_state="expired", removed_at=_t.expires_at)
        )
    return len(ids)


def mark_deleted(connection: Connection, run_id: int, filters: dict[str, Any]) -> int:
    """An owner's early deletion: up to a batch of the matching stored bodies become
    ``deleted`` (call again until it answers 0)."""
    conditions = [_t.run_id == run_id, _t.body_state == "stored"]
    conditions += [_t[name] == value for name, value in filters.items() if value is not None]
    ids = [
        row.id for row in connection.execute(select(_t.id).where(*conditions).limit(SWEEP_BATCH))
    ]
    if ids:
        connection.execute(
            update(trajectories)
            .where(_t.id.in_(ids))
            .values(body_state="deleted", removed_at=time.time())
        )
        touch_runs(connection, [run_id])
    return len(ids)


def claim_removals(connection: Connection, now: float) -> list[Removal]:
    """Up to a batch of bodies to delete physically: those of rows no longer ``stored``,
    and orphans (written, but their index row never committed)."""
    gone = connection.execute(
        select(_t.body_key, _t.bytes)
        .where(_t.body_state != "stored", _t.body_key.is_not(None))
        .limit(SWEEP_BATCH)
    )
    removals = [Removal(row.body_key, int(row.bytes)) for row in gone]
    orphans = connection.execute(
        select(pending_bodies.c.body_key)
        .where(pending_bodies.c.created_at <= now - PENDING_BODY_SECONDS)
        .limit(SWEEP_BATCH)
    )
    return removals + [Removal(key, 0) for (key,) in orphans]


def record_sweep(
    connection: Connection, expired: int, deleted: int, size: int, failures: int
) -> None:
    if expired or deleted or failures:
        connection.execute(
            insert(body_sweeps).values(
                at=time.time(), expired=expired, deleted_bodies=deleted, bytes=size,
                failures=failures,
            )
        )  # fmt: skip


def last_sweeps(connection: Connection, limit: int = 20) -> list[dict[str, Any]]:
    query = select(body_sweeps).order_by(body_sweeps.c.id.desc()).limit(limit)
    return [dict(row._mapping) for row in connection.execute(query)]
