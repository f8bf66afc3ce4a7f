"""The purger: removes deleted runs and projects (store/purge.py) in the background, one
short transaction at a time, their trajectory bodies from blob storage before the rows
that index them. Woken by each deletion; also runs at start (a deletion that a restart
interrupted goes on) and every sweep interval (after a blob store outage, say)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from starlette.concurrency import run_in_threadpool

from tuneplane.server.state import AppState
from tuneplane.store import purge

logger = logging.getLogger("tuneplane")


def _pending(state: AppState) -> purge.Pending:
    with state.database.connect() as connection:
        return purge.pending(connection)


def _claim(state: AppState, run_id: int) -> list[tuple[int, str]]:
    with state.database.connect() as connection:
        return purge.claim_bodies(connection, run_id)


async def purge_run(state: AppState, run_id: int) -> None:
    """Purge one deleted run entirely (a blob store that fails stops it, to go on later)."""
    while claimed := await run_in_threadpool(_claim, state, run_id):
        for _id, key in claimed:
            await run_in_threadpool(state.blobs.delete, key)
        await state.database.write(purge.forget_trajectories, [i for i, _ in claimed], key=run_id)
    while await state.database.write(purge.purge_run_step, run_id, key=run_id):
        pass


async def purge_all(state: AppState) -> int:
    """Purge everything deleted; returns how many runs and projects went."""
    removed = 0
    while True:
        work = await run_in_threadpool(_pending, state)
        if not work.run_ids and not work.project_ids:
            return removed
        for run_id in work.run_ids:
            await purge_run(state, run_id)
            removed += 1
        for project_id in work.project_ids:
            await state.database.write(purge.purge_project_step, project_id)
            removed += 1


async def purge_forever(state: AppState, interval: float) -> None:
    """Purge whenever a deletion sets ``state.purge_wanted``, and every ``interval``."""
    while True:
        state.purge_wanted.clear()
        try:
            removed = await purge_all(state)
            if removed:
                logger.info("tuneplane: purged %d deleted runs and projects", removed)
        except Exception as exc:  # the store or the blob store is down: try again later
            logger.warning("tuneplane: purging deleted runs failed: %s", exc)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(state.purge_wanted.wait(), timeout=interval)
