"""The run object of the read API, including honest transport health."""

from __future__ import annotations

import time

from tuneplane.contract.limits import HEARTBEAT_INTERVAL_SECONDS, HEARTBEAT_STALE_INTERVALS
from tuneplane.contract.protocol import (
    EVENT_HEALTH_COUNTERS,
    HEALTH_COUNTERS,
    TERMINAL_STATUSES,
    TRAJECTORY_HEALTH_COUNTERS,
)
from tuneplane.store.catalog import RunRow


def transport(
    health: dict[str, float] | None,
    health_at: float | None,
    now: float,
    status: str | None = None,
) -> dict[str, object]:
    """``ok``, ``lossy`` (points, observation events or trajectories were dropped) or
    ``unknown``. No heartbeat, or none for a few intervals while the run is running, is
    unknown: it never means the run stopped. A finished run (succeeded, failed, cancelled)
    sends no more heartbeats, so it keeps the state of its last one however old. Failed
    sends that a retry made good are counted but lose nothing; neither do trajectories the
    retention caps left out."""
    if health is None or health_at is None:
        return {"state": "unknown", "reason": "no heartbeat received", "heartbeat_at": None}
    counters = {key: health.get(key) for key in (*HEALTH_COUNTERS, "queue_capacity")}
    # Event (trajectory) counters are null in heartbeats of senders older than them.
    counters.update(
        {key: health.get(key) for key in (*EVENT_HEALTH_COUNTERS, *TRAJECTORY_HEALTH_COUNTERS)}
    )
    interval = float(health.get("interval", HEARTBEAT_INTERVAL_SECONDS))
    age = now - health_at
    if status not in TERMINAL_STATUSES and age > HEARTBEAT_STALE_INTERVALS * interval:
        return {
            "state": "unknown",
            "reason": f"last heartbeat {age:.0f} s ago",
            "heartbeat_at": health_at,
            **counters,
        }
    lossy = any(
        bool(health.get(key)) for key in ("dropped", "events_dropped", "trajectories_dropped")
    )
    return {"state": "lossy" if lossy else "ok", "heartbeat_at": health_at, **counters}


def run_json(project: str, row: RunRow, now: float | None = None) -> dict[str, object]:
    return {
        "project": project,
        "run": row.name,
        "display_name": row.display_name,
        "group": row.group,
        "tags": list(row.tags),
        "note": row.note,
        "config": row.config,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "last_step": row.last_step,
        "point_count": row.point_count,
        "alert_count": row.alert_count,
        "metric_count": row.metric_count,
        "status": row.status,
        "exit_code": row.exit_code,
        "attempt": row.attempt_count or None,
        "last_observation_id": row.last_observation_id,
        "transport": transport(
            row.health, row.health_at, time.time() if now is None else now, row.status
        ),
    }
