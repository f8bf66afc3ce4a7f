"""Alert episodes as stored: a rule's watch of a run's subject, the episode open on it, the
alert that opened it and the ``info`` alert that resolved it, and the webhook deliveries
both queue. An episode opens and resolves once: the watch row is locked while it changes,
so two server processes that judge the same point agree.

The alerts go into the run's ``alerts`` (the reports page and ``GET …/alerts`` show them):
``rule-<rule>-<episode>`` when an episode opens, ``rule-<rule>-<episode>-resolved`` (level
``info``) when it resolves; the episode records ``resolved_at``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import Connection, and_, delete, insert, select, update

from tuneplane.contract.alert_rules import Transition, parse_rule
from tuneplane.contract.arena import ArenaAlert
from tuneplane.contract.protocol import END_UNKNOWN_STATUS, TERMINAL_STATUSES, StatusReport
from tuneplane.store import webhooks
from tuneplane.store.arena import write_alerts
from tuneplane.store.credentials import TokenScope
from tuneplane.store.dialect import upsert
from tuneplane.store.runs import set_status
from tuneplane.store.schema import (
    alert_episodes,
    alert_rules,
    alert_watches,
    attempts,
    metrics,
    point_blocks,
    projects,
    runs,
)
from tuneplane.store.schema import alerts as arena_alerts

#: How the alert that resolves an episode is named after the one that opened it.
RESOLVED_SUFFIX: Final = "-resolved"


def open_watches(connection: Connection, run_id: int) -> set[tuple[int, str]]:
    """(rule, subject) of every episode open on the run."""
    query = select(alert_watches.c.rule_id, alert_watches.c.subject).where(
        alert_watches.c.run_id == run_id, alert_watches.c.episode_id.is_not(None)
    )
    return {(int(rule), subject) for rule, subject in connection.execute(query)}


def open_watches_of(connection: Connection, rule_ids: Sequence[int]) -> set[tuple[int, int, str]]:
    """(rule, run, subject) of every episode open for these rules."""
    if not rule_ids:
        return set()
    query = select(alert_watches.c.rule_id, alert_watches.c.run_id, alert_watches.c.subject).where(
        alert_watches.c.rule_id.in_(list(rule_ids)), alert_watches.c.episode_id.is_not(None)
    )
    return {(int(rule), int(run), subject) for rule, run, subject in connection.execute(query)}


def _lock_watch(connection: Connection, rule_id: int, run_id: int, subject: str) -> int | None:
    """The watch's open episode (None: none), its row locked until commit on PostgreSQL
    (SQLite has a single writer)."""
    connection.execute(
        upsert(connection, alert_watches)
        .values(rule_id=rule_id, run_id=run_id, subject=subject, changed_at=time.time())
        .on_conflict_do_nothing()
    )
    query = select(alert_watches.c.episode_id).where(
        alert_watches.c.rule_id == rule_id,
        alert_watches.c.run_id == run_id,
        alert_watches.c.subject == subject,
    )
    if connection.dialect.name != "sqlite":
        query = query.with_for_update()
    found = connection.execute(query).scalar_one()
    return None if found is None else int(found)


def _set_watch(connection: Connection, t: Transition, run_id: int, episode: int | None) -> None:
    connection.execute(
        update(alert_watches)
        .where(
            alert_watches.c.rule_id == t.rule_id,
            alert_watches.c.run_id == run_id,
            alert_watches.c.subject == t.subject,
        )
        .values(episode_id=episode, changed_at=time.time())
    )


def _open(connection: Connection, t: Transition, run_id: int, now: float) -> tuple[str, int]:
    created = connection.execute(
        insert(alert_episodes)
        .values(rule_id=t.rule_id, run_id=run_id, subject=t.subject, alert_id="", title=t.title,
                opened_at=now, opened_step=t.step)
        .returning(alert_episodes.c.id)
    ).scalar_one()  # fmt: skip
    episode = int(created)
    alert_id = f"rule-{t.rule_id}-{episode}"
    connection.execute(
        update(alert_episodes).where(alert_episodes.c.id == episode).values(alert_id=alert_id)
    )
    _set_watch(connection, t, run_id, episode)
    return alert_id, episode


def _resolve(connection: Connection, t: Transition, run_id: int, episode: int, now: float) -> str:
    connection.execute(
        update(alert_episodes)
        .where(alert_episodes.c.id == episode)
        .values(resolved_at=now, resolved_step=t.step)
    )
    _set_watch(connection, t, run_id, None)
    return f"rule-{t.rule_id}-{episode}{RESOLVED_SUFFIX}"


def episode_alert(alert_id: str) -> str:
    """The alert that opened an episode, from its own alert ID or its resolving one's."""
    return alert_id.removesuffix(RESOLVED_SUFFIX)


