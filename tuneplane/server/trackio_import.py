"""Trackio's files into the server's database: ``tuneplane import trackio [DIR]``, and the
import ``tuneplane serve`` runs in the background when its data directory holds Trackio
project databases (an Arena Space moved to tuneplane, ``TRACKIO_DIR=/data/trackio``).

The reader (``importers.trackio``) never writes Trackio's files; each chunk it yields is
one transaction of ``store.imports``. In the server the chunks go through the same writer
as requests, one at a time, so requests are served meanwhile and nothing waits on the
import to start. Both ways are idempotent: every start reads the files again and stores
only what is not stored yet.

Projects created by the server's own import are public, as Arena projects are: they are
the data the Space's public dashboard served. ``tuneplane import trackio`` creates them as
the Trackio protocol does, with ``TUNEPLANE_DEFAULT_VISIBILITY`` (or ``--visibility``).
Projects that exist keep their visibility and members.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

from sqlalchemy.engine import make_url

from tuneplane.contract.access import Visibility
from tuneplane.contract.imported import ImportTotals, RunChunk
from tuneplane.importers.trackio import (
    TrackioDatabase,
    find_databases,
    read_database,
    require_databases,
)
from tuneplane.importers.trackio_rows import Notes
from tuneplane.server.settings import TRACKIO_IMPORT, Settings
from tuneplane.server.state import AppState
from tuneplane.store.database import Database
from tuneplane.store.imports import write_chunk
from tuneplane.store.runs import ProjectSetup

logger = logging.getLogger("tuneplane")

Progress = Callable[[int, int], None]


def _own_files(settings: Settings) -> tuple[Path, ...]:
    """The server's own SQLite database, never a Trackio one."""
    url = make_url(settings.database_url)
    if url.get_backend_name() == "sqlite" and url.database:
        return (Path(url.database),)
    return ()


def _chunks(databases: list[TrackioDatabase], notes: Notes) -> Iterator[RunChunk]:
    for database in databases:
        yield from read_database(database, notes)


def import_directory(
    settings: Settings,
    directory: Path,
    *,
    visibility: Visibility | None = None,
    progress: Progress | None = None,
) -> tuple[ImportTotals, Notes]:
    """Import every Trackio project database in ``directory`` into the settings' database
    (migrated first). Raises ``TrackioDirectoryError`` for a directory that holds none."""
    notes = Notes()
    databases = require_databases(directory, notes, skip=_own_files(settings))
    setup = ProjectSetup(visibility or settings.default_visibility, None)
    totals = ImportTotals()
    total = sum(database.rows for database in databases)
    done = 0
    database = Database(settings.database_url)
    try:
        database.migrate()
        for chunk in _chunks(databases, notes):
            totals.add(chunk, database.run_write(write_chunk, chunk, setup))
            done += chunk.rows
            if progress is not None and chunk.rows:
                progress(min(done, total), total)
    finally:
        database.close()
    if progress is not None and done < total:
        progress(total, total)
    return totals, notes


async def import_on_start(state: AppState) -> ImportTotals | None:
    """The server's background import of its data directory's Trackio databases (none:
    nothing said, nothing done). Logs one line when it starts and one when it ends; a
    failure is a log line too, never the server's."""
    settings = state.settings
    notes = Notes()
    try:
        databases = await asyncio.to_thread(
            find_databases, settings.data_dir, notes, skip=_own_files(settings)
        )
        if not databases:
            return None
        logger.info(
            "tuneplane: importing %d Trackio project databases from %s in the background "
            "(new projects are public, as Arena projects are; %s=off turns this off)",
            len(databases),
            settings.data_dir,
            TRACKIO_IMPORT.name,
        )
        totals = await _write_all(state, databases, notes)
    except Exception as exc:  # the server goes on serving; the next start tries again
        logger.error("tuneplane: the Trackio import stopped: %s", exc)
        return None
    logger.info("tuneplane: Trackio import done: %s", totals.summary())
    for line in notes.lines():
        logger.warning("tuneplane: Trackio import: %s", line)
    return totals


async def _write_all(
    state: AppState, databases: list[TrackioDatabase], notes: Notes
) -> ImportTotals:
    setup = ProjectSetup("public", None)
    totals = ImportTotals()
    chunks = _chunks(databases, notes)
    while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
        key = (chunk.project, chunk.run)
        outcome = await state.database.write(write_chunk, chunk, setup, key=key)
        totals.add(chunk, outcome)
        if outcome.points or outcome.invalid or outcome.alerts_new:
            state.live.notify(outcome.run_id)
    return totals
