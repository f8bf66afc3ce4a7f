"""The trajectory upload: one batch of an attempt's documents, each body in blob storage
before its index row commits, and every body no row holds discarded (store/trajectories.py
says how nothing is lost track of on the way)."""

from __future__ import annotations

import logging
import zlib

from starlette.concurrency import run_in_threadpool

from tuneplane.blobs import BlobStoreUnavailable
from tuneplane.contract.trajectories import Trajectory, digest
from tuneplane.server.state import AppState
from tuneplane.store.credentials import TokenScope, write_as
from tuneplane.store.trajectories import (
    IndexOutcome,
    Upload,
    forget_keys,
    new_body_key,
    plan_batch,
    record_pending,
    record_unstored,
    write_index,
)

logger = logging.getLogger("tuneplane")


async def upload_trajectories(
    state: AppState, scope: TokenScope, batch: list[Trajectory]
) -> IndexOutcome:
    """Store a parsed batch: plan which bodies are new, note their keys as pending, put
    them in the blob store, then write the index; on any failure the bodies written are
    discarded (and a blob store that refused counts the batch on its rounds as not
    stored)."""
    uploads = await run_in_threadpool(lambda: [_upload(t) for t in batch])
    wanted = await run_in_threadpool(_plan, state, scope, uploads)
    keys = {index: new_body_key(scope) for index in wanted}
    written = list(keys.values())
    try:
        if keys:
            await state.database.write(write_as, scope, record_pending, written, key=scope.run_id)
            await run_in_threadpool(_put_all, state, uploads, keys)
        outcome: IndexOutcome = await state.database.write(
            write_as,
            scope,
            write_index,
            scope,
            uploads,
            keys,
            state.settings.trajectory_days,
            key=scope.run_id,
        )
    except BaseException as exc:
        if written:
            await _discard(state, written)
        if isinstance(exc, BlobStoreUnavailable):
            await _note_unstored(state, scope, uploads)
        raise
    if outcome.unused_keys:
        await _discard(state, outcome.unused_keys)
    return outcome


def _upload(trajectory: Trajectory) -> Upload:
    body = trajectory.encoded()
    return Upload(trajectory, body, digest(body), zlib.compress(body, 1))


def _plan(state: AppState, scope: TokenScope, uploads: list[Upload]) -> list[int]:
    with state.database.connect() as connection:
        return plan_batch(connection, scope, uploads)


def _put_all(state: AppState, uploads: list[Upload], keys: dict[int, str]) -> None:
    for index, key in keys.items():
        state.blobs.put(key, uploads[index].compressed)


async def _discard(state: AppState, keys: list[str]) -> None:
    """Delete bodies no row holds; what cannot be deleted now the sweeper deletes later."""
    try:
        for key in keys:
            await run_in_threadpool(state.blobs.delete, key)
        await state.database.write(forget_keys, keys)
    except Exception as exc:  # the request's own error, if any, is the one to answer
        logger.info("tuneplane: %d trajectory bodies left for the sweeper (%s)", len(keys), exc)


async def _note_unstored(state: AppState, scope: TokenScope, uploads: list[Upload]) -> None:
    """Count the batch on its rounds as not stored (the producer may give up on it)."""
    try:
        await state.database.write(
            write_as, scope, record_unstored, scope, uploads, key=scope.run_id
        )
    except Exception as exc:  # the request's own error is the one to answer
        logger.info("tuneplane: trajectories not stored could not be counted (%s)", exc)
