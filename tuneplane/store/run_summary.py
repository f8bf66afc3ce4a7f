"""A run's summary (``run.summary[...]``): the fields of the ``summary`` events its
attempts sent when they ended, later values over earlier ones; the latest attempt's last
word on each key wins."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select

from tuneplane.contract.observations import SUMMARY_EVENT
from tuneplane.store.schema import observations


def run_summary(connection: Connection, run_id: int) -> dict[str, Any]:
    rows = connection.execute(
        select(observations.c.body)
        .where(
            observations.c.run_id == run_id,
            observations.c.name == SUMMARY_EVENT,
            observations.c.type == "event",
        )
        .order_by(observations.c.attempt, observations.c.id)
    ).scalars()
    summary: dict[str, Any] = {}
    for body in rows:
        fields = body.get("fields") if isinstance(body, dict) else None
        if isinstance(fields, dict):
            summary.update(fields)
    return summary
