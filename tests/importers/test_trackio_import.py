"""Importing Trackio 0.40.0's files (written by the real Trackio client) into the store, on
SQLite and PostgreSQL: every point, config, system metric and alert exactly once, at its
original step and time; a second import adds nothing; Trackio's files are never touched."""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from tests.trackio import local_data
from tuneplane.contract.arena import ArenaBatch, ArenaLog
from tuneplane.importers.trackio import TrackioDirectoryError
from tuneplane.server.settings import Settings
from tuneplane.server.trackio_import import import_directory
from tuneplane.store import catalog
from tuneplane.store.arena import ingest_arena
from tuneplane.store.database import Database
from tuneplane.store.points import iter_export_rows, read_invalid
from tuneplane.store.schema import projects

RENAMED = "my-run-d33e7609"  # "my run" is no tuneplane ID
KINDS = {2: "nan", 3: "inf", 4: "-inf"}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float, float]:
    """A Trackio data directory written by the real client, and when it was written."""
    directory = tmp_path_factory.mktemp("trackio")
    began = time.time()
    local_data.write(directory)
    return directory, began, time.time()


@pytest.fixture
def trackio_dir(written: tuple[Path, float, float], tmp_path: Path) -> Path:
    """A copy of it for this test (one test writes more into it)."""
    copy = tmp_path / "trackio"
    shutil.copytree(written[0], copy)
    return copy


@pytest.fixture
def reader(settings: Settings) -> Iterator[Database]:
    """The store, for reading what an import wrote (the import opens its own)."""
    database = Database(settings.database_url, lock=False)
    database.migrate()
    yield database
    database.close()


def _stored(database: Database, project: str, run: str) -> dict[str, Any]:
    with database.connect() as connection:
        row = catalog.get_run(connection, project, run)
        points = list(iter_export_rows(connection, row.id))
        bad = catalog.find_metric_id(connection, row.id, "bad")
        invalid = read_invalid(connection, bad) if bad is not None else []
        alerts = catalog.list_alerts(connection, row.id)
    return {"row": row, "points": points, "invalid": invalid, "alerts": alerts}


def _trackio_rows(directory: Path, project: str, sql: str) -> list[tuple[Any, ...]]:
    # immutable: a plain read-only reader of a WAL database would leave files behind.
    uri = f"file:{directory / project}.db?mode=ro&immutable=1"
    with sqlite3.connect(uri, uri=True) as connection:
        return connection.execute(sql).fetchall()


def _check_run(database: Database, project: str, run: str, steps: list[int], window: Any) -> None:
    stored = _stored(database, project, run)
    began, ended = window
    training = [p for p in stored["points"] if not p[1].startswith("system/")]
    # Every finite value once, at its step; NaN and infinities as invalid points.
    expected = Counter(
        (step, name, value)
        for step in steps
        for name, value in local_data.values(step).items()
        if math.isfinite(value)
    )
    assert Counter((step, name, value) for step, name, value, _, _ in training) == expected
    assert stored["invalid"] == [(s, KINDS[s % 10]) for s in steps if s % 10 in KINDS]
    # One event per logged step, each with Trackio's own log_id; times are Trackio's.
    assert len({log_id for _, _, _, log_id, _ in training}) == len(steps)
    assert all(began <= when <= ended for *_, when in stored["points"])
    assert began <= stored["row"].created_at <= ended
    assert stored["row"].last_step == steps[-1]


def test_every_point_config_system_metric_and_alert_arrives_once(
    settings: Settings, reader: Database, trackio_dir: Path, written: Any
) -> None:
    before = local_data.fingerprint(trackio_dir)
    totals, notes = import_directory(settings, trackio_dir)
    window = written[1:]
    for (project, run), steps in local_data.expected_steps().items():
        _check_run(reader, project, RENAMED if run == "my run" else run, steps, window)
    run_1 = _stored(reader, "arena-p", "run-1")
    # The config Trackio holds: a resumed session replaces it (here without lr and model).
    ((config,),) = _trackio_rows(
        trackio_dir, "arena-p", "SELECT config FROM configs WHERE run_name = 'run-1'"
    )
    assert run_1["row"].config == json.loads(config)
    assert "_Created" in run_1["row"].config
    r2 = _stored(reader, "other", "r2")["row"]
    assert {"seed": 7}.items() <= r2.config.items()
    # init(group=) as a group: what a group may not hold (the space) becomes "-".
    assert (r2.group, run_1["row"].group) == ("seeds-lr=0.1", None)
    # A run whose name is no ID keeps the name it was given, as over the Trackio protocol.
    assert _stored(reader, "arena-p", RENAMED)["row"].display_name == "my run"
    assert (run_1["row"].display_name, r2.display_name) == (None, None)
    # Trackio's files say no more than its HTTP calls of how a run ended: unknown, as there.
    for project, run in local_data.expected_steps():
        row = _stored(reader, project, RENAMED if run == "my run" else run)["row"]
        assert row.status == "unknown", (project, run)
    system = Counter(name for _, name, *_ in run_1["points"] if name.startswith("system/"))
    assert system == {"system/gpu/util": 3, "system/memory_gb": 3}
    assert sorted(
        (a.title, a.text, a.level, a.step, a.alert_id) for a in run_1["alerts"]
    ) == sorted(
        _trackio_rows(
            trackio_dir,
            "arena-p",
            "SELECT title, text, level, step, alert_id FROM alerts WHERE run_name = 'run-1'",
        )
    )
    assert [a.level for a in sorted(run_1["alerts"], key=lambda a: a.title)] == ["warn", "error"]
    assert (totals.alerts_new, totals.runs_created) == (3, 3)
    assert totals.logs_duplicate == totals.alerts_duplicate == 0
    # The text value is no series, and the note says so, with its file.
    assert any(line.startswith("arena-p.db: metrics 'note': a str") for line in notes.lines())
    assert local_data.fingerprint(trackio_dir) == before  # not a byte written, no file added

    again, _ = import_directory(settings, trackio_dir)
    assert (again.logs_new, again.points, again.alerts_new, again.runs_created) == (0, 0, 0, 0)
    assert again.logs_duplicate == totals.logs_new
    assert again.alerts_duplicate == totals.alerts_new
    for (project, run), steps in local_data.expected_steps().items():
        _check_run(reader, project, RENAMED if run == "my run" else run, steps, window)
    assert local_data.fingerprint(trackio_dir) == before


