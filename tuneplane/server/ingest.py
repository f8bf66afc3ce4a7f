"""``POST /ingest``: the Arena worker-ingestion route."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tuneplane.contract.arena import parse_arena_batch
from tuneplane.contract.errors import Unauthorized, Unavailable
from tuneplane.contract.json_body import decode_json_body
from tuneplane.contract.limits import ARENA_BODY_MAX_BYTES
from tuneplane.server.body import read_body
from tuneplane.server.responses import JSON
from tuneplane.server.state import app_state


def _authorize(request: Request) -> None:
    secret = app_state(request).settings.ingest_secret
    if secret is None:
        raise Unavailable(
            "ingestion is disabled: set TUNEPLANE_INGEST_SECRET (or TRACKIO_INGEST_TOKEN) "
            "on the server; reading stored runs keeps working"
        )
    header = request.headers.get("authorization", "")
    scheme, _, credential = header.partition(" ")
    if scheme.lower() != "bearer" or not credential:
        raise Unauthorized("authorization: send 'Authorization: Bearer <ingest secret>'")
    if not secret.matches(credential.strip()):
        raise Unauthorized("authorization: the ingest secret is not valid")


async def ingest(request: Request) -> Response:
    """Store a batch of 1-128 log events and alerts for one run (see docs/ingest.md)."""
    _authorize(request)
    body = await read_body(request, ARENA_BODY_MAX_BYTES)
    batch = parse_arena_batch(decode_json_body(body))
    state = app_state(request)
    outcome = await state.arena.ingest(batch)
    if outcome.points or outcome.alerts_new or outcome.run_created:
        state.live.notify(outcome.run.id)
    return JSON(outcome.to_json())


# The hottest route is a plain Starlette route: FastAPI's per-request machinery costs more
# than validating and storing a small batch. It is documented in OpenAPI by hand.
route = Route("/ingest", ingest, methods=["POST"])


def _error(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}},
    }


OPENAPI: dict[str, Any] = {
    "post": {
        "tags": ["ingest"],
        "summary": "Arena worker ingestion: log events and alerts of one run",
        "description": (
            "A JSON object with `logs` and/or `alerts` lists: 1-128 items for one run, at most "
            "256 KiB. Requires `Authorization: Bearer <TUNEPLANE_INGEST_SECRET>`. Retried "
            "`log_id` and `alert_id` values are counted as duplicates and change nothing. "
            "The full contract is in docs/ingest.md."
        ),
        "operationId": "ingest",
        "security": [{"ingestSecret": []}],
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"type": "object"}}},
        },
        "responses": {
            "200": {
                "description": "Stored; counts new and duplicate items",
                "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/IngestResult"}}
                },
            },
            "400": _error("Body is not a JSON object"),
            "401": _error("Missing or wrong ingest secret"),
            "409": _error("The batch would change the run's config"),
            "413": _error("Body larger than 256 KiB"),
            "422": _error("A rule is broken; every violation is named"),
            "503": _error("Ingestion is disabled: no secret configured"),
        },
    }
}
