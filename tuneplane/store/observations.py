"""Writing observation events and evaluation outcomes; reading recent events.

Free events (events, distributions, health) are immutable by ``(run, event_id)``: a retry
is a duplicate, whatever its content. Outcomes (declarations and trial results) are
immutable by their content key (contract/observations.py), whatever their event ID: an
identical re-send is a duplicate that stores nothing (not in the event list either), a
changed one refuses the whole batch with :class:`OutcomeConflict`. A round is (run,
execution attempt, round_id); each trial's current outcome in its round moves only to a
higher trial attempt.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
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

from tuneplane.contract.observations import (
    DIGEST_NAMES,
    Observation,
    OutcomeClash,
    OutcomeConflict,
    OutcomeKey,
    TrialResult,
    declared_content,
    differing_fields,
    outcome_content,
    outcome_key,
)
from tuneplane.store.credentials import TokenScope
from tuneplane.store.dialect import upsert
from tuneplane.store.schema import (
    eval_rounds,
    observations,
    round_tallies,
    trial_current,
    trial_results,
)

OUTCOME_TYPES = ("population", "trial")


@dataclass(slots=True)
class ObservationOutcome:
    new: int
    duplicate: int
    #: Per outcome type: new and duplicate (conflicts refuse the batch, so 0 when stored).
    outcomes: dict[str, Counter[str]] = field(
        default_factory=lambda: {kind: Counter() for kind in OUTCOME_TYPES}
    )

    def to_json(self) -> dict[str, Any]:
        return {
            "new": self.new,
            "duplicate": self.duplicate,
            "conflict": 0,
            "outcomes": {
                kind: {name: counts[name] for name in ("new", "duplicate", "conflict")}
                for kind, counts in self.outcomes.items()
            },
        }


def _comparable(observation: Observation, attempt: int) -> tuple[Any, ...]:
    return (attempt, observation.type, observation.name, observation.step, observation.body)


def _stored_events(
    connection: Connection, run_id: int, event_ids: list[str]
) -> dict[str, tuple[Any, ...]]:
    query = select(
        observations.c.event_id,
        observations.c.attempt,
        observations.c.type,
        observations.c.name,
        observations.c.step,
        observations.c.body,
    ).where(observations.c.run_id == run_id, observations.c.event_id.in_(event_ids))
    return {row[0]: tuple(row[1:]) for row in connection.execute(query)}


def _stored_outcomes(
    connection: Connection, scope: TokenScope, keys: list[OutcomeKey]
) -> dict[OutcomeKey, dict[str, object]]:
    """The stored content (by wire field) of the outcomes at these keys, where stored."""
    found: dict[OutcomeKey, dict[str, object]] = {}
    declared = sorted({str(k[2]) for k in keys if k[0] == "population"})
    if declared:
        query = select(eval_rounds).where(
            eval_rounds.c.run_id == scope.run_id,
            eval_rounds.c.execution_attempt == scope.attempt,
            eval_rounds.c.round_id.in_(declared),
        )
        records = declared_records(connection, scope.run_id, scope.attempt)
        for row in connection.execute(query):
            record = records.get(row.round_id, {})
            found[("population", scope.attempt, row.round_id)] = {
                "expected": int(row.expected),
                **{f"digests.{name}": getattr(row, name) for name in DIGEST_NAMES},
                "task.name": row.task_name,
                "task.version": row.task_version,
                "text_samples": row.text_samples,
                "verdicts": row.verdicts is not False,
                **declared_content(record.get("protocol"), record.get("planned_trials")),
            }
    by_round: dict[str, set[str]] = {}
    for key in keys:
        if key[0] == "trial":
            by_round.setdefault(str(key[2]), set()).add(str(key[3]))
    wanted = set(keys)
    for round_id, trial_ids in sorted(by_round.items()):
        query = select(trial_results).where(
            trial_results.c.run_id == scope.run_id,
            trial_results.c.round_id == round_id,
            trial_results.c.trial_id.in_(sorted(trial_ids)),
            trial_results.c.execution_attempt == scope.attempt,
        )
        for row in connection.execute(query):
            key = ("trial", scope.attempt, round_id, row.trial_id, int(row.trial_attempt))
            if key in wanted:
                found[key] = {
                    "status": row.status,
                    "eligible": bool(row.eligible),
                    "reward": row.reward,
                    "error_type": row.error_type,
                    "reason_code": row.reason_code,
                    "reason": row.reason,
                }
    return found


@dataclass(slots=True)
class _Sorted:
    fresh: list[Observation] = field(default_factory=list)
    clashes: list[OutcomeClash] = field(default_factory=list)
    outcome: ObservationOutcome = field(default_factory=lambda: ObservationOutcome(0, 0))


def _sort(connection: Connection, scope: TokenScope, batch: list[Observation]) -> _Sorted:
    """Which events are new, which duplicates, which clash with what is stored or sent."""
    keys = {i: outcome_key(o, scope.attempt) for i, o in enumerate(batch)}
    stored = _stored_outcomes(connection, scope, [k for k in keys.values() if k is not None])
    ids = _stored_events(connection, scope.run_id, sorted({o.event_id for o in batch}))
    sent: dict[OutcomeKey, dict[str, object]] = {}
    result = _Sorted()
    for index, observation in enumerate(batch):
        key = keys[index]
        known = ids.get(observation.event_id)
        new = known is None
        if key is not None:
            clash = _clash(index, observation, key, stored.get(key) or sent.get(key), known, scope)
            if clash is not None:
                result.clashes.append(clash)
            new = new and key not in stored and key not in sent
            sent.setdefault(key, outcome_content(observation))
            result.outcome.outcomes[observation.type]["new" if new else "duplicate"] += 1
        ids.setdefault(observation.event_id, _comparable(observation, scope.attempt))
        if new:
            result.fresh.append(observation)
            result.outcome.new += 1
        else:
            result.outcome.duplicate += 1
    return result


def _clash(
    index: int,
    observation: Observation,
    key: OutcomeKey,
    held: dict[str, object] | None,
    known: tuple[Any, ...] | None,
    scope: TokenScope,
) -> OutcomeClash | None:
    """Why this outcome event cannot be stored nor be a duplicate, if it cannot: its key
    holds different content, or its (new) outcome comes under an event ID that already
    names another event (a free event's ID is its identity, so it would be dropped)."""
    content = outcome_content(observation)
    if held is not None:
        fields = tuple(differing_fields(held, content))
        if not fields:
            return None
        return OutcomeClash(index, observation.event_id, key, fields, held, content)
    if known is None or known == _comparable(observation, scope.attempt):
        return None
    other: dict[str, object] = {
        "event_id": f"another event (type {known[1]}, execution attempt {known[0]})"
    }
    return OutcomeClash(
        index, observation.event_id, key, ("event_id",), other, {"event_id": observation.event_id}
    )


def declared_records(
    connection: Connection, run_id: int, attempt: int
) -> dict[str, dict[str, Any]]:
    """Per round of the execution attempt, what its declaration recorded beside its digests
    (``protocol``, ``planned_trials``; absent when it recorded none), from the round's first
    stored population event: the one that declared it."""
    query = (
        select(observations.c.body)
        .where(
            observations.c.run_id == run_id,
            observations.c.attempt == attempt,
            observations.c.type == "population",
        )
        .order_by(observations.c.id)
    )
    found: dict[str, dict[str, Any]] = {}
    for body in connection.execute(query).scalars():
        if isinstance(body, dict) and isinstance(body.get("round_id"), str):
            kept = {k: body[k] for k in ("protocol", "planned_trials") if k in body}
            found.setdefault(body["round_id"], kept)
    return found


def write_observations(
    connection: Connection, scope: TokenScope, batch: list[Observation]
) -> ObservationOutcome:
    """Store a batch, all of it or nothing: a changed outcome raises
    :class:`OutcomeConflict` before anything is written."""
    now = time.time()
    if connection.dialect.name == "postgresql":
        # One writer of a run's outcomes at a time, so tallies follow current outcomes and
        # the conflict checks see every committed outcome.
        connection.execute(text("SELECT pg_advisory_xact_lock(:run)"), {"run": scope.run_id})
    sorted_ = _sort(connection, scope, batch)
    if sorted_.clashes:
        raise OutcomeConflict(sorted_.clashes)
    fresh = sorted_.fresh
    if fresh:
        connection.execute(
            insert(observations),
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
                for o in fresh
            ],
        )
    declarations = [o.population for o in fresh if o.population is not None]
    if declarations:
        connection.execute(
            insert(eval_rounds),
            [
                {
                    "run_id": scope.run_id,
                    "execution_attempt": scope.attempt,
                    "round_id": p.round_id,
                    "expected": p.expected,
                    "task_name": p.task_name,
                    "task_version": p.task_version,
                    "text_samples": p.text_samples,
                    "verdicts": p.verdicts,
                    "declared_at": now,
                    **{name: p.digests.get(name) for name in DIGEST_NAMES},
                }
                for p in declarations
            ],
        )
    trials = [o.trial for o in fresh if o.trial is not None]
    if trials:
        _record_trials(connection, scope, trials, now)
    return sorted_.outcome