def test_events_that_came_over_http_first_are_not_doubled(
    settings: Settings, reader: Database, trackio_dir: Path
) -> None:
    """The Trackio client sends the log_id it writes to disk; an event stored from the
    HTTP protocol first is a duplicate when the files are imported."""
    rows = _trackio_rows(
        trackio_dir, "other", "SELECT log_id, step FROM metrics ORDER BY id LIMIT 4"
    )
    logs = tuple(ArenaLog(log_id, step, {"loss": 1.0 / (step + 1)}) for log_id, step in rows)
    reader.run_write(ingest_arena, [(ArenaBatch("other", "r2", None, logs, ()), None)])
    totals, _ = import_directory(settings, trackio_dir)
    assert totals.logs_duplicate == 4
    stored = _stored(reader, "other", "r2")
    assert len(stored["points"]) == len({(p[0], p[1]) for p in stored["points"]})
    # Those events keep what came over HTTP; the others are whole.
    assert Counter(p[0] for p in stored["points"] if not p[1].startswith("system/")) == {
        **{step: 2 if step % 10 in KINDS else 3 for step in range(12)},
        **{step: 1 for _, step in rows},
    }


def test_an_import_while_trackio_writes_misses_nothing_and_doubles_nothing(
    settings: Settings, reader: Database, tmp_path: Path
) -> None:
    directory = tmp_path / "live"
    steps = 300
    job = [{"project": "live", "name": "r", "steps": steps, "sleep": 0.01}]
    writer = local_data.write(directory, job, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    imports = 0
    try:
        while writer.poll() is None:
            try:
                import_directory(settings, directory)
                imports += 1
            except TrackioDirectoryError:
                pass  # Trackio has not made its tables yet
            time.sleep(0.05)
    finally:
        _, errors = writer.communicate(timeout=120)
    assert writer.returncode == 0, errors
    assert b"locked" not in errors
    import_directory(settings, directory)
    assert imports >= 2  # the imports ran while Trackio was writing
    stored = _stored(reader, "live", "r")
    expected = sum(
        1 for step in range(steps) for v in local_data.values(step).values() if math.isfinite(v)
    )
    assert len(stored["points"]) == expected
    assert stored["row"].point_count == expected


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tuneplane.cli", "import", "trackio", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_command_imports_and_says_what_it_did(trackio_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "server"
    done = _cli(str(trackio_dir), "--data-dir", str(data))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    last = done.stderr.splitlines()[-1]
    assert last.startswith("tuneplane: imported 2 projects, 3 runs (3 new): ")
    again = _cli(str(trackio_dir), "--data-dir", str(data))
    assert again.returncode == 0
    assert " 0 points (0 NaN/inf) in 0 events and 0 alerts stored; " in again.stderr
    database = Database(f"sqlite:///{data / 'tuneplane.db'}", lock=False)
    try:
        with database.connect() as connection:
            found = dict(connection.execute(select(projects.c.name, projects.c.visibility)).all())
        # As the Trackio protocol creates projects: TUNEPLANE_DEFAULT_VISIBILITY (private).
        assert found == {"arena-p": "private", "other": "private"}
    finally:
        database.close()


@pytest.mark.parametrize(
    ("make", "line"),
    [
        (lambda root: root / "missing", "{dir}: no such directory"),
        (lambda root: root, "{dir}: no Trackio project databases in it"),
    ],
)
def test_a_bad_directory_is_one_line_and_exit_2(tmp_path: Path, make: Any, line: str) -> None:
    (tmp_path / "notes.db").write_text("not a database")
    directory = make(tmp_path)
    done = _cli(str(directory), "--data-dir", str(tmp_path / "server"))
    assert done.returncode == 2
    assert done.stderr.startswith(f"tuneplane import trackio: {line.format(dir=directory)}")
    assert len(done.stderr.splitlines()) == 1, done.stderr
