"""What the Trackio reader makes of rows the 0.40.0 client does not write itself: files of
older versions (no run or log IDs), values that are no numbers, broken rows, names that are
no tuneplane IDs, a run with a config and nothing logged."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tuneplane.importers.trackio import find_databases, read_database
from tuneplane.importers.trackio_rows import Notes, stored_name

OLD_SCHEMA = """
CREATE TABLE metrics (id INTEGER PRIMARY KEY AUTOINCREMENT, timestamp TEXT NOT NULL,
    run_name TEXT NOT NULL, step INTEGER NOT NULL, metrics TEXT NOT NULL);
CREATE TABLE configs (id INTEGER PRIMARY KEY AUTOINCREMENT, run_name TEXT NOT NULL,
    config TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE alerts (id INTEGER PRIMARY KEY AUTOINCREMENT, timestamp TEXT NOT NULL,
    run_name TEXT NOT NULL, title TEXT NOT NULL, text TEXT, level TEXT, step INTEGER);
"""
T = "2026-01-01T00:00:00+00:00"


def _old_database(directory: Path) -> Path:
    path = directory / "old project.db"
    with sqlite3.connect(path) as connection:
        connection.executescript(OLD_SCHEMA)
        connection.executemany(
            "INSERT INTO metrics (timestamp, run_name, step, metrics) VALUES (?, ?, ?, ?)",
            [
                (T, "a", 0, '{"x": 1.5, "only_nan": "NaN", "img": {"_type": "trackio.image"}}'),
                (T, "a", 1, '{"x": NaN, "flag": true}'),  # an older writer's NaN literal
                ("yesterday", "a", 2, '{"x": 3}'),
                (T, "a", -1, '{"x": 3}'),
                (T, "a", 3, "not json"),
            ],
        )
        connection.executemany(
            "INSERT INTO configs (run_name, config, created_at) VALUES (?, ?, ?)",
            [("a", '{"lr": 1}', T), ("idle run", '{"seed": 3}', T)],
        )
        connection.execute(
            "INSERT INTO alerts (timestamp, run_name, title, text, level, step) "
            "VALUES (?, 'a', ?, ?, NULL, 1)",
            (T, "t" * 300, "has\x00nul"),
        )
    return path


def test_old_files_and_odd_rows(tmp_path: Path) -> None:
    _old_database(tmp_path)
    (tmp_path / "tuneplane.db").write_bytes(b"")  # not Trackio's: skipped, not a problem
    notes = Notes()
    (database,) = find_databases(tmp_path, notes)
    assert database.project == stored_name("old project")
    assert database.project.startswith("old-project-")
    chunks = list(read_database(database, notes))
    again = list(read_database(database, Notes()))
    assert chunks == again  # the same IDs every time, though the rows carry none

    logs = [log for chunk in chunks for log in chunk.logs]
    assert [(log.step, log.values, log.invalid) for log in logs] == [
        (0, {"x": 1.5}, {"only_nan": "nan"}),
        (1, {}, {"x": "nan"}),
    ]
    assert all(log.log_id.startswith("trackio-") for log in logs)
    (alert,) = [alert for chunk in chunks for alert in chunk.alerts]
    assert (alert.title, alert.text, alert.level, alert.step) == ("t" * 200, "hasnul", "warn", 1)
    idle = [chunk for chunk in chunks if chunk.run == stored_name("idle run")]
    assert [(c.config, c.logs, c.alerts) for c in idle] == [({"seed": 3}, (), ())]
    assert {chunk.config["lr"] for chunk in chunks if chunk.run == "a"} == {1}

    lines = "\n".join(notes.lines())
    for expected in (
        "old project.db: project: not a tuneplane ID; imported as 'old-project-",
        "old project.db: metrics 'img': trackio.image: not stored",
        "old project.db: metrics 'flag': a boolean, not a number; not stored",
        "old project.db: metrics.timestamp: not an ISO 8601 time; row skipped",
        "old project.db: metrics.step: not a step; the row is not imported",
        "old project.db: metrics.metrics: not a JSON object; the row is not imported",
        "old project.db: alerts.title: cut to its first 200 characters",
        "old project.db: alerts.text: NUL characters removed",
        "old project.db: run 'idle run': not a tuneplane ID; as 'idle-run-",
    ):
        assert expected in lines, lines