def _record_trials(
    connection: Connection, scope: TokenScope, trials: list[TrialResult], now: float
) -> None:
    """Store terminal attempts (new, checked by the caller) and move each trial's current
    outcome in its execution's round forward."""
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
            "reason_code": t.reason_code,
            "reason": t.reason,
            "received_at": now,
        }
        for t in trials
    ]
    connection.execute(insert(trial_results), rows)
    held = _current(connection, scope, {(t.round_id, t.trial_id) for t in trials})
    known = set(held)
    tally: Counter[tuple[str, str]] = Counter()
    reports: Counter[tuple[str, str]] = Counter()
    winners: dict[tuple[str, str], dict[str, Any]] = {}
    for trial, row in zip(trials, rows, strict=True):
        key = (trial.round_id, trial.trial_id)
        reports[key] += 1
        before = held.get(key)
        if before is not None and trial.trial_attempt <= before[0]:
            continue  # an older attempt arriving late only adds to the history
        if before is not None:
            tally[(trial.round_id, before[1])] -= 1
        tally[(trial.round_id, trial.status)] += 1
        held[key] = (trial.trial_attempt, trial.status)
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
        _update_current(connection, scope, updates)
    _add_to_tallies(connection, scope, tally)


def _add_to_tallies(
    connection: Connection, scope: TokenScope, tally: Counter[tuple[str, str]]
) -> None:
    changes = [
        {
            "run_id": scope.run_id,
            "execution_attempt": scope.attempt,
            "round_id": round_id,
            "status": status,
            "count": delta,
        }
        for (round_id, status), delta in tally.items()
        if delta
    ]
    if changes:
        statement = upsert(connection, round_tallies)
        connection.execute(
            statement.on_conflict_do_update(
                index_elements=[
                    round_tallies.c.run_id,
                    round_tallies.c.execution_attempt,
                    round_tallies.c.round_id,
                    round_tallies.c.status,
                ],
                set_={"count": round_tallies.c.count + statement.excluded["count"]},
            ),
            changes,
        )


