"""The Arena write path: one ``POST /ingest`` batch, stored in one transaction.

Idempotency lives in unique keys: an event is new exactly when its ``(run, log_id)`` insert
is not a conflict, and only new events contribute points. Retries of a stored ``log_id`` or
``alert_id`` change nothing, whatever their content.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection

from tuneplane.contract.arena import ArenaAlert, ArenaBatch, ArenaLog
from tuneplane.store import arena_postgres
from tuneplane.store.database import Database
from tuneplane.store.points import write_points
from tuneplane.store.runs import KnownRun, config_conflict, ensure_run
from tuneplane.store.sql import Dialect, flat


@dataclass(frozen=True, slots=True)
class IngestOutcome:
    run: KnownRun
    logs_new: int
    logs_duplicate: int
    alerts_new: int
    alerts_duplicate: int
    points: int
    run_created: bool

    def to_json(self) -> dict[str, object]:
        return {
            "logs": {"new": self.logs_new, "duplicate": self.logs_duplicate},
            "alerts": {"new": self.alerts_new, "duplicate": self.alerts_duplicate},
            "points": self.points,
            "run_created": self.run_created,
        }


def _store_logs(sql: Dialect, run_id: int, logs: Sequence[ArenaLog], now: float) -> tuple[int, int]:
    """Store log events whose ``log_id``s are distinct; returns (new events, new points)."""
    rows = [(run_id, log.log_id, log.step, now) for log in logs]
    sql.cursor.execute(
        sql.sql(
            "INSERT INTO events (run_id, log_id, step, received_at) VALUES "
            f"{sql.values(4, len(rows))} ON CONFLICT (run_id, log_id) DO NOTHING "
            "RETURNING id, log_id"
        ),
        flat(rows),
    )
    event_ids = {log_id: event_id for event_id, log_id in sql.cursor.fetchall()}
    new_logs = [log for log in logs if log.log_id in event_ids]
    point_count = write_points(
        sql, run_id, [(log.step, event_ids[log.log_id], log.metrics) for log in new_logs], now
    )
    if new_logs:
        sql.cursor.execute(
            "UPDATE runs SET updated_at = ?, point_count = point_count + ?, "
            "last_step = max(coalesce(last_step, -1), ?) WHERE id = ?",
            [now, point_count, max(log.step for log in new_logs), run_id],
        )
    return len(new_logs), point_count


def _store_alerts(sql: Dialect, run_id: int, alerts: Sequence[ArenaAlert], now: float) -> int:
    """Store alerts whose ``alert_id``s are distinct; returns how many were new."""
    rows = [(run_id, a.alert_id, a.title, a.text, a.level, a.step, now) for a in alerts]
    sql.cursor.execute(
        sql.sql(
            "INSERT INTO alerts (run_id, alert_id, title, text, level, step, received_at) "
            f"VALUES {sql.values(7, len(rows))} ON CONFLICT (run_id, alert_id) "
            "DO NOTHING RETURNING id"
        ),
        flat(rows),
    )
    new = len(sql.cursor.fetchall())
    if new:
        sql.cursor.execute(
            sql.sql("UPDATE runs SET updated_at = ?, alert_count = alert_count + ? WHERE id = ?"),
            [now, new, run_id],
        )
    return new


def ingest_arena(
    connection: Connection, batch: ArenaBatch, known: KnownRun | None = None
) -> IngestOutcome:
    """Store a validated batch. ``known`` is the run as committed earlier, when remembered."""
    now = time.time()
    if known is None:
        run, created = ensure_run(connection, batch.project, batch.run, batch.config, now)
    else:
        if batch.config is not None and batch.config != known.config:
            raise config_conflict(batch.project, batch.run, known.config)
        run, created = known, False
    sql = Dialect(connection)

    # A log_id (or alert_id) repeated inside one batch is a retry too: the first one wins.
    unique_logs = list({log.log_id: log for log in reversed(batch.logs)}.values())[::-1]
    logs_new = point_count = 0
    if unique_logs:
        store = _store_logs if sql.is_sqlite else arena_postgres.store_logs
        logs_new, point_count = store(sql, run.id, unique_logs, now)
    unique_alerts = list({a.alert_id: a for a in reversed(batch.alerts)}.values())[::-1]
    alerts_new = _store_alerts(sql, run.id, unique_alerts, now) if unique_alerts else 0
    return IngestOutcome(
        run=run,
        logs_new=logs_new,
        logs_duplicate=len(batch.logs) - logs_new,
        alerts_new=alerts_new,
        alerts_duplicate=len(batch.alerts) - alerts_new,
        points=point_count,
        run_created=created,
    )


class ArenaIngest:
    """Stores batches, remembering committed runs so a batch skips the run lookup."""

    _MAX_REMEMBERED = 100_000

    def __init__(self, database: Database) -> None:
        self._database = database
        self._runs: dict[tuple[str, str], KnownRun] = {}

    async def ingest(self, batch: ArenaBatch) -> IngestOutcome:
        key = (batch.project, batch.run)
        outcome = await self._database.write(ingest_arena, batch, self._runs.get(key), key=key)
        # Only now is the run committed and safe to remember.
        if len(self._runs) >= self._MAX_REMEMBERED:
            self._runs.clear()
        self._runs[key] = outcome.run
        return outcome
