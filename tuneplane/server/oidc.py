"""Single sign-on with one OpenID Connect provider, through Authlib.

``GET /sign-in/oidc`` sends the browser to the provider (authorization code flow with PKCE,
``state`` and ``nonce``; the provider's endpoints and keys come from
``<issuer>/.well-known/openid-configuration``). ``GET /sign-in/oidc/callback`` exchanges the
code, has Authlib check the ID token (its signature against the provider's JWKS, ``iss``,
``aud``, ``exp``, ``nonce``), asks the allow-list (``contract/oidc.py``), finds or creates
the account by (issuer, subject), and signs the browser in with the same session cookie a
password sign-in gets.

Between the two requests the flow (state, nonce, PKCE verifier, where to go next) lives in
the browser: a cookie of its own (HttpOnly, SameSite=Lax, path ``/sign-in/oidc``, ten
minutes), signed with HMAC-SHA256 under a key derived from the client secret. So any
server process configured for this provider can finish a sign-in another one started, and
nothing is stored for a sign-in that is never finished.

A refusal (not on the allow-list, a disabled account, the provider's own error, a state
that does not match) goes back to the sign-in page with a reason the page explains; a
provider that cannot be reached is a 503 naming it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

import httpx2
from authlib.integrations.base_client import OAuthError
from authlib.integrations.starlette_client import OAuth
from fastapi import APIRouter, Request
from joserfc.errors import JoseError
from sqlalchemy import Connection
from starlette.responses import RedirectResponse, Response

from tuneplane.contract import oidc
from tuneplane.contract.errors import Conflict, NotFound, Unavailable
from tuneplane.contract.limits import SESSION_DAYS
from tuneplane.server.access import SESSION_COOKIE
from tuneplane.server.guard import GuardedRoute
from tuneplane.server.prefix import cookie_path, local_address
from tuneplane.server.settings import OidcSettings
from tuneplane.server.signin import set_cookie
from tuneplane.server.state import app_state
from tuneplane.store import accounts

log = logging.getLogger("tuneplane.server")

# In the API's description (unlike the pages), so a refusal here is the JSON error naming
# its reason (a provider that is down, say), not the dashboard's shell.
router = APIRouter(tags=["access"], route_class=GuardedRoute)

FLOW_COOKIE: Final = "tuneplane_oidc"
_FLOW_PATH: Final = "/sign-in/oidc"
_CALLBACK: Final = "/sign-in/oidc/callback"
_SCOPE: Final = "openid email profile"
_TIMEOUT_SECONDS: Final = 10.0
_SUBJECT_MAX: Final = 255  # the users table's column
_DISPLAY_NAME_MAX: Final = 200
_EMAIL_MAX: Final = 320


class Refused(Exception):
    """A sign-in that goes back to the sign-in page, with the reason it explains."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Flow:
    """What the callback must find again: sent to the provider, kept in the flow cookie."""

    state: str
    nonce: str
    verifier: str
    next: str
    started: float


