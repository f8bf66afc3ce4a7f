"""Writing observation events and evaluation outcomes; reading recent events.

Every observation is immutable by ``(run, event_id)``: a retry is a duplicate, whatever its
content. Declarations and trial attempts are also immutable by their own identity, and each
trial's current outcome moves only to a higher (execution attempt, trial attempt).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, case, select, tuple_

from tuneplane.contract.observations import Observation
from tuneplane.store.credentials import TokenScope
from tuneplane.store.dialect import upsert
from tuneplane.store.schema import eval_rounds, observations, trial_current, trial_results


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
    for observation in unique:
        if observation.event_id not in new_ids:
            continue
        if observation.population is not None:
            _declare(connection, scope.run_id, observation, now)
        elif observation.trial is not None:
            _record_trial(connection, scope, observation, now)
    return ObservationOutcome(new=len(new_ids), duplicate=len(batch) - len(new_ids))


def _declare(connection: Connection, run_id: int, observation: Observation, now: float) -> None:
    population = observation.population
    assert population is not None
    connection.execute(
        upsert(connection, eval_rounds)
        .values(
            run_id=run_id,
            round_id=population.round_id,
            expected=population.expected,
            task_name=population.task_name,
            task_version=population.task_version,
            declared_at=now,
            **{name: population.digests.get(name) for name in ("dataset", "cohort")},
            **{name: population.digests.get(name) for name in ("verifier", "settings")},
        )
        .on_conflict_do_nothing(index_elements=[eval_rounds.c.run_id, eval_rounds.c.round_id])
    )


def _record_trial(
    connection: Connection, scope: TokenScope, observation: Observation, now: float
) -> None:
    trial = observation.trial
    assert trial is not None
    stored = connection.execute(
        upsert(connection, trial_results)
        .values(
            run_id=scope.run_id,
            round_id=trial.round_id,
            trial_id=trial.trial_id,
            execution_attempt=scope.attempt,
            trial_attempt=trial.trial_attempt,
            status=trial.status,
            eligible=trial.eligible,
            reward=trial.reward,
            error_type=trial.error_type,
            received_at=now,
        )
        .on_conflict_do_nothing()
        .returning(trial_results.c.trial_id)
    ).first()
    if stored is None:
        return
    new = upsert(connection, trial_current).values(
        run_id=scope.run_id,
        round_id=trial.round_id,
        trial_id=trial.trial_id,
        execution_attempt=scope.attempt,
        trial_attempt=trial.trial_attempt,
        status=trial.status,
        eligible=trial.eligible,
        reward=trial.reward,
        attempts=1,
    )
    incoming = (new.excluded.execution_attempt, new.excluded.trial_attempt)
    held = (trial_current.c.execution_attempt, trial_current.c.trial_attempt)
    newer = tuple_(*incoming) > tuple_(*held)
    connection.execute(
        new.on_conflict_do_update(
            index_elements=[
                trial_current.c.run_id,
                trial_current.c.round_id,
                trial_current.c.trial_id,
            ],
            set_={
                # An older attempt arriving late only adds to the history count.
                "execution_attempt": _pick(newer, incoming[0], held[0]),
                "trial_attempt": _pick(newer, incoming[1], held[1]),
                "status": _pick(newer, new.excluded.status, trial_current.c.status),
                "eligible": _pick(newer, new.excluded.eligible, trial_current.c.eligible),
                "reward": _pick(newer, new.excluded.reward, trial_current.c.reward),
                "attempts": trial_current.c.attempts + 1,
            },
        )
    )


def _pick(condition: Any, when_true: Any, otherwise: Any) -> Any:
    return case((condition, when_true), else_=otherwise)


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
