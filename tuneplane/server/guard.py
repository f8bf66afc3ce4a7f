"""The guard every route runs: its rule in ``access.RULES`` decides who may call it.

Where the decision is made: a route built by :class:`GuardedRoute` (a plain function, run
on a worker thread) decides on that thread, on the connection and read transaction its own
reads then use (``Database.hold``): one trip through the thread pool and one connection
per request, where deciding first on a thread and connection of its own cost small reads
about a third of their requests per second. Every other route (asynchronous ones, streams,
writes) is decided before it runs, on a worker thread.

The asynchronous part, :func:`authorize`, runs first either way: the rule lookup, the
routes that need no database, and refusing NUL in names. A request that fails before its
route runs (a bad parameter) is decided then, by :func:`decided_first`, so that a caller
who may not see a project learns nothing more from a bad query than from a good one.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, Final

from fastapi import Request
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from tuneplane.contract.errors import Forbidden, TuneplaneError
from tuneplane.server.access import (
    Rule,
    check_csrf,
    check_origin,
    decide_rule,
    resolve_caller,
    rule_for,
)
from tuneplane.server.params import refuse_nul
from tuneplane.server.state import app_state

_OWN: Final = frozenset({"ingest-token", "arena-secret", "trackio-token", "anyone"})
#: The request whose decision its route makes, set by :func:`authorize` for that route.
_PENDING: ContextVar[Request | None] = ContextVar("tuneplane_guard_pending", default=None)
_DECIDES: Final = "__tuneplane_decides__"


async def authorize(request: Request) -> None:
    """A dependency of every route: find the route's rule and decide, or leave the decision
    to the route when it makes it on its own connection."""
    route = request.scope.get("route")
    path = getattr(route, "path", None)
    rule = rule_for(request.method, path) if path is not None else None
    if rule is None:
        raise Forbidden(f"no access rule for {request.method} {path}: refused")
    if rule.action in _OWN:
        return
    if rule.action == "sign-in":
        check_origin(request)  # another site must not sign a browser in (login CSRF)
        return
    await refuse_nul(request)  # before any name is looked up
    if getattr(getattr(route, "endpoint", None), _DECIDES, False):
        request.state.pending_rule = rule
        _PENDING.set(request)
        return
    await run_in_threadpool(_decide, request, rule)


def _decide(request: Request, rule: Rule) -> None:
    with app_state(request).database.hold():
        _decide_on(request, rule)


def _decide_on(request: Request, rule: Rule) -> None:
    """Decide on the held connection (``Database.connect`` answers it)."""
    request.state.pending_rule = None
    request.state.facts = {}
    with app_state(request).database.connect() as connection:
        caller = resolve_caller(connection, request)
        request.state.caller = caller
        check_csrf(request, caller)
        decide_rule(connection, request, caller.actor, rule)


def _deciding(endpoint: Callable[..., Any]) -> Callable[..., Any]:
    """``endpoint`` preceded by the decision, on its thread and its connection."""

    @functools.wraps(endpoint)
    def decided(*args: Any, **kwargs: Any) -> Any:
        request = _PENDING.get()
        rule = None if request is None else getattr(request.state, "pending_rule", None)
        if request is None or rule is None:
            return endpoint(*args, **kwargs)
        with app_state(request).database.hold():
            _decide_on(request, rule)
            return endpoint(*args, **kwargs)

    setattr(decided, _DECIDES, True)
    return decided


def _plain(endpoint: Callable[..., Any]) -> bool:
    """A function FastAPI calls on a worker thread and whose work ends when it returns."""
    return not (
        inspect.iscoroutinefunction(endpoint)
        or inspect.isgeneratorfunction(endpoint)
        or inspect.isasyncgenfunction(endpoint)
        or getattr(endpoint, _DECIDES, False)
    )


class GuardedRoute(APIRoute):
    """A route whose access decision is made on its own thread and connection, when it is a
    plain function (``APIRouter(route_class=GuardedRoute)``)."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, _deciding(endpoint) if _plain(endpoint) else endpoint, **kwargs)


Handler = Callable[[Request, Exception], Awaitable[Response]]


def decided_first(handler: Handler, refused: Handler) -> Handler:
    """An error handler that first makes a decision its route did not get to make: a
    refusal (``refused`` answers it) comes before whatever went wrong."""

    async def handle(request: Request, exc: Exception) -> Response:
        rule: Rule | None = getattr(request.state, "pending_rule", None)
        if rule is not None:
            try:
                await run_in_threadpool(_decide, request, rule)
            except TuneplaneError as refusal:
                return await refused(request, refusal)
        return await handler(request, exc)

    return handle
