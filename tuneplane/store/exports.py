"""A run's registered exports: its ``export`` events (``register_export`` in the SDK), in
the order they arrived."""

from __future__ import annotations

from typing import Any, Final

from sqlalchemy import Connection, select

from tuneplane.contract.observations import EXPORT_EVENT
from tuneplane.store.schema import observations

#: The fields of an export event a read answers (others are not the contract's).
_FIELDS: Final = ("uri", "format", "digest", "digest_method", "files", "bytes")
#: Exports one read answers: the earliest ones (a run that registers thousands is told so).
EXPORTS_MAX: Final = 1_000


def list_exports(connection: Connection, run_id: int) -> list[dict[str, Any]]:
    rows = connection.execute(
        select(
            observations.c.event_id,
            observations.c.attempt,
            observations.c.step,
            observations.c.body,
            observations.c.received_at,
        )
        .where(
            observations.c.run_id == run_id,
            observations.c.type == "event",
            observations.c.name == EXPORT_EVENT,
        )
        .order_by(observations.c.id)
        .limit(EXPORTS_MAX)
    )
    found = []
    for row in rows:
        fields = row.body.get("fields") if isinstance(row.body, dict) else None
        fields = fields if isinstance(fields, dict) else {}
        found.append(
            {
                "export_id": row.event_id,
                "attempt": row.attempt,
                "step": row.step,
                **{name: fields.get(name) for name in _FIELDS},
                "received_at": row.received_at,
            }
        )
    return found


def find_export(connection: Connection, run_id: int, export_id: str) -> dict[str, Any] | None:
    """One export of the run by its ID (its event's), or None."""
    for export in list_exports(connection, run_id):
        if export["export_id"] == export_id:
            return export
    return None
