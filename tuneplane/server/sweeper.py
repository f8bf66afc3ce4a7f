"""The sweeper: expires trajectory bodies past their time, deletes them (and deleted and
orphaned ones) from blob storage, and records what it removed. A diagnosis of its own
failure is a log line: it never stops the server or changes a run."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from starlette.concurrency import run_in_threadpool

from tuneplane.blobs import BlobStoreUnavailable
from tuneplane.contract.limits import SWEEP_BATCH
from tuneplane.server.state import AppState
from tuneplane.store import sweeps
from tuneplane.store.trajectories import forget_keys

logger = logging.getLogger("tuneplane")
#: Seconds from server start to the first sweep.
FIRST_SWEEP_DELAY = 5.0


@dataclass(frozen=True, slots=True)
class Removed:
    deleted: int
    bytes: int
    failures: int


def _claim(state: AppState) -> list[sweeps.Removal]:
    with state.database.connect() as connection:
        return sweeps.claim_removals(connection, time.time())


async def remove_bodies(state: AppState) -> Removed:
    """Delete, batch by batch, every body that no row keeps stored any more."""
    deleted = size = failures = 0
    while True:
        removals = await run_in_threadpool(_claim, state)
        gone = []
        for removal in removals:
            try:
                await run_in_threadpool(state.blobs.delete, removal.key)
            except BlobStoreUnavailable as exc:
                failures += 1
                logger.warning("tuneplane: a trajectory body could not be deleted: %s", exc)
                break
            gone.append(removal.key)
            size += removal.bytes
        if gone:
            await state.database.write(forget_keys, gone)
        deleted += len(gone)
        if failures or len(removals) < SWEEP_BATCH:
            return Removed(deleted, size, failures)


async def sweep_once(state: AppState) -> tuple[int, Removed]:
    """Expire what is due, delete what is gone; record and log the sweep."""
    expired = 0
    while True:
        marked = await state.database.write(sweeps.expire, time.time())
        expired += marked
        if marked < SWEEP_BATCH:
            break
    removed = await remove_bodies(state)
    await state.database.write(
        sweeps.record_sweep, expired, removed.deleted, removed.bytes, removed.failures
    )
    if expired or removed.deleted or removed.failures:
        logger.info(
            "tuneplane: trajectory sweep: %d bodies expired, %d deleted (%d bytes), %d failed",
            expired,
            removed.deleted,
            removed.bytes,
            removed.failures,
        )
    return expired, removed


async def sweep_forever(state: AppState, interval: float) -> None:
    await asyncio.sleep(min(FIRST_SWEEP_DELAY, interval))
    while True:
        try:
            await sweep_once(state)
        except Exception as exc:  # the store is down, say: the next sweep tries again
            logger.warning("tuneplane: the trajectory sweep failed: %s", exc)
        await asyncio.sleep(interval)
