"""The PostgreSQL form of storing Arena log events: one statement, then the point blocks.

On PostgreSQL each statement is a network round trip. Data-modifying CTEs do most of the
work in one, for all the batches a writer takes together: events are inserted (retried
``log_id``s fall out at ``ON CONFLICT``), only the new events' points are summarized and
folded into the series summaries (which locks those series until commit), and the runs are
touched. The statement answers which events were new and the series ids, and the points go
into their blocks through ``points``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tuneplane.contract.arena import ArenaLog
from tuneplane.store.points import store_new_points, summarize
from tuneplane.store.sql import Dialect

_STORE_LOGS = """
WITH input AS (
    SELECT * FROM unnest(%(runs)s::int[], %(log_ids)s::text[], %(steps)s::bigint[])
        WITH ORDINALITY AS t(run_id, log_id, step, ord)
),
ev AS (
    INSERT INTO events (run_id, log_id, step, received_at)
    SELECT run_id, log_id, step, %(now)s FROM input ORDER BY ord
    ON CONFLICT (run_id, log_id) DO NOTHING
    RETURNING id, run_id, log_id, step
),
all_new AS (
    SELECT count(*) = %(events)s AS yes FROM ev
),
-- When every event is new (the usual batch), the summaries computed by the caller hold;
-- otherwise the new events' points are gathered and summarized here.
pts AS (
    SELECT ev.id AS event_id, ev.run_id, ev.step, (%(names)s::text[])[p.name_ord] AS name,
           p.value
    FROM unnest(%(event_ords)s::int[], %(name_ords)s::int[], %(values)s::float8[])
        AS p(event_ord, name_ord, value)
    JOIN input ON input.ord = p.event_ord
    JOIN ev ON ev.run_id = input.run_id AND ev.log_id = input.log_id
    WHERE NOT (SELECT yes FROM all_new)
),
summary AS (
    SELECT * FROM unnest(
        %(s_runs)s::int[], %(s_names)s::text[], %(s_counts)s::bigint[], %(s_lows)s::float8[],
        %(s_highs)s::float8[], %(s_firsts)s::bigint[], %(s_lasts)s::bigint[],
        %(s_last_values)s::float8[]
    ) AS s(run_id, name, n, lo, hi, first_step, last_step, last_value)
    WHERE (SELECT yes FROM all_new)
    UNION ALL
    SELECT run_id, name, count(*), min(value), max(value), min(step), max(step),
           (array_agg(value ORDER BY step DESC, event_id DESC))[1]
    FROM pts GROUP BY run_id, name
),
m AS (
    INSERT INTO metrics AS old
        (run_id, name, count, min_value, max_value, first_step, last_step, last_value)
    SELECT run_id, name, n, lo, hi, first_step, last_step, last_value FROM summary
    ORDER BY run_id, name
    ON CONFLICT (run_id, name) DO UPDATE SET
        count = old.count + excluded.count,
        min_value = least(old.min_value, excluded.min_value),
        max_value = greatest(old.max_value, excluded.max_value),
        first_step = least(old.first_step, excluded.first_step),
        last_value = CASE WHEN excluded.last_step >= old.last_step
                          THEN excluded.last_value ELSE old.last_value END,
        last_step = greatest(old.last_step, excluded.last_step)
    RETURNING id, run_id, name
),
touched AS (
    UPDATE runs SET updated_at = %(now)s, point_count = runs.point_count + added.n,
        last_step = greatest(coalesce(runs.last_step, -1), added.step)
    FROM (
        SELECT * FROM unnest(%(r_runs)s::int[], %(r_counts)s::bigint[], %(r_steps)s::bigint[])
            AS r(run_id, n, step)
        WHERE (SELECT yes FROM all_new)
        UNION ALL
        SELECT run_id, count(*), max(step) FROM pts GROUP BY run_id
    ) added
    WHERE runs.id = added.run_id
    RETURNING 1
)
SELECT (SELECT array_agg(id ORDER BY id) FROM ev), (SELECT array_agg(run_id ORDER BY id) FROM ev),
       (SELECT array_agg(log_id ORDER BY id) FROM ev),
       (SELECT array_agg(id ORDER BY run_id, name) FROM m),
       (SELECT array_agg(run_id ORDER BY run_id, name) FROM m),
       (SELECT array_agg(name ORDER BY run_id, name) FROM m),
       (SELECT count(*) FROM touched)
