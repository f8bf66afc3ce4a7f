"""The periodic check of time-based alert rules: a series that stopped arriving
(``stall``) and a heartbeat gone stale (``heartbeat``). Every
``TUNEPLANE_ALERT_CHECK_INTERVAL`` seconds it reads those rules, the last arrival of the
series and heartbeats they watch, and stores what opens or resolves (a stall resolves
when its series receives a point, judged at ingest). Its failures are log lines: it never
stops the server or touches ingest.

Only runs written to (or heartbeats sent) within :data:`HORIZON_SECONDS` are watched, and
a stall only for series that received points since the rule was last changed, so a new
rule does not raise an alert for every old run of the project.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from typing import Final

from starlette.concurrency import run_in_threadpool

from tuneplane.contract.alert_rules import Transition
from tuneplane.diagnostics.alert_rules import (
    Watch,
    judge_heartbeat,
    judge_stall,
    matches,
)
from tuneplane.server.alerting import AlertEngine
from tuneplane.store import alert_episodes, alert_rules
from tuneplane.store.alert_rules import TimedRule
from tuneplane.store.database import Database

logger = logging.getLogger("tuneplane")
HORIZON_SECONDS: Final = 7 * 86400.0


def _stalls(
    timed: TimedRule,
    arrivals: list[tuple[int, str, float]],
    opened: set[tuple[int, int, str]],
    now: float,
) -> list[tuple[int, Transition]]:
    rule, judged = timed.rule, []
    for run_id, name, arrived in arrivals:
        if arrived < timed.created_at or not matches_metric(rule.spec.metric, name):
            continue
        watch = Watch(open=(rule.id, run_id, name) in opened)
        found = judge_stall(rule, name, watch, arrived, now)
        if found is not None:
            judged.append((run_id, found))
    return judged


def _heartbeats(
    timed: TimedRule,
    beats: list[tuple[int, float, bool]],
    opened: set[tuple[int, int, str]],
    now: float,
) -> list[tuple[int, Transition]]:
    rule, judged = timed.rule, []
    for run_id, health_at, ended in beats:
        watch = Watch(open=(rule.id, run_id, "") in opened)
        found = judge_heartbeat(rule, watch, health_at, ended, now)
        if found is not None:
            judged.append((run_id, found))
    return judged


def matches_metric(pattern: str | None, name: str) -> bool:
    return pattern is not None and matches(pattern, name)


def judge_timed(database: Database, now: float) -> dict[int, list[Transition]]:
    """What the time-based rules say now, per run (reads only)."""
    with database.connect() as connection:
        rules = alert_rules.timed_rules(connection)
        opened = alert_episodes.open_watches_of(connection, [t.rule.id for t in rules])
        per_run: dict[int, list[Transition]] = defaultdict(list)
        for timed in rules:
            rule = timed.rule
            if rule.spec.kind == "stall":
                since = max(timed.created_at, now - HORIZON_SECONDS)
                arrivals = alert_episodes.series_arrivals(
                    connection, timed.project_id, rule.run_id, since, rule.spec.metric
                )
                judged = _stalls(timed, arrivals, opened, now)
            else:
                beats = alert_episodes.heartbeats(
                    connection, timed.project_id, rule.run_id, now - HORIZON_SECONDS
                )
                judged = _heartbeats(timed, beats, opened, now)
            for run_id, transition in judged:
                per_run[run_id].append(transition)
    return per_run


async def check_once(engine: AlertEngine, database: Database) -> int:
    """Judge the time-based rules once and store what changed; returns the transitions."""
    per_run = await run_in_threadpool(judge_timed, database, time.time())
    for run_id, transitions in per_run.items():
        await engine.store(run_id, transitions)
    return sum(map(len, per_run.values()))


async def check_forever(engine: AlertEngine, database: Database, interval: float) -> None:
    while await engine.pause(interval):
        try:
            await check_once(engine, database)
        except Exception as exc:  # the store is down, say: the next check tries again
            logger.warning("tuneplane: the alert rule check failed: %s", exc)
