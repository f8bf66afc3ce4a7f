"""The Arena write path: ``POST /ingest`` batches, each stored in one transaction (a writer
may store several together, as if one after another).

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


#: A batch to store, with its run as committed earlier when that is remembered.
ArenaWrite = tuple[ArenaBatch, KnownRun | None]


def ingest_arena(connection: Connection, writes: list[ArenaWrite]) -> list[IngestOutcome]:
    """Store validated batches, in order, as if one after another."""
    now = time.time()
    sql = Dialect(connection)
    runs = [_run_of(connection, batch, known, now) for batch, known in writes]

    # A log_id (or alert_id) repeated inside one batch, or in an earlier batch of the same
    # run written here, is a retry too: the first one wins.
    held: dict[int, set[str]] = {}
    logs = []
    for (batch, _), (run, _) in zip(writes, runs, strict=True):
        earlier = held.setdefault(run.id, set())
        unique = list({log.log_id: log for log in reversed(batch.logs)}.values())[::-1]
        unique = [log for log in unique if log.log_id not in earlier]
        earlier.update(log.log_id for log in unique)
        logs.append((run.id, unique))
    if sql.is_sqlite:
        stored = [
            _store_logs(sql, run_id, found, now) if found else (0, 0) for run_id, found in logs
        ]
    else:
        stored = arena_postgres.store_logs(sql, logs, now)

    outcomes = []
    for (batch, _), (run, created), (logs_new, points) in zip(writes, runs, stored, strict=True):
        unique_alerts = list({a.alert_id: a for a in reversed(batch.alerts)}.values())[::-1]
        alerts_new = _store_alerts(sql, run.id, unique_alerts, now) if unique_alerts else 0
        outcomes.append(
            IngestOutcome(
                run=run,
                logs_new=logs_new,
                logs_duplicate=len(batch.logs) - logs_new,
                alerts_new=alerts_new,
                alerts_duplicate=len(batch.alerts) - alerts_new,
                points=points,
                run_created=created,
            )
        )
    return outcomes


def _run_of(
    connection: Connection, batch: ArenaBatch, known: KnownRun | None, now: float
) -> tuple[KnownRun, bool]:
    if known is None:
        return ensure_run(connection, batch.project, batch.run, batch.config, now)
    if batch.config is not None and batch.config != known.config:
        raise config_conflict(batch.project, batch.run, known.config)
    return known, False


class ArenaIngest:
    """Stores batches, remembering committed runs so a batch skips the run lookup."""

    _MAX_REMEMBERED = 100_000

    def __init__(self, database: Database) -> None:
        self._database = database
        self._runs: dict[tuple[str, str], KnownRun] = {}

    async def ingest(self, batch: ArenaBatch) -> IngestOutcome:
        key = (batch.project, batch.run)
        outcome = await self._database.write_batched(
            ingest_arena, (batch, self._runs.get(key)), key=key
        )
        # Only now is the run committed and safe to remember.
        if len(self._runs) >= self._MAX_REMEMBERED:
            self._runs.clear()
        self._runs[key] = outcome.run
        return outcome