@dataclass(frozen=True, slots=True)
class Fired:
    """An alert a transition stored."""

    alert_id: str
    opens: bool
    episode: int


def _context(connection: Connection, run_id: int, rule_ids: set[int]) -> tuple[Any, dict[int, Any]]:
    place = connection.execute(
        select(runs.c.name.label("run"), projects.c.name.label("project"), projects.c.id)
        .join(projects, projects.c.id == runs.c.project_id)
        .where(runs.c.id == run_id)
    ).one()
    rules = {
        int(row.id): parse_rule(row.spec)
        for row in connection.execute(
            select(alert_rules.c.id, alert_rules.c.spec).where(alert_rules.c.id.in_(rule_ids))
        )
    }
    return place, rules


def apply_transitions(
    connection: Connection, run_id: int, transitions: Sequence[Transition]
) -> list[Fired]:
    """Open and resolve episodes as judged, in order; a transition its watch already shows
    (another process stored it first) or of a rule deleted since changes nothing. Each
    stored alert is queued for the project's webhooks."""
    now = time.time()
    place, rules = _context(connection, run_id, {t.rule_id for t in transitions})
    fired: list[Fired] = []
    for t in transitions:
        spec = rules.get(t.rule_id)
        if spec is None:
            continue
        episode = _lock_watch(connection, t.rule_id, run_id, t.subject)
        if t.opens == (episode is not None):
            continue
        if t.opens:
            alert_id, episode = _open(connection, t, run_id, now)
            level = spec.level
        else:
            assert episode is not None
            alert_id, level = _resolve(connection, t, run_id, episode, now), "info"
        alert = ArenaAlert(alert_id, t.title[:200], t.text[:4000], level, t.step)
        write_alerts(connection, run_id, [alert])
        payload = {
            "event": "alert.opened" if t.opens else "alert.resolved",
            "project": place.project,
            "run": place.run,
            "alert": {"alert_id": alert_id, "title": alert.title, "text": alert.text,
                      "level": level, "step": t.step},
            "rule": {"id": t.rule_id, "name": spec.name, "kind": spec.kind},
            "subject": t.subject,
            "episode": episode,
            "at": now,
        }  # fmt: skip
        webhooks.enqueue(connection, int(place.id), run_id, payload)
        fired.append(Fired(alert_id, t.opens, episode))
    return fired


def status_reported(connection: Connection, scope: TokenScope, report: StatusReport) -> list[Fired]:
    """Record an attempt's status (:func:`~tuneplane.store.runs.set_status`). A final
    status that arrived late says when the attempt ended (``report.time``: after an outage,
    or replayed by ``tuneplane sync``), and the run's heartbeat was only quiet because it
    had ended: a stale-heartbeat episode opened after that is withdrawn (it was false), one
    opened before is resolved at the end. So is a stall: the points such an attempt delivers
    late keep the time they were reported at, after which its series were quiet only
    because it had ended."""
    set_status(connection, scope, report)
    if report.time is None or report.status not in TERMINAL_STATUSES:
        return []
    latest = connection.execute(
        select(runs.c.attempt_count).where(runs.c.id == scope.run_id)
    ).scalar_one()
    if latest != scope.attempt:
        return []  # an older attempt's status does not end the run
    ended = connection.execute(
        select(attempts.c.ended_at).where(attempts.c.id == scope.attempt_id)
    ).scalar_one()
    return _end_quiet_episodes(connection, scope.run_id, float(ended))


