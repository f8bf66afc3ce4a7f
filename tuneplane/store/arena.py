"""The Arena write path: one ``POST /ingest`` batch, stored in one transaction.

Idempotency lives in unique keys: an event is new exactly when its ``(run, log_id)`` insert
is not a conflict, and only new events contribute points. Retries of a stored ``log_id`` or
``alert_id`` change nothing, whatever their content.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import Connection, func, select, update

from tuneplane.contract.arena import ArenaBatch, Config
from tuneplane.contract.errors import Conflict
from tuneplane.store.dialect import greatest, upsert
from tuneplane.store.points import NewPoint, write_points
from tuneplane.store.schema import alerts, events, projects, runs


@dataclass(frozen=True, slots=True)
class IngestOutcome:
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


def ensure_run(
    connection: Connection, project: str, run: str, config: Config | None, now: float
) -> tuple[int, bool]:
    """The run's id, creating project and run if needed; refuses a changed config."""
    connection.execute(
        upsert(connection, projects)
        .values(name=project, created_at=now)
        .on_conflict_do_nothing(index_elements=[projects.c.name])
    )
    project_id = connection.execute(
        select(projects.c.id).where(projects.c.name == project)
    ).scalar_one()
    created = connection.execute(
        upsert(connection, runs)
        .values(project_id=project_id, name=run, config=config, created_at=now, updated_at=now)
        .on_conflict_do_nothing(index_elements=[runs.c.project_id, runs.c.name])
        .returning(runs.c.id)
    ).scalar_one_or_none()
    if created is not None:
        return created, True
    run_id, stored = connection.execute(
        select(runs.c.id, runs.c.config).where(runs.c.project_id == project_id, runs.c.name == run)
    ).one()
    if config is not None and config != stored:
        if stored is None:
            reason = "it was created without one"
        else:
            reason = "it differs from the config the run was created with"
        raise Conflict(
            f"config: run {project}/{run} already exists and {reason}; a run's config is set "
            "by its first batch and cannot change"
        )
    return run_id, False


def ingest_arena(connection: Connection, batch: ArenaBatch) -> IngestOutcome:
    now = time.time()
    run_id, created = ensure_run(connection, batch.project, batch.run, batch.config, now)

    # A log_id repeated inside one batch is a retry too: the first occurrence wins.
    unique_logs = list({log.log_id: log for log in reversed(batch.logs)}.values())[::-1]
    event_ids: dict[str, int] = {}
    if unique_logs:
        inserted = connection.execute(
            upsert(connection, events)
            .on_conflict_do_nothing(index_elements=[events.c.run_id, events.c.log_id])
            .returning(events.c.id, events.c.log_id),
            [
                {"run_id": run_id, "log_id": log.log_id, "step": log.step, "received_at": now}
                for log in unique_logs
            ],
        )
        event_ids = {log_id: event_id for event_id, log_id in inserted}
    new_points = [
        NewPoint(name, log.step, event_ids[log.log_id], value, now)
        for log in unique_logs
        if log.log_id in event_ids
        for name, value in log.metrics.items()
    ]
    write_points(connection, run_id, new_points)

    unique_alerts = list({a.alert_id: a for a in reversed(batch.alerts)}.values())[::-1]
    alerts_new = 0
    if unique_alerts:
        alerts_new = len(
            connection.execute(
                upsert(connection, alerts)
                .on_conflict_do_nothing(index_elements=[alerts.c.run_id, alerts.c.alert_id])
                .returning(alerts.c.id),
                [
                    {
                        "run_id": run_id,
                        "alert_id": a.alert_id,
                        "title": a.title,
                        "text": a.text,
                        "level": a.level,
                        "step": a.step,
                        "received_at": now,
                    }
                    for a in unique_alerts
                ],
            ).all()
        )

    new_steps = [log.step for log in unique_logs if log.log_id in event_ids]
    if new_points or alerts_new:
        changes: dict[str, object] = {
            "updated_at": now,
            "point_count": runs.c.point_count + len(new_points),
            "alert_count": runs.c.alert_count + alerts_new,
        }
        if new_steps:
            changes["last_step"] = greatest(
                connection, func.coalesce(runs.c.last_step, -1), max(new_steps)
            )
        connection.execute(update(runs).where(runs.c.id == run_id).values(changes))

    return IngestOutcome(
        logs_new=len(event_ids),
        logs_duplicate=len(batch.logs) - len(event_ids),
        alerts_new=alerts_new,
        alerts_duplicate=len(batch.alerts) - alerts_new,
        points=len(new_points),
        run_created=created,
    )
