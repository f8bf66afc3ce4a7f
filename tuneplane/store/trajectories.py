"""Writing the trajectory index.

A batch is written in three steps so that no body is ever lost track of:

1. :func:`plan_batch` (a read) says which documents are new, refuses a changed re-send
   (:class:`TrajectoryConflict`) and predicts which need a body;
2. :func:`record_pending` notes the keys the bodies will have, then the caller writes the
   bodies to blob storage;
3. :func:`write_index` (one transaction) checks everything again, applies the retention
   caps, inserts the index rows and forgets the pending keys it used. A key it did not use,
   and the bodies of trials a round's cap no longer keeps, come back for deletion.

A crash between 2 and 3 leaves pending keys older than ``PENDING_BODY_SECONDS``: the
sweeper (store/sweeps.py) deletes their bodies.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, and_, delete, func, insert, select, update

from tuneplane.contract.limits import ROLLOUT_SAMPLES_PER_STEP
from tuneplane.contract.trajectories import (
    COMPARED_FIELDS,
    RetentionCapReached,
    Trajectory,
    TrajectoryConflict,
    evaluation_text_cap,
    selection_rank,
)
from tuneplane.store.credentials import TokenScope
from tuneplane.store.dialect import upsert
from tuneplane.store.schema import (
    eval_rounds,
    pending_bodies,
    runs,
    trajectories,
    unstored_trajectories,
)

_t = trajectories.c
SELECTED_STATES = ("stored", "expired", "deleted")


@dataclass(frozen=True, slots=True)
class Upload:
    """One document of a batch, with its stored form."""

    trajectory: Trajectory
    body: bytes  # canonical JSON (the digest is of this)
    digest: str
    compressed: bytes


@dataclass(slots=True)
class IndexOutcome:
    new: int = 0
    duplicate: int = 0
    not_retained: int = 0
    #: Blob keys no committed row holds any more: delete them now.
    unused_keys: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, int]:
        return {"new": self.new, "duplicate": self.duplicate, "not_retained": self.not_retained}


def _stored(connection: Connection, scope: TokenScope, identities: list[str]) -> dict[str, Any]:
    query = select(_t.identity, _t.digest, *(_t[name] for name in COMPARED_FIELDS)).where(
        _t.run_id == scope.run_id, _t.attempt == scope.attempt, _t.identity.in_(identities)
    )
    return {row.identity: row for row in connection.execute(query)}


def _check_duplicates(
    connection: Connection, scope: TokenScope, uploads: list[Upload]
) -> dict[str, Any]:
    """The stored rows of the batch's identities; a changed re-send raises."""
    stored = _stored(connection, scope, sorted({u.trajectory.identity for u in uploads}))
    for index, upload in enumerate(uploads):
        row = stored.get(upload.trajectory.identity)
        if row is None or row.digest == upload.digest:
            continue
        sent = upload.trajectory.metadata()
        fields = [name for name in COMPARED_FIELDS if getattr(row, name) != sent[name]]
        raise TrajectoryConflict(index, upload.trajectory.identity, fields or ["messages"])
    return stored


def plan_batch(connection: Connection, scope: TokenScope, uploads: list[Upload]) -> list[int]:
    """Indexes of the documents that are new and whose body the server will likely keep
    (training rollouts, and evaluation trials the round's text cap may choose)."""
    stored = _check_duplicates(connection, scope, uploads)
    selections: dict[str, _RoundSelection] = {}
    wanted = []
    for index, upload in enumerate(uploads):
        t = upload.trajectory
        if t.identity in stored:
            continue
        if t.scope == "training":
            wanted.append(index)
            continue
        selection = _selection(connection, scope, selections, str(t.round_id))
        if selection.admits(str(t.trial_id)):
            wanted.append(index)
    return wanted


def new_body_key(scope: TokenScope) -> str:
    """A key of its own for every upload: two uploads never share a body to delete."""
    return f"runs/{scope.run_id}/{scope.attempt}/{uuid.uuid4().hex}.json.z"


def touch_runs(connection: Connection, run_ids: list[int]) -> None:
    """A trajectory write is news for the run's live stream (it follows ``updated_at``)."""
    connection.execute(update(runs).where(runs.c.id.in_(run_ids)).values(updated_at=time.time()))