def _end_quiet_episodes(connection: Connection, run_id: int, ended: float) -> list[Fired]:
    watched = connection.execute(
        select(alert_watches.c.rule_id, alert_watches.c.subject, alert_rules.c.kind)
        .join(alert_rules, alert_rules.c.id == alert_watches.c.rule_id)
        .where(
            alert_watches.c.run_id == run_id,
            alert_watches.c.episode_id.is_not(None),
            alert_rules.c.kind.in_(("heartbeat", "stall")),
        )
    ).all()
    fired: list[Fired] = []
    for rule_id, subject, kind in watched:
        episode = _lock_watch(connection, rule_id, run_id, subject)
        if episode is None:
            continue
        row = connection.execute(
            select(alert_episodes.c.alert_id, alert_episodes.c.opened_at).where(
                alert_episodes.c.id == episode
            )
        ).one()
        t = Transition(rule_id, subject, False, "", "")
        if row.opened_at >= ended:
            connection.execute(
                delete(arena_alerts).where(
                    arena_alerts.c.run_id == run_id, arena_alerts.c.alert_id == row.alert_id
                )
            )
            connection.execute(delete(alert_episodes).where(alert_episodes.c.id == episode))
            _set_watch(connection, t, run_id, None)
            continue
        alert_id = _resolve(connection, t, run_id, episode, ended)
        text = "the run had ended (its final status arrived late, with the time it ended)"
        title = "resolved: heartbeat" if kind == "heartbeat" else f"resolved: {subject} stalled"
        write_alerts(connection, run_id, [ArenaAlert(alert_id, title[:200], text, "info", None)])
        fired.append(Fired(alert_id, False, episode))
    return fired


def like_of(pattern: str) -> str | None:
    """A metric glob as an SQL LIKE pattern (escaped with ``\\``), or None when it has a
    ``[…]`` class, which LIKE cannot say."""
    if "[" in pattern:
        return None
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%").replace("?", "_")


def series_arrivals(
    connection: Connection,
    project_id: int,
    run_id: int | None,
    since: float,
    pattern: str | None = None,
) -> list[tuple[int, str, float]]:
    """(run, series, when its newest block was last written) for the project's runs (or the
    one run) written to since ``since`` and not ended; only series whose names may match
    the glob ``pattern`` when it is given (the caller still matches them)."""
    newest = (
        select(point_blocks.c.last_time)
        .where(point_blocks.c.metric_id == metrics.c.id)
        .order_by(point_blocks.c.first_step.desc())
        .limit(1)
        .scalar_subquery()
    )
    query = (
        select(runs.c.id, metrics.c.name, newest)
        .join(metrics, metrics.c.run_id == runs.c.id)
        .where(
            runs.c.project_id == project_id,
            runs.c.updated_at >= since,
            # A Trackio run's unknown end is no end: a stall is the one sign that it died.
            runs.c.status.is_(None) | runs.c.status.in_(("running", END_UNKNOWN_STATUS)),
        )
    )
    if run_id is not None:
        query = query.where(runs.c.id == run_id)
    like = None if pattern is None else like_of(pattern)
    if like is not None:
        query = query.where(metrics.c.name.like(like, escape="\\"))
    return [(int(r), name, at) for r, name, at in connection.execute(query) if at is not None]


def heartbeats(
    connection: Connection, project_id: int, run_id: int | None, since: float
) -> list[tuple[int, float, bool]]:
    """(run, last heartbeat, ended) of the project's runs (or the one run) that sent a
    heartbeat since ``since``."""
    query = select(runs.c.id, runs.c.health_at, runs.c.status).where(
        and_(runs.c.project_id == project_id, runs.c.health_at >= since)
    )
    if run_id is not None:
        query = query.where(runs.c.id == run_id)
    return [
        (int(r), float(at), status not in (None, "running", END_UNKNOWN_STATUS))
        for r, at, status in connection.execute(query)
    ]


def list_episodes(connection: Connection, rule_id: int, limit: int = 50) -> list[dict[str, Any]]:
    """A rule's episodes, newest first."""
    query = (
        select(alert_episodes, runs.c.name.label("run"))
        .join(runs, runs.c.id == alert_episodes.c.run_id)
        .where(alert_episodes.c.rule_id == rule_id)
        .order_by(alert_episodes.c.id.desc())
        .limit(limit)
    )
    return [
        {"episode": row.id, "run": row.run, "subject": row.subject, "alert_id": row.alert_id,
         "title": row.title, "opened_at": row.opened_at, "opened_step": row.opened_step,
         "resolved_at": row.resolved_at, "resolved_step": row.resolved_step}
        for row in connection.execute(query)
    ]  # fmt: skip
