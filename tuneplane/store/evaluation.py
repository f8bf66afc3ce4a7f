"""Reads of evaluation outcomes: per-round counts, trial pages, retry histories.

A round is (run, execution attempt, round_id): every read names the execution attempt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Select, func, literal, select, union

from tuneplane.contract.limits import TRIAL_HISTORY_MAX
from tuneplane.contract.observations import CHECKPOINT_EVENT, DIGEST_NAMES
from tuneplane.store.schema import (
    eval_rounds,
    observations,
    round_tallies,
    trial_current,
    trial_results,
    unstored_trajectories,
)


@dataclass(frozen=True, slots=True)
class Declaration:
    expected: int
    digests: dict[str, str | None]
    task_name: str | None
    task_version: str | None
    verdicts: bool = True


@dataclass(slots=True)
class RoundState:
    round_id: str
    declaration: Declaration | None = None
    #: Current outcomes per status.
    tally: dict[str, int] = field(default_factory=dict)
    #: Current outcomes with a reward, and the sum of their rewards.
    rewarded: int = 0
    reward_sum: float = 0.0
    #: Trajectories the blob store refused that no re-send has stored since.
    unstored: int = 0


def execution_attempts(connection: Connection, run_id: int) -> list[int]:
    """The run's execution attempts that reported outcomes (have rounds), oldest first."""
    query = union(
        select(eval_rounds.c.execution_attempt).where(eval_rounds.c.run_id == run_id),
        select(round_tallies.c.execution_attempt).where(round_tallies.c.run_id == run_id),
    )
    return sorted(int(attempt) for (attempt,) in connection.execute(query))


def _declarations(
    connection: Connection, run_id: int, attempt: int, round_id: str | None
) -> dict[str, Declaration]:
    query = select(eval_rounds).where(
        eval_rounds.c.run_id == run_id, eval_rounds.c.execution_attempt == attempt
    )
    if round_id is not None:
        query = query.where(eval_rounds.c.round_id == round_id)
    return {
        row.round_id: Declaration(
            expected=int(row.expected),
            digests={name: getattr(row, name) for name in DIGEST_NAMES},
            task_name=row.task_name,
            task_version=row.task_version,
            verdicts=row.verdicts is not False,
        )
        for row in connection.execute(query)
    }


def _rewards(
    connection: Connection, run_id: int, attempt: int, round_id: str | None
) -> list[tuple[str, int, float]]:
    """Per round: how many current outcomes have a reward, and their sum."""
    c = trial_current.c
    query = (
        select(c.round_id, func.count(c.reward), func.sum(c.reward))
        .where(c.run_id == run_id, c.execution_attempt == attempt, c.reward.is_not(None))
        .group_by(c.round_id)
    )
    if round_id is not None:
        query = query.where(c.round_id == round_id)
    return [(name, int(count), float(total)) for name, count, total in connection.execute(query)]


def rounds(
    connection: Connection, run_id: int, attempt: int, round_id: str | None = None
) -> list[RoundState]:
    """Every round of the execution attempt (declared, or known from its results), with
    status counts over the current outcomes of all reported trials."""
    query = select(round_tallies.c.round_id, round_tallies.c.status, round_tallies.c.count).where(
        round_tallies.c.run_id == run_id,
        round_tallies.c.execution_attempt == attempt,
        round_tallies.c.count > 0,
    )
    if round_id is not None:
        query = query.where(round_tallies.c.round_id == round_id)
    states: dict[str, RoundState] = {}
    for name, declaration in _declarations(connection, run_id, attempt, round_id).items():
        states[name] = RoundState(name, declaration)
    for name, status, count in connection.execute(query):
        states.setdefault(name, RoundState(name)).tally[status] = int(count)
    for name, rewarded, total in _rewards(connection, run_id, attempt, round_id):
        state = states.setdefault(name, RoundState(name))
        state.rewarded, state.reward_sum = rewarded, total
    for name, count in _unstored(connection, run_id, attempt, round_id):
        if name in states:  # a round is made by outcomes, never by its text alone
            states[name].unstored = count
    return [states[name] for name in sorted(states)]


def _unstored(
    connection: Connection, run_id: int, attempt: int, round_id: str | None
) -> list[tuple[str, int]]:
    u = unstored_trajectories.c
    query = (
        select(u.round_id, func.count())
        .where(u.run_id == run_id, u.attempt == attempt, u.round_id.is_not(None))
        .group_by(u.round_id)
    )
    if round_id is not None:
        query = query.where(u.round_id == round_id)
    return [(str(name), int(count)) for name, count in connection.execute(query)]


