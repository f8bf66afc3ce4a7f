"""Runs: creation (by the first Arena batch or the run API), lifecycle status and transport
health."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Column, ColumnElement, Connection, Text, cast, func, select, update

from tuneplane.contract.access import Visibility
from tuneplane.contract.errors import Conflict
from tuneplane.contract.limits import RUN_CONFIG_MAX_BYTES
from tuneplane.contract.protocol import (
    END_UNKNOWN_STATUS,
    TERMINAL_STATUSES,
    AttemptConfig,
    StatusReport,
)
from tuneplane.contract.run_meta import RunMeta
from tuneplane.store.access import add_owner
from tuneplane.store.alert_rules import add_defaults
from tuneplane.store.credentials import IssuedToken, TokenScope, start_attempt
from tuneplane.store.dialect import upsert
from tuneplane.store.run_meta import apply_meta
from tuneplane.store.schema import attempts, projects, runs

RunConfig = dict[str, Any]


@dataclass(frozen=True, slots=True)
class KnownRun:
    """A committed run: its id and config never change, so they can be remembered."""

    id: int
    config: RunConfig | None


def config_conflict(project: str, run: str, stored: RunConfig | None) -> Conflict:
    if stored is None:
        reason = "it was created without one"
    else:
        reason = "it differs from the config the run was created with"
    return Conflict(
        f"config: run {project}/{run} already exists and {reason}; a run's config is set "
        "by its first batch and cannot change"
    )


def ensure_run(
    connection: Connection, project: str, run: str, config: RunConfig | None, now: float
) -> tuple[KnownRun, bool]:
    """The run, creating project and run if needed; refuses a changed config. A new
    project starts with the default alert rules."""
    new_project = connection.execute(
        upsert(connection, projects)
        .values(name=project, created_at=now)
        .on_conflict_do_nothing(index_elements=[projects.c.name])
        .returning(projects.c.id)
    ).scalar_one_or_none()
    if new_project is not None:
        add_defaults(connection, new_project)
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
        return KnownRun(created, config), True
    run_id, stored = connection.execute(
        select(runs.c.id, runs.c.config).where(runs.c.project_id == project_id, runs.c.name == run)
    ).one()
    if config is not None and config != stored:
        raise config_conflict(project, run, stored)
    return KnownRun(run_id, stored), False


@dataclass(frozen=True, slots=True)
class ProjectSetup:
    """How a project created by the run API starts: its visibility, and its owner (the
    account that created it; None for the admin key)."""

    visibility: Visibility
    owner: int | None
    #: The name people gave the project, when it is not its ID (kept from its creation).
    display_name: str | None = None


def create_or_resume(
    connection: Connection,
    project: str,
    run: str,
    config: RunConfig | None,
    setup: ProjectSetup | None = None,
    meta: RunMeta | None = None,
) -> bool:
    """Create the run unless it exists; True when it was created. A project created here
    takes ``setup`` (without one it is public, as the Arena route makes them). ``meta``
    (display name, group, tags, note) is stored when the run is created; resuming an
    existing run leaves its own as they are."""
    now = time.time()
    if setup is not None:
        _create_project(connection, project, setup, now)
    known, created = ensure_run(connection, project, run, config, now)
    if created and meta is not None and not meta.is_empty():
        apply_meta(connection, known.id, meta, now)
    return created


def _create_project(connection: Connection, project: str, setup: ProjectSetup, now: float) -> None:
    project_id = connection.execute(
        upsert(connection, projects)
        .values(
            name=project,
            created_at=now,
            visibility=setup.visibility,
            display_name=setup.display_name if setup.display_name != project else None,
        )
        .on_conflict_do_nothing(index_elements=[projects.c.name])
        .returning(projects.c.id)
    ).scalar_one_or_none()
    if project_id is not None:
        add_defaults(connection, project_id)
    if project_id is not None and setup.owner is not None:
        add_owner(connection, project_id, setup.owner)


def start_attempt_with_config(
    connection: Connection,
    run_id: int,
    token_days: float,
    request_key: str | None,
    config: RunConfig | None,
) -> IssuedToken:
    """:func:`~tuneplane.store.credentials.start_attempt`, recording the attempt's own
    config (the run's stays as it was created; a retried start keeps the first)."""
    issued = start_attempt(connection, run_id, token_days, request_key)
    if config is not None:
        connection.execute(
            update(attempts)
            .where(
                attempts.c.run_id == run_id,
                attempts.c.attempt == issued.attempt,
                attempts.c.config.is_(None),
            )
            .values(config=config)
        )
    return issued


def _no_config(column: Column[Any]) -> ColumnElement[bool]:
    """No config: SQL NULL, or the JSON null that a JSON column stores for None."""
    return func.coalesce(cast(column, Text), "null") == "null"


def record_attempt_config(
    connection: Connection, scope: TokenScope, declared: AttemptConfig
) -> dict[str, bool]:
    """The config the attempt's training code declared after the attempt started (a
    Trainer's arguments under ``tuneplane run``): written once per attempt, the same again
    is fine, another a :class:`Conflict` that stores nothing. It becomes the run's config
    too while the run has none. Keys added later (``declared.add``) go to
    :func:`_add_attempt_config`. Returns what was recorded: ``{"attempt": …, "run": …}``."""
    if declared.add:
        return _add_attempt_config(connection, scope, declared.config)
    config = declared.config
    # Conditional updates rather than read-then-write: two racing writers cannot both win.
    attempt_new = connection.execute(
        update(attempts)
        .where(attempts.c.id == scope.attempt_id, _no_config(attempts.c.config))
        .values(config=config)
    ).rowcount
    if not attempt_new:
        stored = connection.execute(
            select(attempts.c.config).where(attempts.c.id == scope.attempt_id)
        ).scalar_one()
        if stored != config:
            raise Conflict(
                f"config: attempt {scope.attempt} of {scope.project}/{scope.run} already "
                "recorded a different config; an attempt's config is written once"
            )
    return {"attempt": bool(attempt_new), "run": _config_while_none(connection, scope, config)}


def _config_while_none(connection: Connection, scope: TokenScope, config: RunConfig) -> bool:
    return bool(
        connection.execute(
            update(runs)
            .where(runs.c.id == scope.run_id, _no_config(runs.c.config))
            .values(config=config, updated_at=time.time())
        ).rowcount
    )


def _add_attempt_config(
    connection: Connection, scope: TokenScope, added: RunConfig
) -> dict[str, bool]:
    """Keys added to the attempt's config (``run.config.update()``), on top of what the
    attempt declared, or of the run's config when it declared nothing: a key already there
    keeps its value (another value is a :class:`Conflict` naming it, and nothing is
    stored), so what a run was configured with never changes, it only grows."""
    query = select(attempts.c.config).where(attempts.c.id == scope.attempt_id)
    if connection.dialect.name == "postgresql":
        query = query.with_for_update()  # two additions at once: one waits for the other
    declared = connection.execute(query).scalar_one()
    if declared is None:
        declared_or_run = connection.execute(
            select(runs.c.config).where(runs.c.id == scope.run_id)
        ).scalar()
    else:
        declared_or_run = declared
    base: dict[str, Any] = dict(declared_or_run or {})
    for key, value in added.items():
        if key in base and base[key] != value:
            raise Conflict(
                f"config.{key}: attempt {scope.attempt} of {scope.project}/{scope.run} already "
                f"has {orjson.dumps(base[key]).decode()[:200]}; a key of a config keeps its "
                "value (only new keys are added)"
            )
    merged = {**base, **added}
    size = len(orjson.dumps(merged))
    if size > RUN_CONFIG_MAX_BYTES:
        raise Conflict(
            f"config: with the added keys it would be {size} bytes as JSON; at most "
            f"{RUN_CONFIG_MAX_BYTES}"
        )
    new = declared is None or merged != base
    if new:
        connection.execute(
            update(attempts).where(attempts.c.id == scope.attempt_id).values(config=merged)
        )
    return {"attempt": new, "run": _config_while_none(connection, scope, merged)}


def differing_attempt_configs(
    connection: Connection, run_id: int, config: RunConfig | None
) -> list[dict[str, object]]:
    """The attempts of a run that recorded a config other than the run's, oldest first."""
    rows = connection.execute(
        select(attempts.c.attempt, attempts.c.config)
        .where(attempts.c.run_id == run_id, attempts.c.config.is_not(None))
        .order_by(attempts.c.attempt)
    ).all()
    return [{"attempt": row.attempt, "config": row.config} for row in rows if row.config != config]


def set_status(connection: Connection, scope: TokenScope, report: StatusReport) -> None:
    """Record an attempt's status. A terminal status is final for its attempt; the run shows
    the status of its latest attempt, so a late report from an older one changes nothing."""
    now = time.time()
    current = connection.execute(
        select(attempts.c.status, attempts.c.exit_code, attempts.c.started_at).where(
            attempts.c.id == scope.attempt_id
        )
    ).one()
    if current.status in TERMINAL_STATUSES:
        if (current.status, current.exit_code) == (report.status, report.exit_code):
            return
        raise Conflict(
            f"status: attempt {scope.attempt} already ended as {current.status}"
            f" (exit code {current.exit_code}); a finished attempt cannot change"
        )
    ended = ended_at(report, current.started_at, now)
    connection.execute(
        update(attempts)
        .where(attempts.c.id == scope.attempt_id)
        .values(status=report.status, exit_code=report.exit_code, ended_at=ended)
    )
    connection.execute(
        update(runs)
        .where(runs.c.id == scope.run_id, runs.c.attempt_count == scope.attempt)
        .values(status=report.status, exit_code=report.exit_code, updated_at=now)
    )


def mark_end_unknown(connection: Connection, project: str, run: str) -> None:
    """Say the run's end is unknown (``END_UNKNOWN_STATUS``) while it has no status: one an
    SDK attempt reported is the run's own and stays."""
    project_id = select(projects.c.id).where(projects.c.name == project).scalar_subquery()
    connection.execute(
        update(runs)
        .where(runs.c.project_id == project_id, runs.c.name == run, runs.c.status.is_(None))
        .values(status=END_UNKNOWN_STATUS)
    )


def ended_at(report: StatusReport, started_at: float, now: float) -> float | None:
    """When the attempt ended: the time its final status says (one that arrived late),
    within the attempt's start and now, else now; None for ``running``."""
    if report.status not in TERMINAL_STATUSES:
        return None
    if report.time is None:
        return now
    return min(now, max(started_at, report.time))


def record_heartbeat(connection: Connection, scope: TokenScope, health: dict[str, float]) -> None:
    connection.execute(
        update(runs)
        .where(runs.c.id == scope.run_id)
        .values(health={**health, "attempt": scope.attempt}, health_at=time.time())
    )
