"""Who may call what: user API keys, per-attempt ingest tokens and the web guard.

Three credentials, three scopes (docs/sdk-protocol.md). The Arena secret is checked by the
``/ingest`` route itself. An ingest token is accepted only under ``/api/v1/ingest/``; the
guard refuses it everywhere else before any route runs.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from fastapi import Request
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from tuneplane.contract.environment import INGEST_TOKEN_PREFIX
from tuneplane.contract.errors import IngestTokenRefused, TuneplaneError, Unauthorized
from tuneplane.server.prefix import route_path
from tuneplane.server.responses import error_response
from tuneplane.server.state import app_state
from tuneplane.store import credentials
from tuneplane.store.credentials import TokenScope
from tuneplane.store.database import Database

INGEST_PREFIX = "/api/v1/ingest/"


class AmbiguousCredential(TuneplaneError):
    status = 400
    code = "malformed"


def _authorization(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    values = [value for name, value in headers if name == b"authorization"]
    if len(values) > 1:
        raise AmbiguousCredential("authorization: send one Authorization header, not several")
    return values[0].decode("latin-1") if values else None


def bearer_credential(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """The credential of ``Authorization: Bearer <credential>``, or None.

    The one parser of the header, for the routes and the guard alike: the scheme is
    case-insensitive and may be followed by any run of spaces or tabs (HTTP whitespace);
    a request with two Authorization headers is refused rather than guessed at."""
    value = _authorization(headers)
    parts = value.split(maxsplit=1) if value is not None else []
    if len(parts) != 2 or parts[0].lower() != "bearer":
        return None
    return parts[1].strip()


def carries_ingest_token(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether the Authorization header holds an ingest token under any spelling: any
    scheme, any whitespace, or none at all."""
    value = _authorization(headers)
    return value is not None and any(word.startswith(INGEST_TOKEN_PREFIX) for word in value.split())


def bearer(request: Request) -> str | None:
    return bearer_credential(request.scope["headers"])


async def require_ingest_token(request: Request) -> TokenScope:
    """A FastAPI dependency: the run and attempt an ingest token writes to.

    Asynchronous, so a token already resolved costs no trip through the thread pool (a
    synchronous dependency would take one on every ingest request); only a token seen for
    the first time is looked up, on a worker thread. The cache only saves that lookup:
    whether the token may still write is decided inside each write's transaction
    (``credentials.write_as``)."""
    token = bearer(request)
    if token is None:
        raise Unauthorized("authorization: send 'Authorization: Bearer <ingest token>'")
    state = app_state(request)
    digest = credentials.hash_secret(token)
    scope = state.known_tokens.get(digest)
    if scope is None or scope.expires_at <= time.time():
        scope = await run_in_threadpool(_resolve_ingest_token, state.database, token)
        state.known_tokens[digest] = scope
    return scope


def _resolve_ingest_token(database: Database, token: str) -> TokenScope:
    with database.connect() as connection:
        return credentials.resolve_ingest_token(connection, token)


class IngestTokenGuard:
    """Refuses ingest tokens on every route outside ``/api/v1/ingest/`` (pure ASGI, so it
    costs nothing on the hot Arena route)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not route_path(scope).startswith(INGEST_PREFIX):
            refusal: TuneplaneError | None = None
            try:
                if carries_ingest_token(scope["headers"]):
                    refusal = IngestTokenRefused(
                        f"authorization: ingest tokens only authorize {INGEST_PREFIX}* routes"
                    )
            except AmbiguousCredential as exc:
                refusal = exc
            if refusal is not None:
                await error_response(refusal)(scope, receive, send)
                return
        await self.app(scope, receive, send)