@dataclass(frozen=True, slots=True)
class TrialRow:
    trial_id: str
    trial_attempt: int
    status: str
    eligible: bool
    reward: float | None
    attempts: int
    #: Of the current attempt: its error type and why it has its status.
    error_type: str | None = None
    reason_code: str | None = None
    reason: str | None = None


def _current_with_reasons(run_id: int, attempt: int, round_id: str) -> Select[Any]:
    """The round's current outcomes with their current attempt's error type and reason."""
    # The current attempt's own row (a primary-key lookup per trial) says why it has its
    # status: trial_current keeps only what counts and filters read.
    attempt_row = trial_results.c
    return (
        select(
            trial_current.c.trial_id,
            trial_current.c.trial_attempt,
            trial_current.c.status,
            trial_current.c.eligible,
            trial_current.c.reward,
            trial_current.c.attempts,
            attempt_row.error_type,
            attempt_row.reason_code,
            attempt_row.reason,
        )
        .outerjoin(
            trial_results,
            (attempt_row.run_id == trial_current.c.run_id)
            & (attempt_row.round_id == trial_current.c.round_id)
            & (attempt_row.trial_id == trial_current.c.trial_id)
            & (attempt_row.execution_attempt == trial_current.c.execution_attempt)
            & (attempt_row.trial_attempt == trial_current.c.trial_attempt),
        )
        .where(
            trial_current.c.run_id == run_id,
            trial_current.c.execution_attempt == attempt,
            trial_current.c.round_id == round_id,
        )
    )


def trial_page(
    connection: Connection,
    run_id: int,
    attempt: int,
    round_id: str,
    status: str | None,
    after: str | None,
    limit: int,
) -> list[TrialRow]:
    """Current outcomes in trial-id order (keyset pagination), optionally of one status."""
    query = (
        _current_with_reasons(run_id, attempt, round_id)
        .order_by(trial_current.c.trial_id)
        .limit(limit)
    )
    if status is not None:
        query = query.where(trial_current.c.status == status)
    if after is not None:
        query = query.where(trial_current.c.trial_id > after)
    return [TrialRow(*row) for row in connection.execute(query)]


def checkpoints(connection: Connection, run_id: int, attempt: int) -> dict[str, dict[str, Any]]:
    """The checkpoint each round of the execution attempt recorded beside it (the
    ``evaluation/checkpoint`` events; a later one for a round wins): ``{"name", "digest"}``."""
    rows = connection.execute(
        select(observations.c.body)
        .where(
            observations.c.run_id == run_id,
            observations.c.attempt == attempt,
            observations.c.type == "event",
            observations.c.name == CHECKPOINT_EVENT,
        )
        .order_by(observations.c.id)
    ).scalars()
    found: dict[str, dict[str, Any]] = {}
    for body in rows:
        fields = body.get("fields") if isinstance(body, dict) else None
        if isinstance(fields, dict) and isinstance(fields.get("round_id"), str):
            found[fields["round_id"]] = {
                "name": fields.get("checkpoint"),
                "digest": fields.get("checkpoint_digest"),
            }
    return found


def latest_checkpoints(connection: Connection, run_ids: list[int]) -> dict[int, dict[str, Any]]:
    """Per run, the checkpoint of its latest round that recorded one (its newest
    ``evaluation/checkpoint`` event): ``{"name", "digest", "round_id", "execution_attempt"}``.
    Only runs with rounds are searched: a checkpoint is recorded beside a round, and a
    training run's many free events are never scanned for one."""
    evaluated = union(
        select(eval_rounds.c.run_id).where(eval_rounds.c.run_id.in_(run_ids)),
        select(round_tallies.c.run_id).where(round_tallies.c.run_id.in_(run_ids)),
    ).subquery()
    # The name inline, not bound: so both engines' planners use the partial index
    # ix_observations_checkpoints instead of every event of the run.
    newest = (
        select(func.max(observations.c.id))
        .where(
            observations.c.run_id.in_(select(evaluated.c.run_id)),
            observations.c.name == literal(CHECKPOINT_EVENT, literal_execute=True),
        )
        .group_by(observations.c.run_id)
    )
    rows = connection.execute(
        select(observations.c.run_id, observations.c.attempt, observations.c.body).where(
            observations.c.id.in_(newest)
        )
    )
    found: dict[int, dict[str, Any]] = {}
    for run_id, attempt, body in rows:
        fields = body.get("fields") if isinstance(body, dict) else None
        if isinstance(fields, dict) and isinstance(fields.get("round_id"), str):
            found[int(run_id)] = {
                "name": fields.get("checkpoint"),
                "digest": fields.get("checkpoint_digest"),
                "round_id": fields["round_id"],
                "execution_attempt": int(attempt),
            }
    return found


