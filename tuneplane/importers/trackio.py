"""Trackio's own files: the project databases of a Trackio 0.40.0 data directory, read into
run chunks without writing a byte of them.

Trackio keeps one SQLite database per project, ``<TRACKIO_DIR>/<project>.db``, with tables
``metrics`` (run, step, time and a JSON object of values per logged row), ``system_metrics``
(time and values, no step), ``alerts`` and ``configs`` (one per run). A database is opened
read-only (``importers.readonly``), so a Trackio process may go on writing it meanwhile;
each page of rows is one query, and pages follow the row id, so rows written meanwhile are
read once, later. (The SQL here reads Trackio's files; tuneplane's own SQL is in ``store``.)

What the rows become is what the Trackio HTTP protocol makes of them (``contract.trackio``):
a run is named by its Trackio run name, series of nested values are joined with ``/``,
system metrics are ``system/…`` series, and each row keeps the ``log_id``/``alert_id`` the
Trackio client also sends over HTTP. System samples have no step: each goes at the step of
the run's last row logged at or before it (0 before any).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast

from tuneplane.contract.arena import ALERT_LEVELS, AlertLevel
from tuneplane.contract.imported import ImportedAlert, ImportedLog, RunChunk
from tuneplane.contract.limits import ALERT_TEXT_MAX_CHARS, ALERT_TITLE_MAX_CHARS
from tuneplane.contract.trackio import (
    SYSTEM_PREFIX,
    TRACKIO_WRITE_CHUNK,
    config_group,
    config_problem,
)
from tuneplane.contract.validation import is_step
from tuneplane.importers.readonly import ReadOnlyDatabase
from tuneplane.importers.trackio_rows import (
    Notes,
    cut_text,
    event_id,
    load_json,
    parse_time,
    row_values,
    stored_name,
)

#: Rows read per query, and the most log events in one chunk (one transaction).
PAGE_ROWS: Final = TRACKIO_WRITE_CHUNK
#: The most values in one chunk, however many each row holds.
CHUNK_VALUES: Final = 20_000
#: The columns that make a ``metrics`` table Trackio's (tuneplane's own has others).
_TRACKIO_METRICS: Final = frozenset({"run_name", "step", "timestamp", "metrics"})


class TrackioDirectoryError(Exception):
    """The directory cannot be imported: one line that says why."""


@dataclass(frozen=True, slots=True)
class TrackioDatabase:
    """One project's database: where it is, the project it goes to, its rows when found."""

    path: Path
    project: str
    rows: int

    @property
    def display_name(self) -> str | None:
        """The project's name as Trackio knew it (its file's), where it is not its ID."""
        return self.path.stem if self.path.stem != self.project else None


def default_directory(environ: Mapping[str, str] | None = None) -> Path:
    """Where Trackio keeps its data: ``$TRACKIO_DIR``, else ``trackio`` in the Hugging Face
    cache (``$HF_HOME``, else ``$XDG_CACHE_HOME/huggingface``, else ``~/.cache/huggingface``)."""
    env = os.environ if environ is None else environ
    if env.get("TRACKIO_DIR"):
        return Path(env["TRACKIO_DIR"])
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]) / "trackio"
    cache = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return cache / "huggingface" / "trackio"


def _columns(source: ReadOnlyDatabase, table: str) -> frozenset[str]:
    rows = source.rows("SELECT name FROM pragma_table_info(?)", (table,))
    return frozenset(name for (name,) in rows)


def _rows(source: ReadOnlyDatabase, table: str) -> int:
    if not _columns(source, table):
        return 0
    ((count,),) = source.rows(f"SELECT count(*) FROM {table}")
    return int(count)


def find_databases(
    directory: Path, notes: Notes, *, skip: tuple[Path, ...] = ()
) -> list[TrackioDatabase]:
    """The Trackio project databases in ``directory`` (``*.db`` with Trackio's ``metrics``
    table), in name order; ``skip``: files that are not to be read (the server's own)."""
    if not directory.exists():
        raise TrackioDirectoryError(f"{directory}: no such directory")
    if not directory.is_dir():
        raise TrackioDirectoryError(f"{directory}: not a directory")
    skipped = {path.resolve() for path in skip}
    found = []
    for path in sorted(directory.glob("*.db")):
        if path.resolve() in skipped or not path.is_file():
            continue
        try:
            source = ReadOnlyDatabase(path)
            try:
                if not _columns(source, "metrics") >= _TRACKIO_METRICS:
                    continue
                rows = sum(_rows(source, t) for t in ("metrics", "system_metrics", "alerts"))
            finally:
                source.close()
        except (sqlite3.Error, OSError) as exc:
            notes.add(path.name, "", f"not a readable SQLite database ({exc}); not imported")
            continue
        project = stored_name(path.stem)
        if project != path.stem:
            notes.add(path.name, "project", f"not a tuneplane ID; imported as {project!r}")
        found.append(TrackioDatabase(path, project, rows))
    return found


