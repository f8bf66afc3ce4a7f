"""Imported runs (``contract.imported``): each chunk stored in one transaction, on both
engines, idempotently.

An event is new exactly when its ``(run, log_id)`` insert is no conflict, as for Arena
events, so a second import of the same files, or of events that already came over HTTP
with the same IDs, adds nothing. Events keep their original time (the points' time and
``received_at``); NaN and infinities become invalid points of their series, counted and
shown as the SDK's are. A run that exists keeps its config.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from sqlalchemy import Connection, update

from tuneplane.contract.errors import Conflict
from tuneplane.contract.imported import ChunkOutcome, ImportedAlert, ImportedLog, RunChunk
from tuneplane.contract.run_meta import RunMeta
from tuneplane.store.points import write_points
from tuneplane.store.runs import ProjectSetup, create_or_resume, ensure_run, mark_end_unknown
from tuneplane.store.schema import runs
from tuneplane.store.sql import Dialect, chunks, flat


def _open_run(
    connection: Connection, chunk: RunChunk, setup: ProjectSetup, now: float
) -> tuple[int, bool, bool]:
    """(run id, created, config kept): the run and its project, created as ``setup`` says
    when new; one that exists keeps its config, whatever the chunk's."""
    kept = False
    try:
        meta = RunMeta(display_name=chunk.display_name, group=chunk.group)
        setup = replace(setup, display_name=chunk.project_display_name)
        created = create_or_resume(connection, chunk.project, chunk.run, chunk.config, setup, meta)
    except Conflict:
        created, kept = False, True
    known, _ = ensure_run(connection, chunk.project, chunk.run, None, now)
    if created:
        # Listed where it began, not where it was imported.
        connection.execute(
            update(runs).where(runs.c.id == known.id).values(created_at=chunk.started)
        )
    return known.id, created, kept


def _new_events(sql: Dialect, run_id: int, logs: Sequence[ImportedLog]) -> dict[str, int]:
    """Insert the events; the new ones' ids by ``log_id``."""
    rows = [(run_id, log.log_id, log.step, log.time) for log in logs]
    found: dict[str, int] = {}
    for part in chunks(rows, 4):
        sql.cursor.execute(
            "INSERT INTO events (run_id, log_id, step, received_at) VALUES "
            f"{sql.values(4, len(part))} ON CONFLICT (run_id, log_id) DO NOTHING "
            "RETURNING id, log_id",
            flat(part),
        )
        found.update((log_id, event_id) for event_id, log_id in sql.cursor.fetchall())
    return found


def _mark_invalid(sql: Dialect, run_id: int, logs: Sequence[ImportedLog]) -> int:
    """Record the new events' NaN and infinities per (series, step); returns how many
    marks are new. A series with no valid point yet is created empty."""
    marks: dict[str, dict[int, str]] = {}
    for log in logs:
        for name, kind in log.invalid.items():
            marks.setdefault(name, {})[log.step] = kind
    if not marks:
        return 0
    names = sorted(marks)
    sql.cursor.executemany(
        sql.sql(
            "INSERT INTO metrics (run_id, name, count, first_step, last_step) "
            "VALUES (?, ?, 0, ?, ?) ON CONFLICT (run_id, name) DO NOTHING"
        ),
        [(run_id, name, min(marks[name]), max(marks[name])) for name in names],
    )
    sql.cursor.execute(
        sql.sql(
            f"SELECT id, name FROM metrics WHERE run_id = ? AND name IN "
            f"({', '.join('?' * len(names))})"
        ),
        [run_id, *names],
    )
    ids = {name: metric_id for metric_id, name in sql.cursor.fetchall()}
    new = 0
    for name in names:
        rows = [(ids[name], step, kind) for step, kind in sorted(marks[name].items())]
        sql.cursor.execute(
            f"INSERT INTO invalid_points (metric_id, step, kind) VALUES "
            f"{sql.values(3, len(rows))} ON CONFLICT (metric_id, step) DO NOTHING "
            "RETURNING step",
            flat(rows),
        )
        added = len(sql.cursor.fetchall())
        new += added
        sql.cursor.execute(
            sql.sql(
                f"UPDATE metrics SET invalid_count = invalid_count + ?, "
                f"first_step = {sql.least}(first_step, ?), "
                f"last_step = {sql.greatest}(last_step, ?) WHERE id = ?"
            ),
            [added, min(marks[name]), max(marks[name]), ids[name]],
        )
    return new