def record_pending(connection: Connection, keys: list[str]) -> None:
    now = time.time()
    connection.execute(insert(pending_bodies), [{"body_key": k, "created_at": now} for k in keys])


def record_unstored(connection: Connection, scope: TokenScope, uploads: list[Upload]) -> None:
    """The batch's documents the server does not hold, after the blob store refused their
    bodies: counted on their round until a re-send stores them (:func:`write_index`)."""
    stored = _stored(connection, scope, sorted({u.trajectory.identity for u in uploads}))
    now = time.time()
    rows = {
        u.trajectory.identity: {
            "run_id": scope.run_id,
            "attempt": scope.attempt,
            "identity": u.trajectory.identity,
            "round_id": u.trajectory.round_id,
            "step": u.trajectory.step,
            "failed_at": now,
        }
        for u in uploads
        if u.trajectory.identity not in stored
    }
    if rows:
        connection.execute(
            upsert(connection, unstored_trajectories).values(list(rows.values()))
            .on_conflict_do_nothing()
        )  # fmt: skip


def forget_keys(connection: Connection, keys: list[str]) -> None:
    """After their bodies were deleted: no pending entry and no row points at them."""
    connection.execute(delete(pending_bodies).where(pending_bodies.c.body_key.in_(keys)))
    connection.execute(update(trajectories).where(_t.body_key.in_(keys)).values(body_key=None))


@dataclass(slots=True)
class _RoundSelection:
    """Which trials of one round keep their text: the ``cap`` of lowest rank seen."""

    cap: int
    chosen: dict[str, int]  # trial_id -> rank

    def admits(self, trial_id: str) -> bool:
        if trial_id in self.chosen:
            return True
        if len(self.chosen) < self.cap:
            return True
        return bool(self.chosen) and selection_rank(trial_id) < max(self.chosen.values())

    def take(self, trial_id: str) -> str | None:
        """Choose the trial; the trial it displaces, if any."""
        if trial_id in self.chosen:
            return None
        displaced = None
        if len(self.chosen) >= self.cap:
            displaced = max(self.chosen, key=lambda t: (self.chosen[t], t))
            del self.chosen[displaced]
        self.chosen[trial_id] = selection_rank(trial_id)
        return displaced


def _selection(
    connection: Connection,
    scope: TokenScope,
    selections: dict[str, _RoundSelection],
    round_id: str,
) -> _RoundSelection:
    if round_id in selections:
        return selections[round_id]
    declared = connection.execute(
        select(eval_rounds.c.expected, eval_rounds.c.text_samples).where(
            eval_rounds.c.run_id == scope.run_id,
            eval_rounds.c.execution_attempt == scope.attempt,
            eval_rounds.c.round_id == round_id,
        )
    ).first()
    cap = evaluation_text_cap(
        None if declared is None else int(declared.expected),
        None if declared is None or declared.text_samples is None else int(declared.text_samples),
    )
    chosen = connection.execute(
        select(_t.trial_id, _t.selection_rank)
        .where(
            _t.run_id == scope.run_id,
            _t.attempt == scope.attempt,
            _t.round_id == round_id,
            _t.scope == "evaluation",
            _t.body_state.in_(SELECTED_STATES),
        )
        .group_by(_t.trial_id, _t.selection_rank)
    )
    selection = _RoundSelection(cap, {row.trial_id: int(row.selection_rank) for row in chosen})
    selections[round_id] = selection
    return selection


def _step_room(connection: Connection, scope: TokenScope, steps: set[int]) -> dict[int, int]:
    counts = connection.execute(
        select(_t.step, func.count())
        .where(
            _t.run_id == scope.run_id,
            _t.attempt == scope.attempt,
            _t.scope == "training",
            _t.step.in_(sorted(steps)),
        )
        .group_by(_t.step)
    )
    room = dict.fromkeys(steps, ROLLOUT_SAMPLES_PER_STEP)
    for step, count in counts:
        room[int(step)] -= int(count)
    return room


def _take_room(room: dict[int, int], step: int, index: int, attempt: int) -> None:
    room[step] -= 1
    if room[step] < 0:
        raise RetentionCapReached(
            f"trajectories[{index}]: step {step} of execution attempt {attempt} already "
            f"retains {ROLLOUT_SAMPLES_PER_STEP} training rollouts, the most a step keeps; "
            "nothing of this batch was stored"
        )


