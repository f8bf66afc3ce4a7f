"""A run's display name, group, tags and note: set when the run is created, changed by
``PATCH …/runs/{run}``. The run's config is not among them: it never changes."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, delete, insert, select, update

from tuneplane.contract.run_meta import RunMeta
from tuneplane.store.schema import run_tags, runs


def _blank(value: str) -> str | None:
    return value or None


def apply_meta(connection: Connection, run_id: int, meta: RunMeta, now: float) -> None:
    """Change the fields ``meta`` names (an empty string or list clears one)."""
    values: dict[str, object] = {}
    if meta.display_name is not None:
        values["display_name"] = _blank(meta.display_name.strip())
    if meta.group is not None:
        values["run_group"] = _blank(meta.group)
    if meta.note is not None:
        values["note"] = _blank(meta.note)
    if values or meta.tags is not None:
        connection.execute(update(runs).where(runs.c.id == run_id).values(updated_at=now, **values))
    if meta.tags is not None:
        connection.execute(delete(run_tags).where(run_tags.c.run_id == run_id))
        if meta.tags:
            connection.execute(
                insert(run_tags), [{"run_id": run_id, "tag": tag} for tag in meta.tags]
            )


def tags_of(connection: Connection, run_ids: Sequence[int]) -> dict[int, list[str]]:
    """The tags of each run, sorted."""
    found: dict[int, list[str]] = {run_id: [] for run_id in run_ids}
    if not run_ids:
        return found
    rows = connection.execute(
        select(run_tags.c.run_id, run_tags.c.tag)
        .where(run_tags.c.run_id.in_(list(run_ids)))
        .order_by(run_tags.c.run_id, run_tags.c.tag)
    )
    for run_id, tag in rows:
        found[run_id].append(tag)
    return found
