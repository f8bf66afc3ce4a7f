"""Signing in and out: the session cookie, the first administrator's one-time link, and
opening a share link in a browser.

``GET /api/v1/session`` says who the browser is signed in as and hands the page its CSRF
token; ``POST`` signs in (login and password), ``DELETE`` signs out. Sign-in attempts are
counted per account and per address in the database, so every server process shares the
limit, and an attempt is counted before its password is checked, so parallel tries check
no more passwords than the limit allows (server/forwarded.py says which address counts).
A password is checked on a worker thread (argon2 is slow on purpose) and never logged.
"""

from __future__ import annotations

import time
from typing import Any, Final

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from tuneplane.contract.access import SHARE_LINK_PREFIX
from tuneplane.contract.errors import InvalidInput, Unauthorized, Violation
from tuneplane.contract.limits import SESSION_DAYS
from tuneplane.server.access import SESSION_COOKIE, SHARE_COOKIE, caller_of, csrf_token
from tuneplane.server.body import read_json
from tuneplane.server.forwarded import client_address
from tuneplane.server.guard import GuardedRoute
from tuneplane.server.prefix import cookie_path
from tuneplane.server.responses import JSON
from tuneplane.server.state import app_state
from tuneplane.store import access, accounts

router = APIRouter(prefix="/api/v1", tags=["access"], route_class=GuardedRoute)

_LOGIN_MAX: Final = 320
_SIGN_IN_BODY_MAX: Final = 4096


def _text(body: Any, field: str, limit: int) -> str:
    value = body.get(field) if isinstance(body, dict) else None
    if not isinstance(value, str) or not value or len(value) > limit:
        raise InvalidInput((Violation(field, f"must be a string of 1-{limit} characters"),))
    return value


def set_cookie(response: Response, request: Request, name: str, value: str, days: float) -> None:
    response.set_cookie(
        name,
        value,
        max_age=int(days * 86_400),
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
        path=cookie_path(request),
    )


@router.get("/session")
def whoami(request: Request) -> Response:
    """Who this browser (or credential) is: signed in or not, and the CSRF token its
    signed-in writes must send as ``X-CSRF-Token``."""
    caller = caller_of(request)
    state = app_state(request)
    body: dict[str, object] = {
        "signed_in": caller.actor.signed_in,
        "credential": caller.actor.credential,
        "login": caller.login,
        "is_admin": caller.actor.is_admin,
        "first_admin_pending": _first_admin_pending(request),
        # The provider's name for a "Sign in with …" button, when single sign-on is set up.
        "single_sign_on": state.settings.oidc.name if state.settings.oidc else None,
    }
    if caller.session_token is not None:
        body["csrf_token"] = csrf_token(caller.session_token)
    return JSON(body)


def _first_admin_pending(request: Request) -> bool:
    """Whether no account exists yet. The token is spent once one does, however it came
    (another server process's link, ``tuneplane user add``, a single sign-on)."""
    first_admin = app_state(request).first_admin
    if not first_admin.pending:
        return False
    with app_state(request).database.connect() as connection:
        if accounts.count_users(connection) == 0:
            return True
    first_admin.spend()
    return False


@router.post("/session")
async def sign_in(request: Request) -> Response:
    """Sign in with a local account: ``{"login": …, "password": …}``."""
    body = await read_json(request, _SIGN_IN_BODY_MAX)
    login = _text(body, "login", _LOGIN_MAX)
    password = _text(body, "password", 1024)
    state = app_state(request)
    database = state.database
    address = client_address(request, state.settings.trusted_proxies)
    subjects = (f"account:{login}", f"address:{address}")
    # Counted as failed until the password proves right: a request that dies midway
    # (a client gone, a store outage) leaves its attempt counted.
    reserved = await database.write(accounts.reserve_sign_in_attempt, subjects)
    with database.connect() as connection:
        user_id, digest = accounts.stored_password_hash(connection, login)
    valid = await run_in_threadpool(accounts.verify_password, digest, password)
    if user_id is None or not valid:
        raise Unauthorized("sign-in: wrong login or password (or the account is disabled)")
    token = await database.write(_open_session, reserved, user_id)
    response = JSON({"signed_in": True, "login": login, "csrf_token": csrf_token(token)})
    set_cookie(response, request, SESSION_COOKIE, token, SESSION_DAYS)
    return response


def _open_session(connection: Any, reserved: list[int], user_id: int) -> str:
    accounts.forget_sign_in_attempt(connection, reserved)
    return accounts.create_session(connection, user_id)


@router.delete("/session")
async def sign_out(request: Request) -> Response:
    """End this browser's session on the server (the cookie is useless from now on)."""
    caller = caller_of(request)
    if caller.session_token is not None:
        await app_state(request).database.write(accounts.end_session, caller.session_token)
    response = JSON({"signed_in": False})
    response.delete_cookie(SESSION_COOKIE, path=cookie_path(request))
    response.delete_cookie(SHARE_COOKIE, path=cookie_path(request))
    return response


@router.post("/setup")
async def create_first_admin(request: Request) -> Response:
    """The first administrator's account, with the one-time token ``tuneplane serve``
    printed: ``{"token": …, "login": …, "password": …}``. Once any account exists the token
    is void."""
    body = await read_json(request, _SIGN_IN_BODY_MAX)
    token = _text(body, "token", 256)
    login = _text(body, "login", _LOGIN_MAX)
    password = _text(body, "password", 1024)
    state = app_state(request)
    if not state.first_admin.matches(token):
        raise Unauthorized("token: not this server's first-administrator token, or already used")
    digest = await run_in_threadpool(accounts.hash_password, password)
    user, session = await state.database.write(_add_first_admin, login, digest)
    state.first_admin.spend()
    response = JSON({"signed_in": True, "login": user.login, "csrf_token": csrf_token(session)})
    set_cookie(response, request, SESSION_COOKIE, session, SESSION_DAYS)
    return response


def _add_first_admin(connection: Any, login: str, digest: str) -> tuple[accounts.User, str]:
    if accounts.count_users(connection) > 0:
        raise Unauthorized("token: an account exists already; sign in instead")
    user = accounts.add_user(connection, login, password_hash=digest, is_admin=True)
    return user, accounts.create_session(connection, user.id)


@router.post("/share-session")
async def open_share_link(request: Request) -> Response:
    """Exchange a share link's token for a cookie that opens its run in this browser
    (``{"token": "tpl_…"}``); answers the project and run it opens. The token travels in
    the link's fragment, which browsers never send or put in a Referer."""
    body = await read_json(request, _SIGN_IN_BODY_MAX)
    token = _text(body, "token", 256)
    if not token.startswith(SHARE_LINK_PREFIX):
        raise InvalidInput((Violation("token", f"must start with {SHARE_LINK_PREFIX}"),))
    with app_state(request).database.connect() as connection:
        target = access.share_link_target(connection, token)
    if target is None:
        raise Unauthorized("token: the share link is not valid (revoked or expired)")
    project, run, expires_at = target
    response = JSON({"project": project, "run": run, "expires_at": expires_at})
    days = SESSION_DAYS if expires_at is None else max(0.0, (expires_at - time.time()) / 86_400)
    set_cookie(response, request, SHARE_COOKIE, token, min(days, SESSION_DAYS))
    return response
