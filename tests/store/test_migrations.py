"""The migrations build exactly the schema declared in ``store/schema.py``."""

from pathlib import Path

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config as AlembicConfig
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from tuneplane.store.database import MIGRATIONS_DIR, Database
from tuneplane.store.evaluation import execution_attempts, rounds, trial_history
from tuneplane.store.points import read_chart, read_page
from tuneplane.store.schema import metadata


def test_migrated_schema_matches_the_declared_schema(database: Database) -> None:
    with database.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        differences = compare_metadata(context, metadata)
    assert differences == []


def test_migrating_twice_changes_nothing(database: Database) -> None:
    database.migrate()
    with database.engine.connect() as connection:
        context = MigrationContext.configure(connection)
        assert context.get_current_revision() is not None


def test_points_stored_before_blocks_are_converted_on_upgrade(empty_database_url: str) -> None:
    """A data directory from before the block layout keeps every point, in order."""
    database = Database(empty_database_url)
    config = AlembicConfig()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with database.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0003")
        connection.execute(text("INSERT INTO projects (id, name, created_at) VALUES (1, 'p', 0)"))
        connection.execute(
            text(
                "INSERT INTO runs (id, project_id, name, created_at, updated_at) "
                "VALUES (1, 1, 'r', 0, 0)"
            )
        )
        connection.execute(
            text(
                "INSERT INTO metrics (id, run_id, name, count, first_step, last_step) "
                "VALUES (1, 1, 'loss', 1500, 0, 999)"
            )
        )
        rows = [
            {"s": step, "e": event, "v": step * 0.5 - event, "t": 100.0 + step}
            for step in range(1000)
            for event in ((0,) if step % 2 else (7 + step, 9 + step))
        ]
        connection.execute(
            text(
                "INSERT INTO points (metric_id, step, event_id, value, time) "
                "VALUES (1, :s, :e, :v, :t)"
            ),
            rows,
        )
    database.migrate()
    with database.connect() as connection:
        stored = read_page(connection, 1, after=None, start=None, end=None, limit=10_000)
        chart = read_chart(connection, 1, lo=0, hi=999, max_points=10)
        tables = set(inspect(connection).get_table_names())
    assert [(p.step, p.event_id, p.value, p.time) for p in stored] == [
        (row["s"], row["e"], row["v"], row["t"]) for row in rows
    ]
    assert chart.total == len(rows)
    assert sum(bucket.count for bucket in chart.buckets) == len(rows)
    assert "points" not in tables
    database.close()


def test_projects_from_before_access_become_public_on_upgrade(tmp_path: Path) -> None:
    """An existing dashboard keeps serving what it served: old projects are public."""
    database = Database(f"sqlite:///{tmp_path / 'old.db'}")
    config = AlembicConfig()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with database.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0005")
        connection.execute(text("INSERT INTO projects (id, name, created_at) VALUES (1, 'p', 0)"))
    database.migrate()
    with database.connect() as connection:
        found = connection.execute(text("SELECT visibility, public_logs FROM projects")).all()
    database.close()
    assert [tuple(row) for row in found] == [("public", False)]


def test_rounds_from_before_execution_attempts_belong_to_the_attempts_that_reported_them(
    empty_database_url: str,
) -> None:
    """Each execution keeps its own results and declaration: the declaration a restarted
    execution sent (answered new but ignored before) becomes its round's."""
    database = Database(empty_database_url)
    config = AlembicConfig()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    population = (
        '{{"round_id": "val", "expected": {n}, "digests": {{"dataset": "{d}"}}, '
        '"task": {{"name": "gsm8k", "version": null}}}}'
    )
    with database.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0006")
        for statement in (
            "INSERT INTO projects (id, name, created_at) VALUES (1, 'p', 0)",
            "INSERT INTO runs (id, project_id, name, created_at, updated_at) "
            "VALUES (1, 1, 'r', 0, 0)",
            "INSERT INTO eval_rounds (run_id, round_id, expected, dataset, declared_at) "
            f"VALUES (1, 'val', 3, '{'a' * 64}', 5)",
            # A round declared by no stored event, reported by execution 2 only.
            "INSERT INTO eval_rounds (run_id, round_id, expected, declared_at) "
            "VALUES (1, 'lone', 1, 6)",
        ):
            connection.execute(text(statement))
        for event_id, attempt, n, digest in (("p1", 1, 3, "a"), ("p2", 2, 5, "b")):
            connection.execute(
                text(
                    "INSERT INTO observations (run_id, attempt, event_id, type, body, "
                    "received_at) VALUES (1, :a, :e, 'population', :b, :t)"
                ),
                {"a": attempt, "e": event_id, "b": population.format(n=n, d=digest * 64), "t": 7},
            )
        results = [
            ("val", "q1", 1, 0, "failure"),
            ("val", "q1", 1, 3, "success"),
            ("val", "q2", 1, 0, "failure"),
            ("val", "q1", 2, 0, "unscored"),
            ("lone", "q9", 2, 0, "success"),
        ]
        for round_id, trial_id, execution, trial_attempt, status in results:
            connection.execute(
                text(
                    "INSERT INTO trial_results (run_id, round_id, trial_id, execution_attempt, "
                    "trial_attempt, status, eligible, received_at) "
                    "VALUES (1, :r, :t, :e, :a, :s, false, 0)"
                ),
                {"r": round_id, "t": trial_id, "e": execution, "a": trial_attempt, "s": status},
            )
    database.migrate()
    with database.connect() as connection:
        assert execution_attempts(connection, 1) == [1, 2]
        first = {r.round_id: r for r in rounds(connection, 1, 1)}
        second = {r.round_id: r for r in rounds(connection, 1, 2)}
        history = trial_history(connection, 1, 1, "val", "q1")
    database.close()
    assert set(first) == {"val"}
    assert first["val"].declaration is not None
    assert first["val"].declaration.expected == 3
    assert first["val"].declaration.task_name == "gsm8k"
    assert first["val"].tally == {"success": 1, "failure": 1}
    assert set(second) == {"val", "lone"}
    assert second["val"].declaration is not None
    assert (second["val"].declaration.expected, second["val"].tally) == (5, {"unscored": 1})
    assert second["val"].declaration.digests["dataset"] == "b" * 64
    assert second["lone"].declaration is not None
    assert second["lone"].declaration.expected == 1
    assert (history.total, [a.trial_attempt for a in history.attempts]) == (2, [3, 0])
