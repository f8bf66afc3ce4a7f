"""Failure diagnoses: the evidence of an attempt as the store holds it, and the records of
each diagnosis. The rules themselves are pure (``tuneplane.diagnostics``)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Final

from sqlalchemy import Connection, insert, select, update

from tuneplane.contract.errors import NotFound
from tuneplane.store import points
from tuneplane.store.schema import attempts, diagnoses, log_lines, runs

#: Output lines of the attempt a diagnosis reads, from its end.
LOG_TAIL_LINES: Final = 400
#: Series a diagnosis reads, and points of each (reduced in the database).
SERIES_MAX: Final = 32
POINTS_PER_SERIES: Final = 200
#: Series whose trends the rules judge are read first.
_JUDGED: Final = re.compile(r"loss|grad|kl|per_s|throughput|tok", re.IGNORECASE)
_MESSAGE_MAX: Final = 1024


#: A series' last points by step; None for NaN or infinite.
Points = list[tuple[int, float | None]]


@dataclass(frozen=True, slots=True)
class AttemptEvidence:
    """What the store has of one attempt, in plain data."""

    exit_code: int | None
    status: str | None
    lines: list[tuple[str, str, int]]  # (stream, text, seq), oldest first
    series: list[tuple[str, Points]]
    health: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] | None = None


def _attempt_row(connection: Connection, run_id: int, attempt: int) -> Any:
    row = connection.execute(
        select(attempts.c.status, attempts.c.exit_code, attempts.c.config).where(
            attempts.c.run_id == run_id, attempts.c.attempt == attempt
        )
    ).first()
    if row is None:
        raise NotFound(f"attempt: the run has no execution attempt {attempt}")
    return row


def _tail(connection: Connection, run_id: int, attempt: int) -> list[tuple[str, str, int]]:
    newest = connection.execute(
        select(log_lines.c.stream, log_lines.c.text, log_lines.c.seq)
        .where(log_lines.c.run_id == run_id, log_lines.c.attempt == attempt)
        .order_by(log_lines.c.id.desc())
        .limit(LOG_TAIL_LINES)
    ).all()
    return [(stream, text, int(seq)) for stream, text, seq in reversed(newest)]


def _series(
    connection: Connection, run_id: int
) -> list[tuple[str, list[tuple[int, float | None]]]]:
    summaries = points.list_summaries(connection, run_id)
    chosen = sorted(summaries, key=lambda s: (not _JUDGED.search(s.name), s.name))[:SERIES_MAX]
    found = []
    for summary in chosen:
        values: Points = []
        if summary.count:
            chart = points.read_chart(
                connection,
                summary.id,
                lo=summary.first_step,
                hi=summary.last_step,
                max_points=POINTS_PER_SERIES,
            )
            values = [(bucket.step_max, bucket.last) for bucket in chart.buckets]
        if summary.invalid_count:
            values += [(step, None) for step, _ in points.read_invalid(connection, summary.id)]
        found.append((summary.name, sorted(values, key=lambda point: point[0])))
    return found


def gather(connection: Connection, run_id: int, attempt: int) -> AttemptEvidence:
    row = _attempt_row(connection, run_id, attempt)
    run = connection.execute(select(runs.c.health, runs.c.config).where(runs.c.id == run_id)).one()
    health = run.health if isinstance(run.health, dict) else {}
    return AttemptEvidence(
        exit_code=row.exit_code,
        status=row.status,
        lines=_tail(connection, run_id, attempt),
        series=_series(connection, run_id),
        health=health if health.get("attempt") == attempt else {},
        config=row.config if row.config is not None else run.config,
    )


def begin(connection: Connection, run_id: int, attempt: int, trigger: str) -> int | None:
    """A new diagnosis, running; None when the attempt's ending was diagnosed already (a
    retried status report): only a re-run asks again."""
    _attempt_row(connection, run_id, attempt)
    if trigger != "rerun" and was_diagnosed(connection, run_id, attempt):
        return None
    created = connection.execute(
        insert(diagnoses).values(
            run_id=run_id, attempt=attempt, trigger=trigger, state="running",
            created_at=time.time(),
        )
    )  # fmt: skip
    _touch(connection, run_id)
    key = created.inserted_primary_key
    assert key is not None
    return int(key[0])


def _touch(connection: Connection, run_id: int) -> None:
    """A diagnosis that starts, ends or is explained is news on the run's live stream."""
    connection.execute(update(runs).where(runs.c.id == run_id).values(updated_at=time.time()))


def _touch_diagnosed(connection: Connection, diagnosis: int) -> None:
    run_id = connection.execute(
        select(diagnoses.c.run_id).where(diagnoses.c.id == diagnosis)
    ).scalar_one()
    _touch(connection, run_id)


def finish(
    connection: Connection,
    diagnosis: int,
    findings: list[dict[str, Any]] | None,
    error: str | None,
) -> None:
    connection.execute(
        update(diagnoses)
        .where(diagnoses.c.id == diagnosis)
        .values(
            state="failed" if error is not None else "done",
            findings=findings,
            error=None if error is None else error[:_MESSAGE_MAX],
            finished_at=time.time(),
        )
    )
    _touch_diagnosed(connection, diagnosis)


def explain(connection: Connection, diagnosis: int, explanation: dict[str, Any]) -> None:
    connection.execute(
        update(diagnoses).where(diagnoses.c.id == diagnosis).values(explanation=explanation)
    )
    _touch_diagnosed(connection, diagnosis)


def lost_attempts(connection: Connection, before: float) -> list[tuple[int, int]]:
    """(run, attempt) of the latest attempts still running whose last heartbeat is older
    than ``before``, not diagnosed yet."""
    diagnosed = select(diagnoses.c.id).where(
        diagnoses.c.run_id == attempts.c.run_id, diagnoses.c.attempt == attempts.c.attempt
    )
    query = (
        select(attempts.c.run_id, attempts.c.attempt)
        .join(runs, (runs.c.id == attempts.c.run_id) & (runs.c.attempt_count == attempts.c.attempt))
        .where(
            attempts.c.status == "running",
            runs.c.health_at.is_not(None),
            runs.c.health_at < before,
            ~diagnosed.exists(),
        )
        .limit(100)
    )
    return [(int(run_id), int(attempt)) for run_id, attempt in connection.execute(query)]


def was_diagnosed(connection: Connection, run_id: int, attempt: int) -> bool:
    found = connection.execute(
        select(diagnoses.c.id).where(diagnoses.c.run_id == run_id, diagnoses.c.attempt == attempt)
    ).first()
    return found is not None


def list_diagnoses(connection: Connection, run_id: int, limit: int = 20) -> list[dict[str, Any]]:
    query = (
        select(diagnoses)
        .where(diagnoses.c.run_id == run_id)
        .order_by(diagnoses.c.id.desc())
        .limit(limit)
    )
    return [
        {
            "id": row.id,
            "attempt": row.attempt,
            "trigger": row.trigger,
            "state": row.state,
            "findings": row.findings,
            "error": row.error,
            "explanation": row.explanation,
            "created_at": row.created_at,
            "finished_at": row.finished_at,
        }
        for row in connection.execute(query)
    ]