def require_databases(directory: Path, notes: Notes, **options: Any) -> list[TrackioDatabase]:
    """``find_databases``, refusing a directory that holds none."""
    found = find_databases(directory, notes, **options)
    if not found:
        raise TrackioDirectoryError(
            f"{directory}: no Trackio project databases in it (<project>.db files with "
            "Trackio's metrics table)"
        )
    return found


class _Project:
    """One database being read: its file, its connection and what is known of its runs."""

    def __init__(self, database: TrackioDatabase, notes: Notes) -> None:
        self.database = database
        self.file = database.path.name
        self.notes = notes
        self.source = ReadOnlyDatabase(database.path)
        self.columns = {
            table: _columns(self.source, table)
            for table in ("metrics", "system_metrics", "alerts", "configs")
        }
        self._configs: dict[str, dict[str, Any] | None] = {}
        #: Trackio run name -> tuneplane run name, and back.
        self.names: dict[str, str] = {}
        self._raw: dict[str, str] = {}

    def run_name(self, raw: object) -> str | None:
        """The tuneplane run a Trackio run name goes to (renamed runs noted once)."""
        if not isinstance(raw, str) or not raw:
            self.notes.add(self.file, "run_name", "missing; the row is not imported")
            return None
        name = self.names.get(raw)
        if name is None:
            name = self.names[raw] = stored_name(raw)
            self._raw.setdefault(name, raw)
            if name != raw:
                self.notes.add(self.file, f"run {raw!r}", f"not a tuneplane ID; as {name!r}")
        return name

    def chunk(self, name: str, started: float, **parts: Any) -> RunChunk:
        """A chunk of the tuneplane run ``name``, with its config, group and names."""
        config = self.config(name)
        raw = self._raw.get(name)
        return RunChunk(
            self.database.project,
            name,
            config,
            started,
            group=config_group(config),
            display_name=raw if raw != name else None,
            project_display_name=self.database.display_name,
            **parts,
        )

    def run_key(self, table: str) -> str:
        """The column naming a Trackio run in ``table`` (older files have no run ids)."""
        return "run_id" if "run_id" in self.columns[table] else "run_name"

    def config(self, name: str) -> dict[str, Any] | None:
        """The config of the tuneplane run ``name`` (the first, when several Trackio runs
        share its name), read when the run is first met, so a run created meanwhile finds
        its own."""
        if name in self._configs:
            return self._configs[name]
        run_name = self._raw.get(name, name)
        found = None
        if {"run_name", "config"} <= self.columns["configs"]:
            order = "created_at, id" if "created_at" in self.columns["configs"] else "id"
            rows = self.source.rows(
                f"SELECT config FROM configs WHERE run_name = ? ORDER BY {order} LIMIT 1",
                (run_name,),
            )
            if rows:
                found = self._checked_config(run_name, load_json(rows[0][0]))
        self._configs[name] = found
        return found

    def _checked_config(self, run_name: str, raw: object) -> dict[str, Any] | None:
        problem = config_problem(raw, "config")
        if problem is not None:
            self.notes.add(self.file, f"configs[{run_name!r}].{problem.field}", problem.rule)
            return None
        return cast(dict[str, Any], raw) or None

    def page(self, table: str, columns: str, after: int) -> list[tuple[Any, ...]]:
        return self.source.rows(
            f"SELECT id, {columns} FROM {table} WHERE id > ? ORDER BY id LIMIT ?",
            (after, PAGE_ROWS),
        )

    def step_at(self, run: object, timestamp: object) -> int:
        """The step of the run's last row logged at or before ``timestamp`` (0 before any)."""
        key = self.run_key("metrics")
        rows = self.source.rows(
            f"SELECT step FROM metrics WHERE {key} = ? AND timestamp <= ? "
            "ORDER BY timestamp DESC, id DESC LIMIT 1",
            (run, timestamp),
        )
        return int(rows[0][0]) if rows and is_step(rows[0][0]) else 0

    def close(self) -> None:
        self.source.close()


def read_database(database: TrackioDatabase, notes: Notes) -> Iterator[RunChunk]:
    """Every run of one project database, as chunks of at most ``PAGE_ROWS`` log events
    and ``CHUNK_VALUES`` values: metrics, then system metrics, then alerts; a run with a
    config and nothing logged is a chunk of its own."""
    project = _Project(database, notes)
    try:
        yield from _logged(project, "metrics")
        if {"timestamp", "metrics"} <= project.columns["system_metrics"]:
            yield from _logged(project, "system_metrics")
        if {"title", "timestamp"} <= project.columns["alerts"]:
            yield from _alerts(project)
        yield from _configured_only(project)
    finally:
        project.close()