def scored_trials(
    connection: Connection, run_id: int, attempt: int, round_id: str
) -> list[tuple[str, str]]:
    """``(trial_id, status)`` of the round's current outcomes that have a verdict (success
    or failure), for the numbers of repeated tasks (evaluation.repeats)."""
    query = select(trial_current.c.trial_id, trial_current.c.status).where(
        trial_current.c.run_id == run_id,
        trial_current.c.execution_attempt == attempt,
        trial_current.c.round_id == round_id,
        trial_current.c.status.in_(("success", "failure")),
    )
    return [(row.trial_id, row.status) for row in connection.execute(query)]


def trials_by_id(
    connection: Connection, run_id: int, attempt: int, round_id: str, trial_ids: list[str]
) -> dict[str, TrialRow]:
    """The current outcomes of the named trials that the round has."""
    query = _current_with_reasons(run_id, attempt, round_id).where(
        trial_current.c.trial_id.in_(trial_ids)
    )
    return {row.trial_id: TrialRow(*row) for row in connection.execute(query)}


@dataclass(frozen=True, slots=True)
class AttemptRow:
    trial_attempt: int
    status: str
    eligible: bool
    reward: float | None
    error_type: str | None
    received_at: float
    reason_code: str | None
    reason: str | None


@dataclass(frozen=True, slots=True)
class History:
    #: Every attempt reported, however many.
    total: int
    #: The newest ``TRIAL_HISTORY_MAX``, current (highest trial attempt) first.
    attempts: list[AttemptRow]


def trial_history(
    connection: Connection, run_id: int, attempt: int, round_id: str, trial_id: str
) -> History:
    """A trial's attempts in one execution's round, current first (at most
    ``TRIAL_HISTORY_MAX``), and how many there are in all."""
    where = (
        trial_results.c.run_id == run_id,
        trial_results.c.round_id == round_id,
        trial_results.c.trial_id == trial_id,
        trial_results.c.execution_attempt == attempt,
    )
    query = (
        select(
            trial_results.c.trial_attempt,
            trial_results.c.status,
            trial_results.c.eligible,
            trial_results.c.reward,
            trial_results.c.error_type,
            trial_results.c.received_at,
            trial_results.c.reason_code,
            trial_results.c.reason,
        )
        .where(*where)
        .order_by(trial_results.c.trial_attempt.desc())
        .limit(TRIAL_HISTORY_MAX)
    )
    rows = [AttemptRow(*row) for row in connection.execute(query)]
    total = len(rows)
    if total == TRIAL_HISTORY_MAX:
        count = select(func.count()).select_from(trial_results).where(*where)
        total = int(connection.execute(count).scalar_one())
    return History(total, rows)


def reported_among(
    connection: Connection, run_id: int, attempt: int, round_id: str, trial_ids: list[str]
) -> set[str]:
    """Which of ``trial_ids`` the round has an outcome for."""
    query = select(trial_current.c.trial_id).where(
        trial_current.c.run_id == run_id,
        trial_current.c.execution_attempt == attempt,
        trial_current.c.round_id == round_id,
        trial_current.c.trial_id.in_(trial_ids),
    )
    return set(connection.execute(query).scalars())


def current_statuses(
    connection: Connection, run_id: int, attempt: int, round_id: str
) -> dict[str, str]:
    query = select(trial_current.c.trial_id, trial_current.c.status).where(
        trial_current.c.run_id == run_id,
        trial_current.c.execution_attempt == attempt,
        trial_current.c.round_id == round_id,
    )
    return {trial: status for trial, status in connection.execute(query)}


def has_round(connection: Connection, run_id: int, attempt: int, round_id: str) -> bool:
    """Whether the execution attempt has the round (a declaration or a result)."""
    declared = select(eval_rounds.c.run_id).where(
        eval_rounds.c.run_id == run_id,
        eval_rounds.c.execution_attempt == attempt,
        eval_rounds.c.round_id == round_id,
    )
    reported = select(round_tallies.c.run_id).where(
        round_tallies.c.run_id == run_id,
        round_tallies.c.execution_attempt == attempt,
        round_tallies.c.round_id == round_id,
        round_tallies.c.count > 0,
    )
    return connection.execute(union(declared, reported).limit(1)).first() is not None


def has_outcomes(connection: Connection, run_id: int) -> bool:
    """Whether the run ever sent an outcome event (results or a declaration)."""
    for table in (trial_current, eval_rounds):
        if connection.execute(
            select(table.c.run_id).where(table.c.run_id == run_id).limit(1)
        ).first():
            return True
    return False