"""


def _int_array(items: Sequence[int]) -> str:
    return "{" + ",".join(map(str, items)) + "}"


def _float_array(items: Sequence[float]) -> str:
    return "{" + ",".join(map(repr, items)) + "}"


@dataclass(slots=True)
class _Columns:
    """Several batches' log events as the columns the statement takes, and each series'
    points with the event's ordinal until its ID is known, and each run's (points, last
    step): as if every event is new, so the summaries can be sent along."""

    names: dict[str, int] = field(default_factory=dict)
    run_ids: list[int] = field(default_factory=list)
    log_ids: list[str] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    event_ords: list[int] = field(default_factory=list)
    name_ords: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    series: dict[tuple[int, str], list[tuple[int, int, float]]] = field(default_factory=dict)
    per_run: dict[int, list[int]] = field(default_factory=dict)


def _columns(logs: Sequence[tuple[int, Sequence[ArenaLog]]]) -> _Columns:
    c = _Columns()
    names, series = c.names, c.series
    for run_id, batch_logs in logs:
        for log in batch_logs:
            c.run_ids.append(run_id)
            c.log_ids.append(log.log_id)
            c.steps.append(log.step)
            ordinal = len(c.log_ids)
            run_total = c.per_run.setdefault(run_id, [0, -1])
            run_total[0] += len(log.metrics)
            run_total[1] = max(run_total[1], log.step)
            for name, value in log.metrics.items():
                c.event_ords.append(ordinal)
                c.name_ords.append(names.setdefault(name, len(names) + 1))
                c.values.append(value)
                point = (log.step, ordinal, value)
                points_of = series.get((run_id, name))
                if points_of is None:
                    series[run_id, name] = [point]
                else:
                    points_of.append(point)
    return c


def _parameters(c: _Columns, now: float) -> dict[str, Any]:
    summary_columns = list(zip(*summarize(c.series), strict=True))
    run_columns = list(zip(*((run_id, *row) for run_id, row in c.per_run.items()), strict=True))
    return {
        "now": now,
        "runs": _int_array(c.run_ids),
        # IDs are letters, digits, "_" and "-": quoted, they need no escaping.
        "log_ids": "{" + ",".join(f'"{log_id}"' for log_id in c.log_ids) + "}",
        "steps": _int_array(c.steps),
        "names": list(c.names),
        "event_ords": _int_array(c.event_ords),
        "name_ords": _int_array(c.name_ords),
        "values": _float_array(c.values),
        "events": len(c.log_ids),
        "s_runs": _int_array(summary_columns[0]),
        "s_names": list(summary_columns[1]),
        "s_counts": _int_array(summary_columns[2]),
        "s_lows": _float_array(summary_columns[3]),
        "s_highs": _float_array(summary_columns[4]),
        "s_firsts": _int_array(summary_columns[5]),
        "s_lasts": _int_array(summary_columns[6]),
        "s_last_values": _float_array(summary_columns[7]),
        "r_runs": _int_array(run_columns[0]),
        "r_counts": _int_array(run_columns[1]),
        "r_steps": _int_array(run_columns[2]),
    }


def store_logs(
    sql: Dialect, logs: Sequence[tuple[int, Sequence[ArenaLog]]], now: float
) -> list[tuple[int, int]]:
    """Store the log events of several batches, given as (run id, events with distinct
    ``log_id``s, none repeated by another batch of the run); returns (new events, new
    points) per batch."""
    c = _columns(logs)
    if not c.log_ids:
        return [(0, 0)] * len(logs)
    sql.cursor.execute(_STORE_LOGS, _parameters(c, now))
    event_ids, event_runs, new_log_ids, metric_ids, metric_runs, metric_names, _ = (
        sql.cursor.fetchone()
    )
    if not event_ids:
        return [(0, 0)] * len(logs)
    series_ids = dict(zip(zip(metric_runs, metric_names, strict=True), metric_ids, strict=True))
    new_events = dict(zip(zip(event_runs, new_log_ids, strict=True), event_ids, strict=True))
    # Event ids by ordinal (index 0 unused); None for a retried event.
    event_of = [None, *(new_events.get(key) for key in zip(c.run_ids, c.log_ids, strict=True))]
    new_points = {}
    for key, found in c.series.items():
        kept = [
            (step, event, value)
            for step, ordinal, value in found
            if (event := event_of[ordinal]) is not None
        ]
        if kept:
            new_points[series_ids[key]] = kept
    store_new_points(sql, new_points, now)
    stored = []
    for run_id, batch_logs in logs:
        new = [log for log in batch_logs if (run_id, log.log_id) in new_events]
        stored.append((len(new), sum(len(log.metrics) for log in new)))
    return stored
