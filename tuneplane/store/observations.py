"""Writing observation events and evaluation outcomes; reading recent events.

Every observation is immutable by ``(run, event_id)``: a retry is a duplicate, whatever its
content. Declarations and trial attempts are also immutable by their own identity, and each
trial's current outcome moves only to a higher (execution attempt, trial attempt).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BindParameter,
    Boolean,
    Connection,
    bindparam,
    case,
    insert,
    select,
    text,
    update,
)

from tuneplane.contract.observations import DIGEST_NAMES, Observation, TrialResult
from tuneplane.store.credentials import TokenScope
from tuneplane.store.dialect import upsert
from tuneplane.store.schema import (
    eval_rounds,
    observations,
    round_tallies,
    trial_current,
    trial_results,
)


@dataclass(frozen=True, slots=True)
class ObservationOutcome:
    new: int
    duplicate: int

    def to_json(self) -> dict[str, int]:
        return {"new": self.new, "duplicate": self.duplicate}


def write_observations(
    connection: Connection, scope: TokenScope, batch: list[Observation]
) -> ObservationOutcome:
    now = time.time()
    if connection.dialect.name == "postgresql":
        # One writer of a run's outcomes at a time, so tallies follow current outcomes.
        connection.execute(text("SELECT pg_advisory_xact_lock(:run)"), {"run": scope.run_id})
    unique = list({o.event_id: o for o in reversed(batch)}.values())[::-1]
    inserted = connection.execute(
        upsert(connection, observations)
        .on_conflict_do_nothing(index_elements=[observations.c.run_id, observations.c.event_id])
        .returning(observations.c.event_id),
        [
            {
                "run_id": scope.run_id,
                "attempt": scope.attempt,
                "event_id": o.event_id,
                "type": o.type,
                "name": o.name,
                "step": o.step,
                "body": o.body,
                "received_at": now,
            }
            for o in unique
        ],
    )
    new_ids = set(inserted.scalars())
    fresh = [o for o in unique if o.event_id in new_ids]
    declarations = [o.population for o in fresh if o.population is not None]
    if declarations:
        connection.execute(
            upsert(connection, eval_rounds).on_conflict_do_nothing(
                index_elements=[eval_rounds.c.run_id, eval_rounds.c.round_id]
            ),
            [
                {
                    "run_id": scope.run_id,
                    "round_id": p.round_id,
                    "expected": p.expected,
                    "task_name": p.task_name,
                    "task_version": p.task_version,
                    "declared_at": now,
                    **{name: p.digests.get(name) for name in DIGEST_NAMES},
                }
                for p in declarations
            ],
        )
    trials = [o.trial for o in fresh if o.trial is not None]
    if trials:
        _record_trials(connection, scope, trials, now)
    return ObservationOutcome(new=len(new_ids), duplicate=len(batch) - len(new_ids))


def _record_trials(
    connection: Connection, scope: TokenScope, trials: list[TrialResult], now: float
) -> None:
    """Store terminal attempts (immutable) and move each trial's current outcome forward."""
    rows = [
        {
            "run_id": scope.run_id,
            "round_id": t.round_id,
            "trial_id": t.trial_id,
            "execution_attempt": scope.attempt,
            "trial_attempt": t.trial_attempt,
            "status": t.status,
            "eligible": t.eligible,
            "reward": t.reward,
            "error_type": t.error_type,
            "received_at": now,
        }
        for t in trials
    ]
    identity = (
        trial_results.c.round_id,
        trial_results.c.trial_id,
        trial_results.c.trial_attempt,
    )
    stored = connection.execute(
        upsert(connection, trial_results).on_conflict_do_nothing().returning(*identity), rows
    )
    new_keys = {(str(a), str(b), int(c)) for a, b, c in stored}
    fresh = [
        (trial, row)
        for trial, row in zip(trials, rows, strict=True)
        if (trial.round_id, trial.trial_id, trial.trial_attempt) in new_keys
    ]
    if not fresh:
        return
    held = _current(connection, scope.run_id, {(t.round_id, t.trial_id) for t, _ in fresh})
    known = set(held)
    tally: Counter[tuple[str, str]] = Counter()
    reports: Counter[tuple[str, str]] = Counter()
    winners: dict[tuple[str, str], dict[str, Any]] = {}
    for trial, row in fresh:
        key = (trial.round_id, trial.trial_id)
        reports[key] += 1
        before = held.get(key)
        incoming = (scope.attempt, trial.trial_attempt)
        if before is not None and incoming <= before[0]:
            continue  # an older attempt arriving late only adds to the history
        if before is not None:
            tally[(trial.round_id, before[1])] -= 1
        tally[(trial.round_id, trial.status)] += 1
        held[key] = (incoming, trial.status)
        winners[key] = {column: row[column] for column in _CURRENT_COLUMNS}
    inserts = [
        {**winners[key], "attempts": count} for key, count in reports.items() if key not in known
    ]
    if inserts:
        connection.execute(insert(trial_current), inserts)
    updates = [
        {
            "b_round": key[0],
            "b_trial": key[1],
            "b_reports": count,
            **_current_values(winners.get(key)),
        }
        for key, count in reports.items()
        if key in known
    ]
    if updates:
        _update_current(connection, scope.run_id, updates)
    changes = [
        {"run_id": scope.run_id, "round_id": round_id, "status": status, "count": delta}
        for (round_id, status), delta in tally.items()
        if delta
    ]
    if changes:
        statement = upsert(connection, round_tallies)
        connection.execute(
            statement.on_conflict_do_update(
                index_elements=[
                    round_tallies.c.run_id,
                    round_tallies.c.round_id,
                    round_tallies.c.status,
                ],
                set_={"count": round_tallies.c.count + statement.excluded["count"]},
            ),
            changes,
        )