def _logged(project: _Project, table: str) -> Iterator[RunChunk]:
    system = table == "system_metrics"
    key = project.run_key(table)
    step = "NULL" if system else "step"
    log_id = "log_id" if "log_id" in project.columns[table] else "NULL"
    columns = f"{key}, run_name, {step}, timestamp, metrics, {log_id}"
    after = 0
    while rows := project.page(table, columns, after):
        after = rows[-1][0]
        runs: dict[str, list[ImportedLog]] = {}
        for _, run_key, run_name, raw_step, timestamp, raw, raw_id in rows:
            name = project.run_name(run_name)
            if system and name is not None:
                raw_step = project.step_at(run_key, timestamp)
            log = _log(project, table, name, (run_key, raw_step, timestamp, raw, raw_id))
            if name is not None and log is not None:
                runs.setdefault(name, []).append(log)
        yield from _chunks(project, runs, len(rows))


def _log(
    project: _Project, table: str, name: str | None, row: tuple[Any, ...]
) -> ImportedLog | None:
    run_key, step, timestamp, raw, raw_id = row
    if name is None:
        return None
    when = parse_time(timestamp)
    if when is None:
        project.notes.add(project.file, f"{table}.timestamp", "not an ISO 8601 time; row skipped")
        return None
    if not is_step(step):
        project.notes.add(project.file, f"{table}.step", "not a step; the row is not imported")
        return None
    prefix = SYSTEM_PREFIX if table == "system_metrics" else ""
    found = row_values(project.notes, project.file, table, raw, prefix)
    if found is None or not (found[0] or found[1]):
        return None
    log_id = event_id(raw_id, table, run_key, step, timestamp, raw)
    return ImportedLog(log_id, step, when, found[0], found[1])


def _chunks(project: _Project, runs: dict[str, list[ImportedLog]], rows: int) -> Iterator[RunChunk]:
    """Each run's logs of one page, cut at ``CHUNK_VALUES`` values; the page's row count
    goes with its first chunk."""
    for name, logs in runs.items():
        start = size = 0
        for index, log in enumerate(logs):
            size += len(log.values) + len(log.invalid)
            if size > CHUNK_VALUES and index > start:
                yield _chunk(project, name, tuple(logs[start:index]), rows)
                start, size, rows = index, len(log.values) + len(log.invalid), 0
        yield _chunk(project, name, tuple(logs[start:]), rows)
        rows = 0


def _chunk(project: _Project, name: str, logs: tuple[ImportedLog, ...], rows: int) -> RunChunk:
    return project.chunk(name, min(log.time for log in logs), logs=logs, rows=rows)


def _alerts(project: _Project) -> Iterator[RunChunk]:
    have = project.columns["alerts"]
    optional = ", ".join(c if c in have else "NULL" for c in ("text", "level", "step", "alert_id"))
    columns = f"{project.run_key('alerts')}, run_name, timestamp, title, {optional}"
    after = 0
    while rows := project.page("alerts", columns, after):
        after = rows[-1][0]
        runs: dict[str, list[ImportedAlert]] = {}
        for row in rows:
            name = project.run_name(row[2])
            alert = _alert(project, row[1:]) if name is not None else None
            if name is not None and alert is not None:
                runs.setdefault(name, []).append(alert)
        counted = len(rows)
        for name, alerts in runs.items():
            started = min(alert.time for alert in alerts)
            yield project.chunk(name, started, alerts=tuple(alerts), rows=counted)
            counted = 0


def _alert(project: _Project, row: tuple[Any, ...]) -> ImportedAlert | None:
    run_key, _, timestamp, title, text, level, step, raw_id = row
    file, notes = project.file, project.notes
    when = parse_time(timestamp)
    title = cut_text(notes, file, "alerts.title", title, ALERT_TITLE_MAX_CHARS)
    level = level or "warn"  # Trackio's own default
    if when is None or not title or level not in ALERT_LEVELS:
        rule = "time" if when is None else "title" if not title else f"level {level!r}"
        notes.add(file, "alerts", f"an alert with no valid {rule}; not imported")
        return None
    if step is not None and not is_step(step):
        notes.add(file, "alerts.step", "not a step; the alert is kept without one")
        step = None
    text = cut_text(notes, file, "alerts.text", text, ALERT_TEXT_MAX_CHARS)
    alert_id = event_id(raw_id, "alerts", run_key, timestamp, title, text, level, step)
    return ImportedAlert(alert_id, title, text, cast(AlertLevel, level), step, when)


def _configured_only(project: _Project) -> Iterator[RunChunk]:
    """Runs with a config and no rows: Trackio lists them too (``init`` then nothing)."""
    if not {"run_name", "config"} <= project.columns["configs"]:
        return
    met = set(project.names)
    names = project.source.rows("SELECT DISTINCT run_name FROM configs")
    for (raw,) in names:
        if raw in met or not isinstance(raw, str):
            continue
        name = project.run_name(raw)
        if name is None:
            continue
        rows = project.source.rows(
            "SELECT created_at FROM configs WHERE run_name = ? ORDER BY id LIMIT 1", (raw,)
        )
        yield project.chunk(name, parse_time(rows[0][0] if rows else None) or 0.0)
