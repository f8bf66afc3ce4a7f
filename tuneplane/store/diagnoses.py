"""Failure diagnoses: the evidence of an attempt as the store holds it, and the records of
each diagnosis. The rules themselves are pure (``tuneplane.diagnostics``)."""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from sqlalchemy import Connection, func, insert, select, update

from tuneplane.contract.errors import NotFound
from tuneplane.store import points
from tuneplane.store.schema import attempts, diagnoses, log_lines, runs
from tuneplane.store.sql import Dialect

#: Output lines of the attempt a diagnosis reads whole, from its end (the tail: what the
#: job printed last, and the context sent to the language model); the rest of the log is
#: searched for signatures and tracebacks.
LOG_TAIL_LINES: Final = 400
#: The search of the whole log: lines read per query, lines read at most (the last ones),
#: seconds it may take, and lines kept per finding code (the first ones: a cause comes
#: before its fallout). These bound its time and memory whatever the log's length.
LOG_PAGE_LINES: Final = 20_000
LOG_SEARCH_MAX_LINES: Final = 2_000_000
LOG_SEARCH_SECONDS: Final = 20.0
LOG_HITS_PER_CODE: Final = 20
#: Series a diagnosis reads, and points of each (reduced in the database).
SERIES_MAX: Final = 32
POINTS_PER_SERIES: Final = 200
#: Series whose trends the rules judge are read first.
_JUDGED: Final = re.compile(r"loss|grad|kl|per_s|throughput|tok", re.IGNORECASE)
_MESSAGE_MAX: Final = 1024


#: A series' last points by step; None for NaN or infinite.
Points = list[tuple[int, float | None]]


#: A page of lines (their texts, in order) -> (place in the page, the codes of the
#: patterns it matches, lines around it to keep) of each line a rule could cite.
FindHits = Callable[[Sequence[str]], Sequence[tuple[int, Sequence[str], int]]]


@dataclass(frozen=True, slots=True)
class LogRead:
    """The lines of an attempt's log a diagnosis reads, and how much of the log that is."""

    #: (index, stream, text, seq), in log order: ``index`` is the line's place in the log.
    lines: list[tuple[int, str, str, int]] = field(default_factory=list)
    stored: int = 0
    searched: int = 0
    #: Lines the job numbered that the store never received (gaps in ``seq``).
    missing: int = 0
    stopped: str | None = None


@dataclass(frozen=True, slots=True)
class AttemptEvidence:
    """What the store has of one attempt, in plain data."""

    exit_code: int | None
    status: str | None
    log: LogRead
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


def _extent(connection: Connection, run_id: int, attempt: int) -> tuple[int, int, int]:
    """(lines stored, the first seq to read, lines missing from the numbering)."""
    mine = (log_lines.c.run_id == run_id) & (log_lines.c.attempt == attempt)
    count, low, high = connection.execute(
        select(func.count(), func.min(log_lines.c.seq), func.max(log_lines.c.seq)).where(mine)
    ).one()
    if not count:
        return 0, 0, 0
    skip = max(0, int(count) - LOG_SEARCH_MAX_LINES)
    first = low
    if skip:
        first = connection.execute(
            select(log_lines.c.seq).where(mine).order_by(log_lines.c.seq).offset(skip).limit(1)
        ).scalar_one()
    return int(count), int(first), int(high) - int(low) + 1 - int(count)


class _Kept:
    """What a search keeps of the pages it reads: the lines around each hit (up to
    LOG_HITS_PER_CODE per code) and the last pages, for the tail."""

    def __init__(self) -> None:
        self.lines: dict[int, tuple[int, str, str, int]] = {}
        self.per_code: dict[str, int] = {}
        self.last: deque[tuple[int, list[Any]]] = deque(maxlen=2)

    def page(self, index: int, rows: list[Any], find_hits: FindHits | None) -> None:
        """``rows`` (stream, text, seq) from the line ``index`` on."""
        self.last.append((index, rows))
        if find_hits is None:
            return
        for at, codes, context in find_hits([row[1] for row in rows]):
            wanted = [code for code in codes if self.per_code.get(code, 0) < LOG_HITS_PER_CODE]
            for code in wanted:
                self.per_code[code] = self.per_code.get(code, 0) + 1
            for near in range(max(0, at - context), min(len(rows), at + context + 1)):
                if wanted:
                    stream, text, seq = rows[near]
                    self.lines[index + near] = (index + near, stream, text, int(seq))

    def tail(self) -> list[tuple[int, str, str, int]]:
        rows = [
            (index + i, stream, text, int(seq))
            for index, page in self.last
            for i, (stream, text, seq) in enumerate(page)
        ]
        return rows[-LOG_TAIL_LINES:]