_MOVABLE = ("trial_attempt", "status", "eligible", "reward")


def _current_values(winner: dict[str, Any] | None) -> dict[str, Any]:
    """Parameters of one current-outcome update: the new outcome, or keep (NULL flag)."""
    values = {f"b_{name}": None if winner is None else winner[name] for name in _MOVABLE}
    return {**values, "b_moves": winner is not None}


def _update_current(
    connection: Connection, scope: TokenScope, updates: list[dict[str, Any]]
) -> None:
    moves: BindParameter[bool] = bindparam("b_moves", type_=Boolean)
    statement = (
        update(trial_current)
        .where(
            trial_current.c.run_id == scope.run_id,
            trial_current.c.execution_attempt == scope.attempt,
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
    connection: Connection, scope: TokenScope, trials: set[tuple[str, str]]
) -> dict[tuple[str, str], tuple[int, str]]:
    """The current trial attempt and status of these trials in this execution's rounds."""
    by_round: dict[str, list[str]] = {}
    for round_id, trial_id in sorted(trials):
        by_round.setdefault(round_id, []).append(trial_id)
    found: dict[tuple[str, str], tuple[int, str]] = {}
    # One round at a time: (round, trial) pairs as a row-value IN list are not index
    # lookups on PostgreSQL, which then reads every trial of the run for each batch.
    for round_id, trial_ids in by_round.items():
        query = select(
            trial_current.c.trial_id,
            trial_current.c.trial_attempt,
            trial_current.c.status,
        ).where(
            trial_current.c.run_id == scope.run_id,
            trial_current.c.execution_attempt == scope.attempt,
            trial_current.c.round_id == round_id,
            trial_current.c.trial_id.in_(trial_ids),
        )
        found.update(
            ((round_id, trial_id), (int(attempt), str(status)))
            for trial_id, attempt, status in connection.execute(query)
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
