"""The trials of one transition between two rounds (the matched view's lists), with each
side's current outcome and the trajectory of its current attempt.

Pages are in trial-ID order (keyset: ``after`` the last trial ID of the page before). The
transition is chosen in the database by the rule :data:`TRANSITION_RULES` states, so a page
of 100 trials of 10,000 reads the two rounds' primary keys, never every trial in Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, or_, select, true

from tuneplane.contract.trajectories import evaluation_identity
from tuneplane.evaluation.matched import TRANSITION_RULES
from tuneplane.store.evaluation import TrialRow, trials_by_id
from tuneplane.store.schema import trajectories, trial_current


@dataclass(frozen=True, slots=True)
class RoundRef:
    run_id: int
    attempt: int
    round_id: str


@dataclass(frozen=True, slots=True)
class MatchedTrial:
    trial_id: str
    left: TrialRow | None
    right: TrialRow | None
    #: The index rows of each side's current attempt's trajectory, when one was sent.
    left_trajectory: Any | None
    right_trajectory: Any | None


def _status_in(table: Any, statuses: frozenset[str]) -> ColumnElement[bool]:
    found: ColumnElement[bool] = table.c.status.in_(sorted(statuses))
    return found


def _of(table: Any, side: RoundRef) -> ColumnElement[bool]:
    return and_(
        table.c.run_id == side.run_id,
        table.c.execution_attempt == side.attempt,
        table.c.round_id == side.round_id,
    )


def _page_ids(
    connection: Connection,
    left: RoundRef,
    right: RoundRef,
    transition: str,
    after: str | None,
    limit: int,
) -> list[str]:
    """The trial IDs of one transition's page."""
    ours, theirs = trial_current.alias("l"), trial_current.alias("r")
    (first, second), *_ = TRANSITION_RULES[transition]
    if first is None or second is None:
        # Missing on one side: the present side's trials without a partner.
        present, absent = (theirs, ours) if first is None else (ours, theirs)
        statuses = second if first is None else first
        assert statuses is not None
        present_ref, absent_ref = (right, left) if first is None else (left, right)
        joined = present.outerjoin(
            absent, and_(_of(absent, absent_ref), absent.c.trial_id == present.c.trial_id)
        )
        where: ColumnElement[bool] = and_(
            _of(present, present_ref), _status_in(present, statuses), absent.c.trial_id.is_(None)
        )
    else:
        present = ours
        joined = ours.join(theirs, and_(_of(theirs, right), theirs.c.trial_id == ours.c.trial_id))
        pairs = [
            and_(_status_in(ours, a), _status_in(theirs, b))
            for a, b in TRANSITION_RULES[transition]
            if a is not None and b is not None
        ]
        where = and_(_of(ours, left), or_(*pairs))
    after_clause = present.c.trial_id > after if after is not None else true()
    query = (
        select(present.c.trial_id)
        .select_from(joined)
        .where(where, after_clause)
        .order_by(present.c.trial_id)
        .limit(limit)
    )
    return [trial_id for (trial_id,) in connection.execute(query)]


def _trajectories(
    connection: Connection, side: RoundRef, rows: dict[str, TrialRow]
) -> dict[str, Any]:
    """The index row of each trial's current attempt's trajectory, by trial ID."""
    identities = {
        evaluation_identity(side.round_id, trial_id, row.trial_attempt): trial_id
        for trial_id, row in rows.items()
    }
    if not identities:
        return {}
    query = select(trajectories).where(
        trajectories.c.run_id == side.run_id,
        trajectories.c.attempt == side.attempt,
        trajectories.c.identity.in_(list(identities)),
    )
    return {identities[row.identity]: row for row in connection.execute(query)}


def _with_sides(
    connection: Connection, left: RoundRef, right: RoundRef, ids: list[str]
) -> list[MatchedTrial]:
    refs = (left, right)
    rows = [trials_by_id(connection, s.run_id, s.attempt, s.round_id, ids) for s in refs]
    texts = [_trajectories(connection, s, found) for s, found in zip(refs, rows, strict=True)]
    return [
        MatchedTrial(
            trial_id,
            rows[0].get(trial_id),
            rows[1].get(trial_id),
            texts[0].get(trial_id),
            texts[1].get(trial_id),
        )
        for trial_id in ids
    ]


def matched_page(
    connection: Connection,
    left: RoundRef,
    right: RoundRef,
    transition: str,
    after: str | None,
    limit: int,
) -> list[MatchedTrial]:
    """One page of the trials of ``transition`` (a key of ``TRANSITION_RULES``)."""
    ids = _page_ids(connection, left, right, transition, after, limit)
    return _with_sides(connection, left, right, ids)


def matched_trial(
    connection: Connection, left: RoundRef, right: RoundRef, trial_id: str
) -> MatchedTrial:
    """One trial on both sides (either may be missing)."""
    return _with_sides(connection, left, right, [trial_id])[0]
