"""Alert rules as stored: a project's rules (and its runs'), created, changed and deleted
through the API, each change bumping the project's version so that every server process
reloads them (docs/alerts.md). New projects start with ``DEFAULT_RULES``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, delete, func, insert, select, update

from tuneplane.contract.alert_rules import (
    DEFAULT_RULES,
    RULES_PER_PROJECT_MAX,
    Rule,
    RuleSpec,
    merge_rule,
    parse_rule,
)
from tuneplane.contract.errors import InvalidInput, MalformedRequest, NotFound, Violation
from tuneplane.store.dialect import upsert
from tuneplane.store.schema import (
    alert_episodes,
    alert_rule_versions,
    alert_rules,
    alert_watches,
    projects,
    runs,
)

log = logging.getLogger("tuneplane.store")


def _bump(connection: Connection, project_id: int) -> None:
    connection.execute(
        upsert(connection, alert_rule_versions)
        .values(project_id=project_id, version=1)
        .on_conflict_do_update(
            index_elements=[alert_rule_versions.c.project_id],
            set_={"version": alert_rule_versions.c.version + 1},
        )
    )


def _insert(connection: Connection, project_id: int, run_id: int | None, spec: RuleSpec) -> int:
    now = time.time()
    created = connection.execute(
        insert(alert_rules)
        .values(
            project_id=project_id, run_id=run_id, kind=spec.kind, enabled=spec.enabled,
            spec=spec.to_json(), created_at=now, updated_at=now,
        )
        .returning(alert_rules.c.id)
    ).scalar_one()  # fmt: skip
    return int(created)


def add_defaults(connection: Connection, project_id: int) -> None:
    """Give a new project the default rules (a NaN or infinite loss, a stale heartbeat)."""
    for spec in DEFAULT_RULES:
        _insert(connection, project_id, None, spec)
    _bump(connection, project_id)


def project_id_of(connection: Connection, project: str) -> int:
    found = connection.execute(
        select(projects.c.id).where(projects.c.name == project)
    ).scalar_one_or_none()
    if found is None:
        raise NotFound(f"project: no project named {project!r}")
    return int(found)


def _run_id(connection: Connection, project_id: int, run: str, field: str) -> int:
    found = connection.execute(
        select(runs.c.id).where(runs.c.project_id == project_id, runs.c.name == run)
    ).scalar_one_or_none()
    if found is None:
        raise InvalidInput((Violation(field, f"the project has no run named {run!r}"),))
    return int(found)


def _checked_runs(connection: Connection, project_id: int, spec: RuleSpec) -> int | None:
    """The rule's run id (None: every run), after checking the runs it names exist."""
    if spec.baseline is not None:
        _run_id(connection, project_id, spec.baseline.run, "baseline.run")
    return None if spec.run is None else _run_id(connection, project_id, spec.run, "run")


def _json(row: Any) -> dict[str, Any]:
    return {"id": row.id, **row.spec, "enabled": bool(row.enabled),
            "created_at": row.created_at, "updated_at": row.updated_at}  # fmt: skip


def list_rules(connection: Connection, project: str) -> list[dict[str, Any]]:
    project_id = project_id_of(connection, project)
    query = select(alert_rules).where(alert_rules.c.project_id == project_id)
    return [_json(row) for row in connection.execute(query.order_by(alert_rules.c.id))]


def _row(connection: Connection, project_id: int, rule_id: int) -> Any:
    row = connection.execute(
        select(alert_rules).where(
            alert_rules.c.project_id == project_id, alert_rules.c.id == rule_id
        )
    ).first()
    if row is None:
        raise NotFound(f"rule: the project has no alert rule {rule_id}")
    return row


def get_rule(connection: Connection, project: str, rule_id: int) -> dict[str, Any]:
    return _json(_row(connection, project_id_of(connection, project), rule_id))


def create_rule(connection: Connection, project: str, body: object) -> dict[str, Any]:
    """A new rule from its JSON (422 naming each broken field)."""
    spec = parse_rule(body)
    project_id = project_id_of(connection, project)
    run_id = _checked_runs(connection, project_id, spec)
    held = connection.execute(
        select(func.count()).select_from(alert_rules).where(alert_rules.c.project_id == project_id)
    ).scalar_one()
    if held >= RULES_PER_PROJECT_MAX:
        raise InvalidInput(
            (Violation("rules", f"a project holds at most {RULES_PER_PROJECT_MAX} alert rules"),)
        )
    rule_id = _insert(connection, project_id, run_id, spec)
    _bump(connection, project_id)
    return _json(_row(connection, project_id, rule_id))


