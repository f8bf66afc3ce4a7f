"""Trajectories: upload (ingest token), the index (anyone who may read the run), bodies
and the search within one (members with the ``content`` permission) and early deletion
(owners).

The upload is one function of its own (server/trajectory_upload.py): a body is in blob
storage before its index row commits."""

from __future__ import annotations

import logging
import time
import zlib
from dataclasses import asdict
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Path, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from tuneplane.blobs import BlobMissing, BlobStoreUnavailable
from tuneplane.contract.errors import InvalidInput, Violation
from tuneplane.contract.limits import (
    INGEST_BODY_MAX_BYTES,
    QUERY_INTEGER_MAX,
    STEP_MAX,
    SWEEP_BATCH,
    TRAJECTORY_INDEX_PAGE_MAX,
    TRAJECTORY_MAX_MESSAGES,
    TRAJECTORY_PAGE_DEFAULT,
    TRAJECTORY_PAGE_MAX,
)
from tuneplane.contract.trajectories import (
    CATEGORIES,
    SCOPES,
    parse_trajectories,
    search_query_problem,
)
from tuneplane.evaluation.alignment import first_failed_tool_call
from tuneplane.evaluation.transcript import search, totals
from tuneplane.server.auth import require_ingest_token
from tuneplane.server.body import read_json
from tuneplane.server.guard import GuardedRoute
from tuneplane.server.responses import JSON
from tuneplane.server.state import AppState, app_state
from tuneplane.server.sweeper import remove_bodies
from tuneplane.server.trajectory_upload import upload_trajectories
from tuneplane.store import catalog, sweeps
from tuneplane.store.credentials import TokenScope
from tuneplane.store.trajectory_reads import get_row, index_json, list_index, steps_with_rollouts

router = APIRouter(prefix="/api/v1", tags=["trajectories"], route_class=GuardedRoute)
RUN = "/projects/{project}/runs/{run}"
Scope = Annotated[TokenScope, Depends(require_ingest_token)]
Attempt = Annotated[int | None, Query(ge=1, le=2**31 - 1, description="execution attempt")]
Count = Annotated[int | None, Query(ge=0, le=QUERY_INTEGER_MAX)]
Step = Annotated[int | None, Query(ge=0, le=STEP_MAX)]
TrajectoryId = Annotated[int, Path(ge=1, le=QUERY_INTEGER_MAX)]
logger = logging.getLogger("tuneplane")


async def check_blob_store(state: AppState) -> None:
    """Say at start, in the server's log, that the blob store takes no body: outcomes
    would land while their trajectories are refused. Readiness (``/healthz``) says it too,
    for as long as it lasts."""
    try:
        await run_in_threadpool(state.blobs.ping)
    except BlobStoreUnavailable as exc:
        logger.warning(
            "tuneplane: blob store unavailable (%s): %s; trajectory bodies cannot be stored "
            "until it answers (/healthz answers 503 meanwhile)",
            exc.where,
            exc.detail,
        )


@router.post("/ingest/trajectories")
async def ingest_trajectories(request: Request, scope: Scope) -> Response:
    """Up to 16 trajectory documents of the attempt; an identity already stored with the
    same body is a duplicate, with a different one a 409. ``not_retained`` counts documents
    indexed without their text (the round's text cap chose other trials)."""
    batch = parse_trajectories(await read_json(request, INGEST_BODY_MAX_BYTES))
    state = app_state(request)
    outcome = await upload_trajectories(state, scope, batch)
    if outcome.new or outcome.not_retained:
        state.live.notify(scope.run_id)
    return JSON(outcome.to_json())


def trajectory_filters(
    scope: str | None = None,
    attempt: Attempt = None,
    round_id: str | None = None,
    trial_id: str | None = None,
    trial_attempt: Count = None,
    category: str | None = None,
    step: Step = None,
    trajectory_id: str | None = None,
) -> dict[str, Any]:
    """The index filters a route takes, checked."""
    if scope is not None and scope not in SCOPES:
        raise InvalidInput((Violation("scope", f"must be one of {', '.join(SCOPES)}"),))
    if category is not None and category not in CATEGORIES:
        raise InvalidInput((Violation("category", f"must be one of {', '.join(CATEGORIES)}"),))
    return {
        "scope": scope,
        "attempt": attempt,
        "round_id": round_id,
        "trial_id": trial_id,
        "trial_attempt": trial_attempt,
        "category": category,
        "step": step,
        "trajectory_id": trajectory_id,
    }


Filters = Annotated[dict[str, Any], Depends(trajectory_filters)]


@router.get(RUN + "/trajectories")
def list_trajectories(
    request: Request,
    project: str,
    run: str,
    filters: Filters,
    after: Count = None,
    limit: Annotated[int, Query(ge=1, le=TRAJECTORY_INDEX_PAGE_MAX)] = 100,
) -> Response:
    """The trajectory index of a run, filtered over the whole index before pagination
    (scope, execution attempt, round, trial, trial attempt, training category, step,
    trajectory ID),
    by ascending ID; pass ``next`` as ``after`` for the next page. No bodies: each row
    says what became of its body. ``steps`` lists the latest steps with rollouts (on the
    first page of ``scope=training``)."""
    with app_state(request).database.connect() as connection:
        run_id = catalog.get_run(connection, project, run).id
        page = list_index(connection, run_id, filters, after, limit)
        # The step picker is the first page's: the next ones need not read it again.
        wanted = filters["scope"] == "training" and after is None
        steps = steps_with_rollouts(connection, run_id) if wanted else None
    return JSON(
        {
            "items": page.rows,
            "next": page.next_after,
            "total": page.total,
            "total_is_lower_bound": page.more,
            "steps": steps,
        }
    )


