"""The Arena write path: ``POST /ingest`` batches, each stored in one transaction (a writer
may store several together, as if one after another).

Idempotency lives in unique keys: an event is new exactly when its ``(run, log_id)`` insert
is not a conflict, and only new events contribute points. Retries of a stored ``log_id`` or
``alert_id`` change nothing, whatever their content.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection

from tuneplane.contract.arena import ArenaAlert, ArenaBatch, ArenaLog
from tuneplane.store import arena_postgres
from tuneplane.store.database import Database
from tuneplane.store.points import NewEvent, write_points
from tuneplane.store.runs import KnownRun, config_conflict, ensure_run
from tuneplane.store.sql import Dialect, chunks, flat


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


def _store_logs(
    sql: Dialect, logs: Sequence[tuple[int, Sequence[ArenaLog]]], now: float
) -> list[tuple[int, int]]:
    """Store the log events of several batches, given as (run id, events with distinct
    ``log_id``s, none repeated by another batch of the run); returns (new events, new
    points) per batch."""
    rows = [(run_id, log.log_id, log.step, now) for run_id, found in logs for log in found]
    event_ids: dict[tuple[int, str], int] = {}
    for part in chunks(rows, 4):
        sql.cursor.execute(
            "INSERT INTO events (run_id, log_id, step, received_at) VALUES "
            f"{sql.values(4, len(part))} ON CONFLICT (run_id, log_id) DO NOTHING "
            "RETURNING id, run_id, log_id",
            flat(part),
        )
        event_ids.update(
            ((run_id, log_id), event_id) for event_id, run_id, log_id in sql.cursor.fetchall()
        )
    new_events: dict[int, list[NewEvent]] = {}
    stored = []
    for run_id, found in logs:
        new = [log for log in found if (run_id, log.log_id) in event_ids]
        new_events.setdefault(run_id, []).extend(
            (log.step, event_ids[run_id, log.log_id], log.metrics) for log in new
        )
        stored.append((len(new), sum(len(log.metrics) for log in new)))
    write_points(sql, new_events, now)
    sql.cursor.executemany(
        "UPDATE runs SET updated_at = ?, point_count = point_count + ?, "
        "last_step = max(coalesce(last_step, -1), ?) WHERE id = ?",
        [
            (now, sum(len(values) for _, _, values in events), max(e[0] for e in events), run_id)
            for run_id, events in new_events.items()
            if events
        ],
    )
    return stored


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


def write_alerts(connection: Connection, run_id: int, alerts: Sequence[ArenaAlert]) -> int:
    """Alerts the SDK sent (``POST /api/v1/ingest/alerts``), stored as the Arena's are: an
    ``alert_id`` already stored is a duplicate. Returns how many were new."""
    return _store_alerts(Dialect(connection), run_id, alerts, time.time())


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
    store = _store_logs if sql.is_sqlite else arena_postgres.store_logs
    stored = store(sql, logs, now)

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
        if known.config is None:
            # A run without a config may have been given one since (an attempt's config,
            # POST /api/v1/ingest/config): the stored one decides.
            return ensure_run(connection, batch.project, batch.run, batch.config, now)
        raise config_conflict(batch.project, batch.run, known.config)
    return known, False


def _integrity(exc: BaseException) -> bool:
    """A constraint failure, from SQLAlchemy or from either driver's cursor (the hot path
    writes through the driver): sqlite3's and psycopg's IntegrityError alike."""
    return any(kind.__name__ == "IntegrityError" for kind in type(exc).__mro__)


class ArenaIngest:
    """Stores batches, remembering committed runs so a batch skips the run lookup.
    ``on_stored(batch, run_id)`` is told of each batch that stored points, once committed
    (the alert rules judge them)."""

    _MAX_REMEMBERED = 100_000

    def __init__(
        self, database: Database, on_stored: Callable[[ArenaBatch, int], None] | None = None
    ) -> None:
        self._database = database
        self._runs: dict[tuple[str, str], KnownRun] = {}
        self._on_stored = on_stored

    async def ingest(self, batch: ArenaBatch) -> IngestOutcome:
        key = (batch.project, batch.run)
        known = self._runs.get(key)
        try:
            outcome = await self._database.write_batched(ingest_arena, (batch, known), key=key)
        except Exception as exc:
            if known is None or not _integrity(exc):
                raise
            # The remembered run was deleted (by another server process): look it up anew.
            self._runs.pop(key, None)
            fresh: ArenaWrite = (batch, None)
            outcome = await self._database.write_batched(ingest_arena, fresh, key=key)
        # Only now is the run committed and safe to remember.
        if len(self._runs) >= self._MAX_REMEMBERED:
            self._runs.clear()
        self._runs[key] = outcome.run
        if outcome.points and self._on_stored is not None:
            self._on_stored(batch, outcome.run.id)
        return outcome

    def forget(self, project: str, run: str | None = None) -> None:
        """A deleted run (or every run of a deleted project): the next batch naming it
        creates the run anew."""
        for key in [k for k in self._runs if k[0] == project and run in (None, k[1])]:
            self._runs.pop(key, None)
