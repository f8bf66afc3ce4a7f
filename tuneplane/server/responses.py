"""JSON responses and the one error shape."""

from __future__ import annotations

import logging
from typing import Any

import orjson
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from tuneplane.contract.errors import TuneplaneError, Violation
from tuneplane.server.pages import page_response
from tuneplane.server.state import app_state
from tuneplane.store.errors import classify

log = logging.getLogger("tuneplane.server")


class JSON(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def error_response(error: TuneplaneError) -> JSON:
    headers: dict[str, str] = {}
    if error.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    # Errors that say when to come back (the store is unavailable, the server is busy).
    retry_after: int | None = getattr(error, "retry_after", None)
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    # Errors after which the rest of the request is not worth reading (a trickled body).
    if getattr(error, "close_connection", False):
        headers["Connection"] = "close"
    return JSON(error.to_json(), status_code=error.status, headers=headers or None)


async def on_tuneplane_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, TuneplaneError)
    if _is_page(request):
        # A page refused (a private project, an account page before signing in) is the
        # dashboard's shell with the refusal's status: the page says why, from the API.
        return page_response(request, exc.status)
    return error_response(exc)


def _is_page(request: Request) -> bool:
    route = request.scope.get("route")
    return route is not None and getattr(route, "include_in_schema", True) is False


def _field(location: tuple[Any, ...] | list[Any]) -> str:
    parts = [str(p) for p in location]
    return ".".join(parts[1:] if parts and parts[0] in {"query", "path", "body"} else parts)


async def on_validation_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    violations = tuple(
        Violation(_field(item.get("loc", ())), str(item.get("msg", "invalid")))
        for item in exc.errors()
    )
    error = TuneplaneError(str(violations[0]) if violations else "invalid request", violations)
    error.status, error.code = 422, "invalid"
    return error_response(error)


async def on_http_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    error = TuneplaneError(str(exc.detail))
    error.status = exc.status_code
    error.code = "not_found" if exc.status_code == 404 else "http_error"
    return error_response(error)


async def on_store_failure(request: Request, exc: Exception) -> Response:
    """An OS or SQLAlchemy error that did not pass through the engine (a full disk under
    a file, the connection pool timing out): 503 when it means the store cannot answer.
    Anything else is re-raised, to be answered and logged as unexpected."""
    error = classify(exc)
    if error is None:
        raise exc
    app_state(request).database.outage.failed(error)
    return error_response(error)


async def on_client_disconnect(request: Request, _exc: Exception) -> Response:
    # The client went away mid-body: nothing is stored and nobody is left to answer.
    log.debug("client disconnected during %s %s", request.method, request.url.path)
    return Response(status_code=499)


async def on_unexpected_error(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    response = error_response(TuneplaneError("internal server error"))
    # Sent from outside every middleware, so the one adding this header never sees it.
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response