def stored_document(
    state: AppState, run_id: int, trajectory: int, where: str
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A trajectory's index answer and its body's document (None when the body is not
    retained, expired or deleted)."""
    with state.database.connect() as connection:
        row = get_row(connection, run_id, trajectory, where)
    answer = index_json(row, time.time())
    if answer["body"]["state"] != "stored":
        return answer, None
    try:
        document: dict[str, Any] = orjson.loads(zlib.decompress(state.blobs.get(row.body_key)))
        return answer, document
    except BlobMissing:
        # Swept between the two reads? Then the row says so now; else it is lost.
        with state.database.connect() as connection:
            answer = index_json(get_row(connection, run_id, trajectory, where), time.time())
        if answer["body"]["state"] == "stored":
            raise BlobStoreUnavailable(
                state.blobs.location, f"the body of trajectory {trajectory} is missing"
            ) from None
        return answer, None


def stored_messages(
    state: AppState, run_id: int, trajectory: int, where: str
) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    """A trajectory's index answer and every message of its body (None when the body is
    not retained, expired or deleted)."""
    answer, document = stored_document(state, run_id, trajectory, where)
    return answer, None if document is None else document["messages"]


def _body_of(
    request: Request, project: str, run: str, trajectory: int
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    state = app_state(request)
    with state.database.connect() as connection:
        run_id = catalog.get_run(connection, project, run).id
    return stored_document(state, run_id, trajectory, f"{project}/{run}")


@router.get(RUN + "/trajectories/{trajectory}")
def read_trajectory(
    request: Request,
    project: str,
    run: str,
    trajectory: TrajectoryId,
    offset: Annotated[int, Query(ge=0, le=TRAJECTORY_MAX_MESSAGES)] = 0,
    limit: Annotated[int, Query(ge=1, le=TRAJECTORY_PAGE_MAX)] = TRAJECTORY_PAGE_DEFAULT,
) -> Response:
    """One trajectory's index row and a page of its messages (``offset``, ``limit``);
    ``messages`` is null when its body is not retained, expired or deleted (``body``
    says which and since when). ``totals`` (tokens, time) and ``first_failed_tool_call``
    are the whole body's, whichever the page."""
    answer, document = _body_of(request, project, run, trajectory)
    messages = None if document is None else document["messages"]
    failed = None if messages is None else first_failed_tool_call(messages)
    page = None if messages is None else messages[offset : offset + limit]
    end = offset + limit
    return JSON(
        {
            **answer,
            "messages": page,
            "offset": offset,
            "limit": limit,
            "next_offset": end if messages is not None and end < len(messages) else None,
            "totals": None if document is None else totals(document),
            "first_failed_tool_call": None if failed is None else asdict(failed),
        }
    )


@router.get(RUN + "/trajectories/{trajectory}/search")
def search_trajectory(
    request: Request,
    project: str,
    run: str,
    trajectory: TrajectoryId,
    q: str | None = None,
) -> Response:
    """Where ``q`` occurs (any case, as typed) in the trajectory's messages: ``matches``
    lists each message field that holds it (``index``, ``field``, ``count``, a
    ``snippet`` around the first occurrence), ``messages`` the indexes of the messages
    with a match. Both are null when the body is not stored (``body`` says why)."""
    problem = search_query_problem(q)
    if problem is not None or q is None:
        raise InvalidInput((Violation("q", problem or "required"),))
    answer, document = _body_of(request, project, run, trajectory)
    found = None if document is None else search(document["messages"], q)
    return JSON(
        {
            "id": answer["id"],
            "body": answer["body"],
            "query": q,
            "matches": found,
            "messages": None if found is None else sorted({m["index"] for m in found}),
            "occurrences": None if found is None else sum(m["count"] for m in found),
        }
    )


@router.delete(RUN + "/trajectories")
async def delete_trajectory_bodies(
    request: Request,
    project: str,
    run: str,
    filters: Filters,
) -> Response:
    """Delete the bodies of a run, or those matching the index filters (an execution
    attempt, round, trial, step, …), now. Their index rows, result counts and outcome
    metadata stay; each reads "deleted on …"."""
    state = app_state(request)

    def find_run() -> int:
        with state.database.connect() as connection:
            return catalog.get_run(connection, project, run).id

    run_id = await run_in_threadpool(find_run)
    deleted = 0
    while True:
        marked = await state.database.write(sweeps.mark_deleted, run_id, filters, key=run_id)
        deleted += marked
        if marked < SWEEP_BATCH:
            break
    removed = await remove_bodies(state)
    if deleted:
        state.live.notify(run_id)
    return JSON({"deleted": deleted, "removed_now": removed.deleted})
