"""The PostgreSQL form of storing Arena log events: one statement, then the point blocks.

On PostgreSQL each statement is a network round trip. Data-modifying CTEs do most of the
work in one: events are inserted (retried ``log_id``s fall out at ``ON CONFLICT``), only the
new events' points are summarized and folded into the series summaries (which locks those
series until commit), and the run is touched. The statement answers which events were new
and the series ids, and the points go into their blocks through ``points``.
"""

from __future__ import annotations

from collections.abc import Sequence

from tuneplane.contract.arena import ArenaLog
from tuneplane.store.points import store_new_points
from tuneplane.store.sql import Dialect

_STORE_LOGS = """
WITH input AS (
    SELECT * FROM unnest(%(log_ids)s::text[], %(steps)s::bigint[])
        WITH ORDINALITY AS t(log_id, step, ord)
),
ev AS (
    INSERT INTO events (run_id, log_id, step, received_at)
    SELECT %(run)s, log_id, step, %(now)s FROM input ORDER BY ord
    ON CONFLICT (run_id, log_id) DO NOTHING
    RETURNING id, log_id, step
),
pts AS (
    SELECT ev.id AS event_id, ev.step, (%(names)s::text[])[p.name_ord] AS name, p.value
    FROM unnest(%(event_ords)s::int[], %(name_ords)s::int[], %(values)s::float8[])
        AS p(event_ord, name_ord, value)
    JOIN input ON input.ord = p.event_ord
    JOIN ev ON ev.log_id = input.log_id
),
summary AS (
    SELECT name, count(*) AS n, min(value) AS lo, max(value) AS hi,
           min(step) AS first_step, max(step) AS last_step,
           (array_agg(value ORDER BY step DESC, event_id DESC))[1] AS last_value
    FROM pts GROUP BY name
),
m AS (
    INSERT INTO metrics AS old
        (run_id, name, count, min_value, max_value, first_step, last_step, last_value)
    SELECT %(run)s, name, n, lo, hi, first_step, last_step, last_value FROM summary
    ORDER BY name
    ON CONFLICT (run_id, name) DO UPDATE SET
        count = old.count + excluded.count,
        min_value = least(old.min_value, excluded.min_value),
        max_value = greatest(old.max_value, excluded.max_value),
        first_step = least(old.first_step, excluded.first_step),
        last_value = CASE WHEN excluded.last_step >= old.last_step
                          THEN excluded.last_value ELSE old.last_value END,
        last_step = greatest(old.last_step, excluded.last_step)
    RETURNING id, name
),
touched AS (
    UPDATE runs SET updated_at = %(now)s,
        point_count = point_count + (SELECT count(*) FROM pts),
        last_step = greatest(coalesce(last_step, -1), (SELECT max(step) FROM ev))
    WHERE id = %(run)s AND EXISTS (SELECT 1 FROM ev)
    RETURNING 1
)
SELECT (SELECT array_agg(id ORDER BY id) FROM ev), (SELECT array_agg(log_id ORDER BY id) FROM ev),
       (SELECT array_agg(id ORDER BY name) FROM m), (SELECT array_agg(name ORDER BY name) FROM m),
       (SELECT count(*) FROM touched)
"""


def _int_array(items: Sequence[int]) -> str:
    return "{" + ",".join(map(str, items)) + "}"


def store_logs(sql: Dialect, run_id: int, logs: Sequence[ArenaLog], now: float) -> tuple[int, int]:
    """Store log events whose ``log_id``s are distinct; returns (new events, new points)."""
    names: dict[str, int] = {}
    event_ords: list[int] = []
    name_ords: list[int] = []
    values: list[float] = []
    for ordinal, log in enumerate(logs, start=1):
        for name, value in log.metrics.items():
            event_ords.append(ordinal)
            name_ords.append(names.setdefault(name, len(names) + 1))
            values.append(value)
    sql.cursor.execute(
        _STORE_LOGS,
        {
            "run": run_id,
            "now": now,
            "log_ids": [log.log_id for log in logs],
            "steps": [log.step for log in logs],
            "names": list(names),
            "event_ords": _int_array(event_ords),
            "name_ords": _int_array(name_ords),
            "values": "{" + ",".join(map(repr, values)) + "}",
        },
    )
    event_ids, log_ids, metric_ids, metric_names, _ = sql.cursor.fetchone()
    if not event_ids:
        return 0, 0
    by_log = {log.log_id: log for log in logs}
    series_ids = dict(zip(metric_names, metric_ids, strict=True))
    series: dict[int, list[tuple[int, int, float]]] = {}
    for event_id, log_id in zip(event_ids, log_ids, strict=True):
        log = by_log[log_id]
        for name, value in log.metrics.items():
            series.setdefault(series_ids[name], []).append((log.step, event_id, value))
    store_new_points(sql, series, now)
    return len(event_ids), sum(len(found) for found in series.values())