class Provider:
    """The configured provider: Authlib's client for it and the flow cookie's key."""

    def __init__(self, settings: OidcSettings) -> None:
        self.settings = settings
        secret = settings.client_secret.reveal()
        self.client: Any = OAuth().register(
            "sso",
            server_metadata_url=f"{settings.issuer}/.well-known/openid-configuration",
            client_id=settings.client_id,
            client_secret=secret,
            client_kwargs={
                "scope": _SCOPE,
                "code_challenge_method": "S256",
                "timeout": _TIMEOUT_SECONDS,
            },
        )
        self._key = hmac.new(secret.encode(), b"tuneplane-oidc-flow", hashlib.sha256).digest()

    async def metadata(self) -> dict[str, Any]:
        """The discovery document (Authlib keeps it once read); its issuer must be ours."""
        metadata: dict[str, Any] = await self.client.load_server_metadata()
        if str(metadata.get("issuer", "")).rstrip("/") != self.settings.issuer:
            raise Unavailable(
                f"single sign-on: {self.settings.issuer} names another issuer in its "
                f"discovery document ({metadata.get('issuer')!r}); check TUNEPLANE_OIDC_ISSUER"
            )
        return metadata

    def seal(self, flow: Flow) -> str:
        payload = json.dumps([flow.state, flow.nonce, flow.verifier, flow.next, flow.started])
        body = base64.urlsafe_b64encode(payload.encode()).decode()
        return f"{body}.{self._signature(body)}"

    def unseal(self, cookie: str | None) -> Flow | None:
        """The flow in the cookie, or None when it is missing, edited, or too old."""
        body, _, signature = (cookie or "").partition(".")
        if not body or not hmac.compare_digest(signature.encode(), self._signature(body).encode()):
            return None
        try:
            state, nonce, verifier, next_, started = json.loads(base64.urlsafe_b64decode(body))
        except ValueError:
            return None
        if not isinstance(started, float) or time.time() - started > oidc.FLOW_SECONDS:
            return None
        return Flow(str(state), str(nonce), str(verifier), oidc.safe_next(str(next_)), started)

    def _signature(self, body: str) -> str:
        return hmac.new(self._key, body.encode(), hashlib.sha256).hexdigest()


def _provider(request: Request) -> Provider:
    settings = app_state(request).settings.oidc
    if settings is None:
        raise NotFound("single sign-on: not configured on this server (TUNEPLANE_OIDC_ISSUER)")
    provider: Provider | None = getattr(request.app.state, "oidc_provider", None)
    if provider is None or provider.settings is not settings:
        provider = Provider(settings)
        request.app.state.oidc_provider = provider
    return provider


def _redirect_uri(request: Request) -> str:
    """The callback's URL as the browser reaches it: through a proxy, its scheme and host
    come from the forwarded headers (uvicorn's proxy headers) and the path has the prefix."""
    return f"{request.url.scheme}://{request.url.netloc}{local_address(request, _CALLBACK)}"


def _down(provider: Provider, failure: Exception) -> Unavailable:
    return Unavailable(
        f"single sign-on: the provider {provider.settings.issuer} does not answer "
        f"({type(failure).__name__}); try again later"
    )


@router.get(_FLOW_PATH)
async def start_sign_in(request: Request) -> Response:
    """Send the browser to the provider; ``?next=/path`` is where it comes back to."""
    provider = _provider(request)
    try:
        await provider.metadata()
        sent = await provider.client.create_authorization_url(_redirect_uri(request))
    except (httpx2.HTTPError, ValueError) as failure:
        raise _down(provider, failure) from failure
    flow = Flow(
        sent["state"],
        sent["nonce"],
        sent["code_verifier"],
        oidc.safe_next(request.query_params.get("next")),
        time.time(),
    )
    response = RedirectResponse(sent["url"], status_code=302)
    response.set_cookie(
        FLOW_COOKIE,
        provider.seal(flow),
        max_age=oidc.FLOW_SECONDS,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
        path=cookie_path(request, _FLOW_PATH),
    )
    return response


@router.get(_CALLBACK)
async def finish_sign_in(request: Request) -> Response:
    """Where the provider sends the browser back: sign it in, or say why not."""
    provider = _provider(request)
    flow = provider.unseal(request.cookies.get(FLOW_COOKIE))
    try:
        if flow is None:
            raise Refused("expired")
        claims = await _identify(request, provider, flow)
        if not oidc.admits(provider.settings.allow, claims, provider.settings.org_claim):
            # In the server's output, so an administrator can see whom to add.
            log.warning("single sign-on refused %s: not on the allow-list", _who(claims))
            raise Refused("not-allowed")
        session = await app_state(request).database.write(
            _sign_in, str(claims["iss"]), str(claims["sub"]), claims
        )
    except Refused as refused:
        return _back_to_sign_in(request, refused, flow)
    response = RedirectResponse(local_address(request, flow.next), status_code=303)
    response.delete_cookie(FLOW_COOKIE, path=cookie_path(request, _FLOW_PATH))
    set_cookie(response, request, SESSION_COOKIE, session, SESSION_DAYS)
    return response


