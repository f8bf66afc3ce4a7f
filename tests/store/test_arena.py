"""Arena batches written together (as a writer groups them) store exactly what writing them
one after another would."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select

from tuneplane.contract.arena import parse_arena_batch
from tuneplane.store.arena import ArenaWrite, IngestOutcome, ingest_arena
from tuneplane.store.database import Database
from tuneplane.store.points import iter_export_rows
from tuneplane.store.schema import metrics, runs


def _batch(run: str, *logs: tuple[str, int, dict[str, float]], **extra: Any) -> ArenaWrite:
    body = {
        "logs": [
            {"project": "p", "run": run, "log_id": log_id, "step": step, "metrics": values}
            for log_id, step, values in logs
        ],
        **extra,
    }
    return parse_arena_batch(body), None


def _stored(connection: Connection, run: str) -> list[tuple[int, str, float, str | None]]:
    run_id = connection.execute(select(runs.c.id).where(runs.c.name == run)).scalar_one()
    return sorted(row[:4] for row in iter_export_rows(connection, run_id))


def test_batches_written_together_keep_their_own_outcomes(database: Database) -> None:
    writes = [
        _batch("a", ("e1", 1, {"loss": 1.0, "reward": 0.5}), ("e2", 2, {"loss": 0.5})),
        _batch("b", ("e1", 1, {"loss": 9.0})),
        # A retry of a's e2 (different content: the first write wins) and a new event.
        _batch("a", ("e2", 2, {"loss": 7.0}), ("e3", 3, {"loss": 0.25})),
        _batch(
            "c",
            alerts=[{"project": "p", "run": "c", "alert_id": "x", "title": "t", "level": "info"}],
        ),
    ]
    outcomes = database.run_write(ingest_arena, writes)

    def counts(outcome: IngestOutcome) -> tuple[int, int, int, int]:
        return outcome.logs_new, outcome.logs_duplicate, outcome.points, outcome.alerts_new

    assert [counts(outcome) for outcome in outcomes] == [
        (2, 0, 3, 0),
        (1, 0, 1, 0),
        (1, 1, 1, 0),
        (0, 0, 0, 1),
    ]
    assert outcomes[0].run == outcomes[2].run != outcomes[1].run
    with database.connect() as connection:
        assert _stored(connection, "a") == [
            (1, "loss", 1.0, "e1"),
            (1, "reward", 0.5, "e1"),
            (2, "loss", 0.5, "e2"),
            (3, "loss", 0.25, "e3"),
        ]
        assert _stored(connection, "b") == [(1, "loss", 9.0, "e1")]
        assert _stored(connection, "c") == []
        summaries = connection.execute(
            select(runs.c.name, metrics.c.name, metrics.c.count, metrics.c.last_value)
            .join(runs, runs.c.id == metrics.c.run_id)
            .order_by(runs.c.name, metrics.c.name)
        ).all()
        assert [tuple(row) for row in summaries] == [
            ("a", "loss", 3, 0.25),
            ("a", "reward", 1, 0.5),
            ("b", "loss", 1, 9.0),
        ]
        point_counts = connection.execute(
            select(runs.c.name, runs.c.point_count, runs.c.last_step).order_by(runs.c.name)
        ).all()
        assert [tuple(row) for row in point_counts] == [("a", 4, 3), ("b", 1, 1), ("c", 0, None)]


def test_a_batch_mixing_retried_and_new_events_summarizes_only_the_new(
    database: Database,
) -> None:
    """When some events of a write are retries, their points count nowhere: not in the
    series summaries, not in the run's counters (PostgreSQL summarizes this case itself)."""
    database.run_write(
        ingest_arena, [_batch("a", ("e1", 1, {"loss": 1.0}), ("e2", 2, {"loss": 0.5}))]
    )
    [outcome] = database.run_write(
        ingest_arena,
        [
            _batch(
                "a", ("e2", 2, {"loss": -9.0}), ("e3", 3, {"loss": 0.25}), ("e4", 3, {"loss": 0.75})
            )
        ],
    )
    assert (outcome.logs_new, outcome.logs_duplicate, outcome.points) == (2, 1, 2)
    with database.connect() as connection:
        assert _stored(connection, "a") == [
            (1, "loss", 1.0, "e1"),
            (2, "loss", 0.5, "e2"),
            (3, "loss", 0.25, "e3"),
            (3, "loss", 0.75, "e4"),
        ]
        summary = connection.execute(
            select(
                metrics.c.count,
                metrics.c.min_value,
                metrics.c.max_value,
                metrics.c.first_step,
                metrics.c.last_step,
                metrics.c.last_value,
            )
        ).one()
        # At step 3 the later event is the last value.
        assert tuple(summary) == (4, 0.25, 1.0, 1, 3, 0.75)
        run_counters = connection.execute(select(runs.c.point_count, runs.c.last_step)).one()
        assert tuple(run_counters) == (4, 3)