def _read_log(
    connection: Connection, run_id: int, attempt: int, find_hits: FindHits | None
) -> LogRead:
    """The tail of the attempt's log, and the lines of the rest a rule could cite (when
    ``find_hits`` is given), read in pages by seq within the bounds above."""
    stored, first, missing = _extent(connection, run_id, attempt)
    kept = _Kept()
    index = start = max(0, stored - LOG_SEARCH_MAX_LINES)
    after, stopped = first - 1, None
    deadline = time.monotonic() + LOG_SEARCH_SECONDS
    if find_hits is None:  # the tail only
        index = start = max(0, stored - LOG_TAIL_LINES)
        after = first - 1 if not start else _seq_at(connection, run_id, attempt, start) - 1
    # The driver's cursor, not SQLAlchemy's rows: a long log is read at the driver's pace.
    sql = Dialect(connection)
    query = sql.sql(
        "SELECT stream, text, seq FROM log_lines WHERE run_id = ? AND attempt = ? AND seq > ? "
        f"ORDER BY seq LIMIT {LOG_PAGE_LINES}"
    )
    while index < stored:
        sql.cursor.execute(query, (run_id, attempt, after))
        page = sql.cursor.fetchall()
        if not page:
            break
        kept.page(index, page, find_hits)
        index, after = index + len(page), int(page[-1][2])
        if index < stored and time.monotonic() > deadline:
            stopped = f"the search stopped after {LOG_SEARCH_SECONDS:g} s"
            break
    tail = kept.tail()
    lines = sorted({**kept.lines, **{row[0]: row for row in tail}}.values())
    searched = index - start if find_hits is not None else len(tail)
    if stopped is not None:  # what was read is what the search covered, from its start
        searched = index - start
    return LogRead(lines, stored, searched, missing, stopped)


def _seq_at(connection: Connection, run_id: int, attempt: int, offset: int) -> int:
    return int(
        connection.execute(
            select(log_lines.c.seq)
            .where(log_lines.c.run_id == run_id, log_lines.c.attempt == attempt)
            .order_by(log_lines.c.seq)
            .offset(offset)
            .limit(1)
        ).scalar_one()
    )


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


def gather(
    connection: Connection, run_id: int, attempt: int, find_hits: FindHits | None = None
) -> AttemptEvidence:
    """The attempt's evidence; with ``find_hits``, its whole log is searched (within
    bounds) beside the tail it always reads."""
    row = _attempt_row(connection, run_id, attempt)
    run = connection.execute(select(runs.c.health, runs.c.config).where(runs.c.id == run_id)).one()
    health = run.health if isinstance(run.health, dict) else {}
    return AttemptEvidence(
        exit_code=row.exit_code,
        status=row.status,
        log=_read_log(connection, run_id, attempt, find_hits),
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
    log: dict[str, Any] | None = None,
) -> None:
    """The diagnosis done (or failed with ``error``), with how much of the log it read."""
    connection.execute(
        update(diagnoses)
        .where(diagnoses.c.id == diagnosis)
        .values(
            state="failed" if error is not None else "done",
            findings=findings,
            error=None if error is None else error[:_MESSAGE_MAX],
            log=log,
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
            # Whether the findings rest on less than the whole log (None: not known yet).
            "log_cut": None if row.log is None else bool(row.log.get("cut")),
            "log": row.log,
            "created_at": row.created_at,
            "finished_at": row.finished_at,
        }
        for row in connection.execute(query)
    ]