async def _identify(request: Request, provider: Provider, flow: Flow) -> dict[str, Any]:
    """The account's claims: the checked ID token's, completed by the userinfo endpoint's
    (many providers put the e-mail and groups only there)."""
    params = request.query_params
    if not hmac.compare_digest(params.get("state", "").encode(), flow.state.encode()):
        raise Refused("state")
    if params.get("error"):
        raise Refused("provider", params["error"])
    try:
        metadata = await provider.metadata()
        issuer = params.get("iss")
        if issuer is not None and issuer != metadata["issuer"]:
            raise Refused("token")  # a mix-up: the answer is another issuer's (RFC 9207)
        token = await provider.client.fetch_access_token(
            redirect_uri=_redirect_uri(request),
            code=params.get("code", ""),
            code_verifier=flow.verifier,
        )
        checked = await provider.client.parse_id_token(token, nonce=flow.nonce)
        if checked is None:
            raise Refused("token")
        claims = dict(checked)
        if metadata.get("userinfo_endpoint") and token.get("access_token"):
            extra = await provider.client.userinfo(token=token)
            if extra.get("sub") == claims["sub"]:  # else it describes someone else
                claims = {**extra, **claims}
    except (OAuthError, JoseError) as failure:
        log.warning(
            "single sign-on refused: the provider's answer failed %s", type(failure).__name__
        )
        raise Refused("token") from failure
    except (httpx2.HTTPError, ValueError) as failure:
        raise _down(provider, failure) from failure
    if not isinstance(claims.get("sub"), str) or not 0 < len(claims["sub"]) <= _SUBJECT_MAX:
        raise Refused("token")
    return claims


def _who(claims: dict[str, Any]) -> str:
    email = claims.get("email")
    return repr(email) if isinstance(email, str) else f"subject {claims.get('sub')!r}"


def _sign_in(connection: Connection, issuer: str, subject: str, claims: dict[str, Any]) -> str:
    """A session for the account with this identity, made on its first sign-in."""
    user = accounts.find_oidc_user(connection, issuer, subject) or _new_account(
        connection, issuer, subject, claims
    )
    if user.disabled:
        log.warning("single sign-on refused %r: the account is disabled", user.login)
        raise Refused("disabled")
    return accounts.create_session(connection, user.id)


def _new_account(
    connection: Connection, issuer: str, subject: str, claims: dict[str, Any]
) -> accounts.User:
    email = oidc.verified_email(claims)
    name = claims.get("name")
    for login in oidc.login_candidates(claims):
        try:
            user = accounts.add_user(
                connection,
                login,
                password_hash=None,
                email=email if email is not None and len(email) <= _EMAIL_MAX else None,
                display_name=name[:_DISPLAY_NAME_MAX] if isinstance(name, str) else None,
                oidc=(issuer, subject),
            )
        except Conflict:
            continue  # the login is taken: try the next
        log.info("single sign-on made the account %r", user.login)
        return user
    raise Conflict(f"login: every login made from {_who(claims)} is taken")


def _back_to_sign_in(request: Request, refused: Refused, flow: Flow | None) -> Response:
    """The sign-in page, saying why (a reason of ours, and the provider's error code only
    when it is the plain word OAuth allows)."""
    address = f"/sign-in?sso={refused.reason}"
    detail = refused.detail
    if detail and len(detail) <= 64 and detail.replace("_", "").isalpha() and detail.isascii():
        address += f"&sso_error={detail}"
    if flow is not None and flow.next != "/":
        address += f"&next={quote(flow.next, safe='')}"
    response = RedirectResponse(local_address(request, address), status_code=303)
    response.delete_cookie(FLOW_COOKIE, path=cookie_path(request, _FLOW_PATH))
    return response
