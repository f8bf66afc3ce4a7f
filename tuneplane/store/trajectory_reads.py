"""Reading the trajectory index: filtered pages over the whole index (filters run in the
database before pagination) and single rows."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, func, select

from tuneplane.contract.errors import NotFound
from tuneplane.store.schema import trajectories

_t = trajectories.c
#: Matches counted exactly up to this many; beyond, the answer says "more than".
COUNT_LIMIT = 10_000


@dataclass(frozen=True, slots=True)
class IndexPage:
    rows: list[dict[str, Any]]
    next_after: int | None
    #: Matches of the filters, at most ``COUNT_LIMIT``; ``more`` when there are more.
    total: int
    more: bool


def body_state(row: Any, now: float) -> dict[str, Any]:
    """What became of a body: stored (until when), not retained, expired or deleted (since
    when). A body past its expiry that the sweeper has not reached yet reads as expired."""
    state, since = row.body_state, row.removed_at
    if state == "stored" and row.expires_at <= now:
        state, since = "expired", row.expires_at
    return {"state": state, "since": since, "expires_at": row.expires_at}


def index_json(row: Any, now: float) -> dict[str, Any]:
    return {
        "id": row.id,
        "attempt": row.attempt,
        "scope": row.scope,
        "round_id": row.round_id,
        "trial_id": row.trial_id,
        "trial_attempt": row.trial_attempt,
        "step": row.step,
        "trajectory_id": row.trajectory_id,
        "category": row.category,
        "diagnostic": row.diagnostic,
        "reward": row.reward,
        "reward_invalid": row.reward_invalid,
        "reward_missing": row.reward_missing,
        # Unknown stays unknown: a logging step proves nothing about the policy.
        "collection_policy": row.collection_policy,
        "consumption_policy": row.consumption_policy,
        "message_count": row.message_count,
        "total_messages": row.total_messages,
        "complete": row.complete,
        "truncated": row.message_count < row.total_messages,
        "capture_policy": row.capture_policy,
        "received_at": row.received_at,
        "body": body_state(row, now),
    }


def list_index(
    connection: Connection,
    run_id: int,
    filters: dict[str, Any],
    after: int | None,
    limit: int,
) -> IndexPage:
    """One page (by ascending ID) of the rows matching every given filter."""
    conditions = [_t.run_id == run_id]
    conditions += [_t[name] == value for name, value in filters.items() if value is not None]
    page = select(trajectories).where(*conditions)
    if after is not None:
        page = page.where(_t.id > after)
    rows = list(connection.execute(page.order_by(_t.id).limit(limit + 1)))
    matching = select(_t.id).where(*conditions).limit(COUNT_LIMIT + 1).subquery()
    total = int(connection.execute(select(func.count()).select_from(matching)).scalar_one())
    now = time.time()
    return IndexPage(
        [index_json(row, now) for row in rows[:limit]],
        rows[limit - 1].id if len(rows) > limit else None,
        min(total, COUNT_LIMIT),
        total > COUNT_LIMIT,
    )


def get_row(connection: Connection, run_id: int, trajectory: int, where: str) -> Any:
    row = connection.execute(
        select(trajectories).where(_t.run_id == run_id, _t.id == trajectory)
    ).first()
    if row is None:
        raise NotFound(f"trajectory: {where} has no trajectory {trajectory}")
    return row


def steps_with_rollouts(connection: Connection, run_id: int, limit: int = 1000) -> list[int]:
    """The latest training steps that have rollouts, newest first (the step picker)."""
    query = (
        select(_t.step)
        .where(_t.run_id == run_id, _t.scope == "training")
        .group_by(_t.step)
        .order_by(_t.step.desc())
        .limit(limit)
    )
    return [int(step) for (step,) in connection.execute(query)]