def _store_logs(
    sql: Dialect, run_id: int, logs: Sequence[ImportedLog], now: float
) -> tuple[int, int, int]:
    """(new events, their points, new invalid marks); a ``log_id`` repeated in the chunk
    is a retry: the first one wins."""
    unique = list({log.log_id: log for log in reversed(logs)}.values())[::-1]
    ids = _new_events(sql, run_id, unique)
    new = [log for log in unique if log.log_id in ids]
    if not new:
        return 0, 0, 0
    events = [(log.step, ids[log.log_id], log.values) for log in new if log.values]
    write_points(sql, {run_id: events}, now, {ids[log.log_id]: log.time for log in new})
    invalid = _mark_invalid(sql, run_id, new)
    if invalid or any(log.values for log in new):
        # A series' last value is its last valid one, wherever its NaN fell.
        sql.cursor.execute(
            sql.sql(
                "UPDATE metrics SET last_value = (SELECT b.last_value FROM point_blocks b "
                "WHERE b.metric_id = metrics.id ORDER BY b.first_step DESC LIMIT 1) "
                "WHERE run_id = ? AND invalid_count > 0"
            ),
            [run_id],
        )
    points = sum(len(log.values) for log in new)
    sql.cursor.execute(
        sql.sql(
            "UPDATE runs SET updated_at = ?, point_count = point_count + ?, "
            f"last_step = {sql.greatest}(coalesce(last_step, -1), ?) WHERE id = ?"
        ),
        [now, points, max(log.step for log in new), run_id],
    )
    return len(new), points, invalid


def _store_alerts(sql: Dialect, run_id: int, alerts: Sequence[ImportedAlert], now: float) -> int:
    """Store alerts (the first of a repeated ``alert_id`` wins); returns how many were new."""
    unique = list({a.alert_id: a for a in reversed(alerts)}.values())[::-1]
    rows = [(run_id, a.alert_id, a.title, a.text, a.level, a.step, a.time) for a in unique]
    new = 0
    for part in chunks(rows, 7):
        sql.cursor.execute(
            "INSERT INTO alerts (run_id, alert_id, title, text, level, step, received_at) "
            f"VALUES {sql.values(7, len(part))} ON CONFLICT (run_id, alert_id) "
            "DO NOTHING RETURNING id",
            flat(part),
        )
        new += len(sql.cursor.fetchall())
    if new:
        sql.cursor.execute(
            sql.sql("UPDATE runs SET updated_at = ?, alert_count = alert_count + ? WHERE id = ?"),
            [now, new, run_id],
        )
    return new


def write_chunk(connection: Connection, chunk: RunChunk, setup: ProjectSetup) -> ChunkOutcome:
    """Store one chunk in the caller's transaction. A project created here takes
    ``setup``; one that exists keeps its visibility and members."""
    now = time.time()
    sql = Dialect(connection)
    run_id, created, kept = _open_run(connection, chunk, setup, now)
    # Trackio's files no more say how a run ended than its HTTP calls do.
    mark_end_unknown(connection, chunk.project, chunk.run)
    logs_new, points, invalid = (
        _store_logs(sql, run_id, chunk.logs, now) if chunk.logs else (0, 0, 0)
    )
    alerts_new = _store_alerts(sql, run_id, chunk.alerts, now) if chunk.alerts else 0
    return ChunkOutcome(
        run_id=run_id,
        run_created=created,
        config_kept=kept,
        logs_new=logs_new,
        logs_duplicate=len(chunk.logs) - logs_new,
        points=points,
        invalid=invalid,
        alerts_new=alerts_new,
        alerts_duplicate=len(chunk.alerts) - alerts_new,
    )
