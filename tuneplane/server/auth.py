"""Who may call what: user API keys, per-attempt ingest tokens and the web guard.

Three credentials, three scopes (docs/sdk-protocol.md). The Arena secret is checked by the
``/ingest`` route itself. An ingest token is accepted only under ``/api/v1/ingest/``; the
guard refuses it everywhere else before any route runs.
"""

from __future__ import annotations

import time

from fastapi import Request
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from tuneplane.contract.environment import INGEST_TOKEN_PREFIX
from tuneplane.contract.errors import TuneplaneError, Unauthorized
from tuneplane.server.responses import error_response
from tuneplane.server.state import app_state
from tuneplane.store import credentials
from tuneplane.store.credentials import TokenScope
from tuneplane.store.database import Database

INGEST_PREFIX = "/api/v1/ingest/"


class Forbidden(TuneplaneError):
    status = 403
    code = "ingest_token"


def bearer(request: Request) -> str | None:
    scheme, _, credential = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not credential.strip():
        return None
    return credential.strip()


def require_user(request: Request) -> None:
    """A FastAPI dependency: a valid user API key."""
    key = bearer(request)
    if key is None:
        raise Unauthorized("authorization: send 'Authorization: Bearer <API key>'")
    state = app_state(request)
    digest = credentials.hash_secret(key)
    if digest in state.known_keys:
        return
    with state.database.connect() as connection:
        if not credentials.api_key_is_valid(connection, key):
            raise Unauthorized("authorization: the API key is not valid")
    state.known_keys.add(digest)


async def require_ingest_token(request: Request) -> TokenScope:
    """A FastAPI dependency: the run and attempt an ingest token writes to.

    Asynchronous, so a token already resolved costs no trip through the thread pool (a
    synchronous dependency would take one on every ingest request); only a token seen for
    the first time is looked up, on a worker thread."""
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
        if scope["type"] == "http" and not scope["path"].startswith(INGEST_PREFIX):
            for name, value in scope["headers"]:
                if name == b"authorization":
                    credential = value.decode("latin-1").partition(" ")[2].strip()
                    if credential.startswith(INGEST_TOKEN_PREFIX):
                        response = error_response(
                            Forbidden(
                                "authorization: ingest tokens only authorize "
                                f"{INGEST_PREFIX}* routes"
                            )
                        )
                        await response(scope, receive, send)
                        return
        await self.app(scope, receive, send)