def update_rule(connection: Connection, project: str, rule_id: int, body: object) -> dict[str, Any]:
    """Change a rule's fields (its kind stays); a run's open episodes stay as they are."""
    project_id = project_id_of(connection, project)
    row = _row(connection, project_id, rule_id)
    spec = merge_rule(row.spec, body)
    run_id = _checked_runs(connection, project_id, spec)
    connection.execute(
        update(alert_rules)
        .where(alert_rules.c.id == rule_id)
        .values(run_id=run_id, enabled=spec.enabled, spec=spec.to_json(), updated_at=time.time())
    )
    _bump(connection, project_id)
    return _json(_row(connection, project_id, rule_id))


def delete_rule(connection: Connection, project: str, rule_id: int) -> None:
    """Delete a rule with its watches and episodes; the alerts it raised stay."""
    project_id = project_id_of(connection, project)
    _row(connection, project_id, rule_id)
    connection.execute(delete(alert_watches).where(alert_watches.c.rule_id == rule_id))
    connection.execute(delete(alert_episodes).where(alert_episodes.c.rule_id == rule_id))
    connection.execute(delete(alert_rules).where(alert_rules.c.id == rule_id))
    _bump(connection, project_id)


@dataclass(frozen=True, slots=True)
class ProjectRules:
    """A project's enabled rules, as a server process holds them."""

    project_id: int
    version: int
    rules: tuple[Rule, ...]


def load_rules(connection: Connection, project: str) -> ProjectRules | None:
    """The enabled rules of a project (None: no such project yet)."""
    found = connection.execute(
        select(projects.c.id, alert_rule_versions.c.version)
        .outerjoin(alert_rule_versions, alert_rule_versions.c.project_id == projects.c.id)
        .where(projects.c.name == project)
    ).first()
    if found is None:
        return None
    rows = connection.execute(
        select(alert_rules.c.id, alert_rules.c.run_id, alert_rules.c.spec)
        .where(alert_rules.c.project_id == found.id, alert_rules.c.enabled.is_(True))
        .order_by(alert_rules.c.id)
    )
    rules = tuple(_parsed(rows))
    return ProjectRules(int(found.id), int(found.version or 0), rules)


def rule_versions(connection: Connection) -> dict[int, int]:
    """Every project's rule version (projects never given rules are absent)."""
    query = select(alert_rule_versions.c.project_id, alert_rule_versions.c.version)
    return {int(project): int(version) for project, version in connection.execute(query)}


@dataclass(frozen=True, slots=True)
class TimedRule:
    project_id: int
    rule: Rule
    created_at: float


def timed_rules(connection: Connection) -> list[TimedRule]:
    """Every enabled ``stall`` and ``heartbeat`` rule, of every project."""
    query = select(
        alert_rules.c.project_id,
        alert_rules.c.id,
        alert_rules.c.run_id,
        alert_rules.c.spec,
        alert_rules.c.updated_at,
    ).where(alert_rules.c.enabled.is_(True), alert_rules.c.kind.in_(("stall", "heartbeat")))
    rows = connection.execute(query.order_by(alert_rules.c.id)).all()
    times = {row.id: (int(row.project_id), row.updated_at) for row in rows}
    return [TimedRule(times[rule.id][0], rule, times[rule.id][1]) for rule in _parsed(rows)]


def _parsed(rows: Any) -> list[Rule]:
    """The rules of stored rows; a row that is no rule any more (written by hand, say) is
    skipped with a warning rather than stopping every other rule."""
    found = []
    for row in rows:
        try:
            found.append(Rule(int(row.id), parse_rule(row.spec), row.run_id))
        except (InvalidInput, MalformedRequest) as exc:
            log.warning("tuneplane: alert rule %d cannot be read, skipped: %s", row.id, exc)
    return found


def run_id_of(connection: Connection, project_id: int, run: str) -> int | None:
    found = connection.execute(
        select(runs.c.id).where(runs.c.project_id == project_id, runs.c.name == run)
    ).scalar_one_or_none()
    return None if found is None else int(found)
