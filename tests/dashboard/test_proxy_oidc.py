"""Single sign-on behind a real reverse proxy under a path prefix: Debian's nginx publishes a
real ``tuneplane serve --root-path /tp`` at ``http://127.0.0.1:PORT/tp/``, the server is
configured for a real OpenID Connect provider (npm's ``oidc-provider``, which sends browsers
back to ``/tp/sign-in/oidc/callback`` only), and Chromium signs in there and out again: the
callback it is sent to is the proxy's, with the prefix, and not one request of ours leaves
``/tp/``."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Browser, BrowserContext, expect

from tests.nginx import Proxy, running_nginx
from tests.oidc.provider import running_provider
from tests.serving import running_server

PREFIX = "/tp"
NAME = "Example SSO"
LOGIN = "grace@example.com"  # the login made from the verified e-mail
ACCOUNTS: dict[str, dict[str, object]] = {
    "grace": {"email": LOGIN, "email_verified": True, "name": "Grace H."},
}
#: The only callback the provider accepts (a loopback native client: on any port).
CALLBACK = f"http://127.0.0.1{PREFIX}/sign-in/oidc/callback"


@dataclass(frozen=True)
class Proxied:
    proxy: Proxy
    #: ``http://127.0.0.1:PORT/tp``: the dashboard's address through nginx.
    base: str
    #: ``http://127.0.0.1:PORT``: the server's own address, which the browser never sees.
    upstream: str
    issuer: str


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxied]:
    root = tmp_path_factory.mktemp("proxy-sso")
    with running_provider(ACCOUNTS, redirect_uris=[CALLBACK]) as provider:
        env = {
            **provider.server_env(allowed_domains="example.com"),
            "TUNEPLANE_OIDC_NAME": NAME,
            # nginx reaches the server from loopback (docs/deploy.md).
            "TUNEPLANE_TRUSTED_PROXIES": "127.0.0.1",
        }
        server = running_server("--data-dir", str(root / "data"), "--root-path", PREFIX, env=env)
        with (
            server as upstream,
            running_nginx(urlsplit(upstream).netloc, PREFIX, root / "nginx") as proxy,
        ):
            yield Proxied(proxy, proxy.origin + PREFIX, upstream, provider.issuer)


@dataclass
class Recorded:
    context: BrowserContext
    requested: list[str]


@pytest.fixture
def recorded(browser: Browser, proxied: Proxied) -> Iterator[Recorded]:
    """A browser context whose every request is recorded: those to the proxy's origin must
    stay under /tp/, and none may reach the server's own address."""
    context = browser.new_context()
    context.set_default_timeout(10_000)
    requested: list[str] = []
    errors: list[str] = []
    context.on("request", lambda request: requested.append(request.url))
    context.on("weberror", lambda error: errors.append(str(error.error)))
    yield Recorded(context, requested)
    context.close()
    assert errors == []
    # Only our origins: the provider's login page is its own (it even asks Google for a font).
    ours = (proxied.proxy.origin + "/", proxied.upstream + "/")
    outside = [
        url for url in requested if url.startswith(ours) and not url.startswith(proxied.base + "/")
    ]
    assert outside == [], f"requests outside {PREFIX}/: {outside}"


def _session(recorded: Recorded, proxied: Proxied) -> dict[str, object]:
    answer = recorded.context.request.get(f"{proxied.base}/api/v1/session")
    assert answer.status == 200, answer.text()
    body: dict[str, object] = answer.json()
    return body


def _proxied_callbacks(proxied: Proxied) -> list[str]:
    # nginx writes its access log once an answer is sent: give it a moment.
    deadline = time.monotonic() + 5
    while True:
        found = [
            line
            for line in proxied.proxy.requested()
            if line.startswith(f"GET {PREFIX}/sign-in/oidc/callback?")
        ]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_single_sign_on_signs_in_and_out_through_the_proxy_under_the_prefix(
    recorded: Recorded, proxied: Proxied
) -> None:
    page = recorded.context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))

    page.goto(f"{proxied.base}/account")  # signed out: sent to sign in, under the prefix
    expect(page).to_have_url(f"{proxied.base}/sign-in?next=%2Faccount")
    button = page.get_by_role("link", name=f"Sign in with {NAME}")
    expect(button).to_have_attribute("href", f"{PREFIX}/sign-in/oidc?next=%2Faccount")
    button.click()
    page.locator("input[name=login]").fill("grace")  # the provider's own form
    page.locator("input[name=password]").fill("any password")
    page.get_by_role("button", name="Sign-in").click()

    expect(page).to_have_url(f"{proxied.base}/account")
    session = page.locator(".top-links .session")
    expect(session).to_have_text(LOGIN)
    expect(session).to_have_attribute("href", f"{PREFIX}/account")
    expect(page.get_by_role("heading", name=f"Signed in as {LOGIN}")).to_be_visible()

    # The server asked the provider to come back to the proxy's host and port, with the
    # prefix; the provider did, and the callback went through nginx.
    authorizations = [
        parse_qs(urlsplit(url).query)
        for url in recorded.requested
        if url.startswith(proxied.issuer + "/") and "redirect_uri=" in url
    ]
    assert authorizations, f"no authorization request at the provider: {recorded.requested}"
    sent = {uri for query in authorizations for uri in query["redirect_uri"]}
    assert sent == {f"{proxied.base}/sign-in/oidc/callback"}
    callbacks = [
        url
        for url in recorded.requested
        if re.match(rf"{re.escape(proxied.base)}/sign-in/oidc/callback\?", url)
    ]
    assert len(callbacks) == 1, recorded.requested
    assert len(_proxied_callbacks(proxied)) == 1, proxied.proxy.requested()

    cookies = {c["name"]: c for c in recorded.context.cookies()}
    assert cookies["tuneplane_session"]["path"] == PREFIX
    assert "tuneplane_oidc" not in cookies  # the flow's cookie went with the callback
    signed_in = _session(recorded, proxied)
    assert (signed_in["signed_in"], signed_in["login"]) == (True, LOGIN)

    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(f"{proxied.base}/")
    expect(session).to_have_text("sign in")
    assert [c for c in recorded.context.cookies() if c["name"] == "tuneplane_session"] == []
    signed_out = _session(recorded, proxied)
    assert (signed_out["signed_in"], signed_out["login"]) == (False, None)
    assert errors == []