def _row(scope: TokenScope, upload: Upload, now: float, days: float) -> dict[str, Any]:
    t = upload.trajectory
    return {
        "run_id": scope.run_id,
        "attempt": scope.attempt,
        "identity": t.identity,
        "scope": t.scope,
        "round_id": t.round_id,
        "trial_id": t.trial_id,
        "trial_attempt": t.trial_attempt,
        "selection_rank": None if t.trial_id is None else selection_rank(t.trial_id),
        "step": t.step,
        "trajectory_id": t.trajectory_id,
        "category": t.category,
        **t.metadata(),
        "reward_missing": None if t.reward_missing is None else list(t.reward_missing),
        "message_count": t.message_count,
        "digest": upload.digest,
        "bytes": len(upload.compressed),
        "received_at": now,
        "expires_at": now + days * 86400,
        "removed_at": None,
    }


def _displace(connection: Connection, scope: TokenScope, round_id: str, trial_id: str) -> list[str]:
    """A trial the round's cap no longer keeps: its bodies go (their rows stay)."""
    where = and_(
        _t.run_id == scope.run_id,
        _t.attempt == scope.attempt,
        _t.round_id == round_id,
        _t.trial_id == trial_id,
        _t.scope == "evaluation",
    )
    keys = [
        key
        for (key,) in connection.execute(select(_t.body_key).where(where, _t.body_key.is_not(None)))
    ]
    connection.execute(
        update(trajectories)
        .where(where, _t.body_state.in_(SELECTED_STATES))
        .values(body_state="not_retained", removed_at=time.time())
    )
    return keys


def write_index(
    connection: Connection,
    scope: TokenScope,
    uploads: list[Upload],
    keys: dict[int, str],
    days: float,
) -> IndexOutcome:
    """Insert the index rows of a batch (``keys``: the bodies written, by document index)."""
    stored = _check_duplicates(connection, scope, uploads)
    outcome = IndexOutcome()
    room = _step_room(
        connection,
        scope,
        {int(u.trajectory.step) for u in uploads if u.trajectory.step is not None},
    )
    selections: dict[str, _RoundSelection] = {}
    rows: list[dict[str, Any]] = []
    now = time.time()
    for index, upload in enumerate(uploads):
        t = upload.trajectory
        key = keys.get(index)
        if t.identity in stored or any(r["identity"] == t.identity for r in rows):
            outcome.duplicate += 1
            outcome.unused_keys += [key] if key else []
            continue
        row = _row(scope, upload, now, days)
        if t.step is not None:
            _take_room(room, t.step, index, scope.attempt)
            selected = key is not None
        else:
            selection = _selection(connection, scope, selections, str(t.round_id))
            # Without a key the prediction said no: no body was written for it.
            selected = key is not None and selection.admits(str(t.trial_id))
            if selected:
                displaced = selection.take(str(t.trial_id))
                if displaced is not None:
                    outcome.unused_keys += _displace(connection, scope, str(t.round_id), displaced)
                    for other in rows:
                        if other["round_id"] == t.round_id and other["trial_id"] == displaced:
                            other["body_state"] = "not_retained"
        row["body_state"] = "stored" if selected else "not_retained"
        row["body_key"] = key if selected else None
        if key and not selected:
            outcome.unused_keys.append(key)
        rows.append(row)
    for row in rows:
        if row["body_state"] == "not_retained" and row["body_key"] is not None:
            outcome.unused_keys.append(row["body_key"])
            row["body_key"] = None
        outcome.new += row["body_state"] == "stored"
        outcome.not_retained += row["body_state"] == "not_retained"
    if rows:
        connection.execute(insert(trajectories), rows)
        touch_runs(connection, [scope.run_id])
        u = unstored_trajectories.c
        connection.execute(
            delete(unstored_trajectories).where(
                u.run_id == scope.run_id,
                u.attempt == scope.attempt,
                u.identity.in_([row["identity"] for row in rows]),
            )
        )
    used = [row["body_key"] for row in rows if row["body_key"] is not None]
    if used:
        connection.execute(delete(pending_bodies).where(pending_bodies.c.body_key.in_(used)))
    return outcome
