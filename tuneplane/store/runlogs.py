"""Live log lines of a run: written by the runner, read by cursor (the row id)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, select

from tuneplane.contract.protocol import LogLine
from tuneplane.store.credentials import TokenScope
from tuneplane.store.schema import log_lines
from tuneplane.store.sql import Dialect, chunks, flat


def write_lines(connection: Connection, scope: TokenScope, lines: list[LogLine]) -> int:
    """Store lines; an (attempt, seq) already stored is a retry. Returns how many were new."""
    sql = Dialect(connection)
    rows = [
        (scope.run_id, scope.attempt, line.seq, line.stream, line.time, line.text, line.data)
        for line in lines
    ]
    new = 0
    for part in chunks(rows, 7):
        sql.cursor.execute(
            sql.sql(
                "INSERT INTO log_lines (run_id, attempt, seq, stream, time, text, data) "
                f"VALUES {sql.values(7, len(part))} "
                "ON CONFLICT (run_id, attempt, seq) DO NOTHING RETURNING id"
            ),
            flat(part),
        )
        new += len(sql.cursor.fetchall())
    return new


@dataclass(frozen=True, slots=True)
class StoredLine:
    cursor: int
    attempt: int
    seq: int
    stream: str
    time: float
    text: str
    data: bytes | None


def read_lines(connection: Connection, run_id: int, after: int, limit: int) -> list[StoredLine]:
    query = (
        select(
            log_lines.c.id,
            log_lines.c.attempt,
            log_lines.c.seq,
            log_lines.c.stream,
            log_lines.c.time,
            log_lines.c.text,
            log_lines.c.data,
        )
        .where(log_lines.c.run_id == run_id, log_lines.c.id > after)
        .order_by(log_lines.c.id)
        .limit(limit)
    )
    return [
        StoredLine(c, a, s, st, t, text, bytes(d) if d is not None else None)
        for c, a, s, st, t, text, d in connection.execute(query)
    ]
