"""``POST /ingest``: the Arena worker-ingestion route."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tuneplane.contract.arena import (
    ALERT_LEVELS,
    CONFIG_NUMBER_KEYS,
    CONFIG_STRING_KEYS,
    parse_arena_batch,
)
from tuneplane.contract.errors import Unauthorized, Unavailable
from tuneplane.contract.ids import ID_PATTERN
from tuneplane.contract.json_body import decode_json_body
from tuneplane.contract.limits import (
    ALERT_TEXT_MAX_CHARS,
    ALERT_TITLE_MAX_CHARS,
    ARENA_BATCH_MAX_ITEMS,
    ARENA_BODY_MAX_BYTES,
    ARENA_EVENT_MAX_METRICS,
    STEP_MAX,
)
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


_ID: dict[str, Any] = {"type": "string", "pattern": f"^{ID_PATTERN}$"}
_STEP: dict[str, Any] = {"type": "integer", "minimum": 0, "maximum": STEP_MAX}
_CONFIG: dict[str, Any] = {
    "type": "object",
    "properties": {
        **{key: {"type": "string"} for key in CONFIG_STRING_KEYS},
        **{key: {"type": "number", "minimum": 0} for key in CONFIG_NUMBER_KEYS},
    },
    "additionalProperties": False,
}
_IDENTITY: dict[str, Any] = {"project": _ID, "run": _ID, "run_id": _ID, "config": _CONFIG}
#: The body's rules, as far as JSON Schema says them (one project and run per batch, and at
#: most 128 items in all, are checked by the route).
_BODY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "logs": {
            "type": "array",
            "maxItems": ARENA_BATCH_MAX_ITEMS,
            "items": {
                "type": "object",
                "required": ["project", "run", "step", "log_id", "metrics"],
                "properties": {
                    **_IDENTITY,
                    "step": _STEP,
                    "log_id": _ID,
                    "metrics": {
                        "type": "object",
                        "minProperties": 1,
                        "maxProperties": ARENA_EVENT_MAX_METRICS,
                        "additionalProperties": {"type": "number"},
                    },
                },
            },
        },
        "alerts": {
            "type": "array",
            "maxItems": ARENA_BATCH_MAX_ITEMS,
            "items": {
                "type": "object",
                "required": ["project", "run", "alert_id", "title", "level"],
                "properties": {
                    **_IDENTITY,
                    "alert_id": _ID,
                    "title": {"type": "string", "minLength": 1, "maxLength": ALERT_TITLE_MAX_CHARS},
                    "text": {"type": ["string", "null"], "maxLength": ALERT_TEXT_MAX_CHARS},
                    "level": {"enum": list(ALERT_LEVELS)},
                    "step": {"anyOf": [_STEP, {"type": "null"}]},
                },
            },
        },
    },
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
            "content": {"application/json": {"schema": _BODY}},
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