_MOVABLE = ("execution_attempt", "trial_attempt", "status", "eligible", "reward")


def _current_values(winner: dict[str, Any] | None) -> dict[str, Any]:
    """Parameters of one current-outcome update: the new outcome, or keep (NULL flag)."""
    values = {f"b_{name}": None if winner is None else winner[name] for name in _MOVABLE}
    return {**values, "b_moves": winner is not None}


def _update_current(connection: Connection, run_id: int, updates: list[dict[str, Any]]) -> None:
    moves: BindParameter[bool] = bindparam("b_moves", type_=Boolean)
    statement = (
        update(trial_current)
        .where(
            trial_current.c.run_id == run_id,
            trial_current.c.round_id == bindparam("b_round"),
            trial_current.c.trial_id == bindparam("b_trial"),
        )
        .values(
            attempts=trial_current.c.attempts + bindparam("b_reports"),
            **{
                name: case((moves, bindparam(f"b_{name}")), else_=trial_current.c[name])
                for name in _MOVABLE
            },
        )
    )
    connection.execute(statement, updates)


def _current(
    connection: Connection, run_id: int, trials: set[tuple[str, str]]
) -> dict[tuple[str, str], tuple[tuple[int, int], str]]:
    """The current (execution attempt, trial attempt) and status of these trials."""
    by_round: dict[str, list[str]] = {}
    for round_id, trial_id in sorted(trials):
        by_round.setdefault(round_id, []).append(trial_id)
    found: dict[tuple[str, str], tuple[tuple[int, int], str]] = {}
    # One round at a time: (round, trial) pairs as a row-value IN list are not index
    # lookups on PostgreSQL, which then reads every trial of the run for each batch.
    for round_id, trial_ids in by_round.items():
        query = select(
            trial_current.c.trial_id,
            trial_current.c.execution_attempt,
            trial_current.c.trial_attempt,
            trial_current.c.status,
        ).where(
            trial_current.c.run_id == run_id,
            trial_current.c.round_id == round_id,
            trial_current.c.trial_id.in_(trial_ids),
        )
        found.update(
            ((round_id, trial_id), ((int(execution), int(attempt)), str(status)))
            for trial_id, execution, attempt, status in connection.execute(query)
        )
    return found


_CURRENT_COLUMNS = (
    "run_id",
    "round_id",
    "trial_id",
    "execution_attempt",
    "trial_attempt",
    "status",
    "eligible",
    "reward",
)


@dataclass(frozen=True, slots=True)
class StoredObservation:
    event_id: str
    attempt: int
    type: str
    name: str | None
    step: int | None
    body: dict[str, Any]
    received_at: float


def recent_observations(
    connection: Connection, run_id: int, kind: str | None, limit: int
) -> list[StoredObservation]:
    """Newest first; with ``kind`` (e.g. ``health``) only that type, however old."""
    query = (
        select(
            observations.c.event_id,
            observations.c.attempt,
            observations.c.type,
            observations.c.name,
            observations.c.step,
            observations.c.body,
            observations.c.received_at,
        )
        .where(observations.c.run_id == run_id)
        .order_by(observations.c.id.desc())
        .limit(limit)
    )
    if kind is not None:
        query = query.where(observations.c.type == kind)
    return [StoredObservation(*row) for row in connection.execute(query)]
