"""Single sign-on in a real browser: the sign-in page's "Sign in with …" button, a real
OpenID Connect provider's login form (npm's ``oidc-provider`` on loopback), and back to the
page the browser came from, signed in; a refused account is told why on the sign-in page."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.oidc.provider import running_provider
from tests.serving import running_server

ACCOUNTS: dict[str, dict[str, object]] = {
    "grace": {"email": "grace@example.com", "email_verified": True, "name": "Grace H."},
    "mallory": {"email": "mallory@elsewhere.org", "email_verified": True},
}
NAME = "Example SSO"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_provider(ACCOUNTS) as provider:
        env = {
            **provider.server_env(allowed_domains="example.com"),
            "TUNEPLANE_OIDC_NAME": NAME,
        }
        data = tmp_path_factory.mktemp("sso-dashboard")
        with running_server("--data-dir", str(data), env=env) as url:
            yield url


@pytest.fixture
def context(browser: Browser, base: str) -> Iterator[BrowserContext]:
    opened = browser.new_context(base_url=base)
    opened.set_default_timeout(10_000)
    yield opened
    opened.close()


def _sign_in_at_provider(page: Page, login: str) -> None:
    page.get_by_role("link", name=f"Sign in with {NAME}").click()
    page.locator("input[name=login]").fill(login)  # the provider's own form
    page.locator("input[name=password]").fill("any password")
    page.get_by_role("button", name="Sign-in").click()


def test_the_button_signs_in_at_the_provider_and_comes_back(
    context: BrowserContext, base: str
) -> None:
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto("/account")  # signed out: the account page sends the browser to sign in
    expect(page).to_have_url(re.compile(r"/sign-in\?next=%2Faccount$"))
    _sign_in_at_provider(page, "grace")
    expect(page).to_have_url(f"{base}/account")
    expect(page.locator(".top-links .session")).to_have_text("grace@example.com")
    assert errors == []


def test_a_refused_account_is_told_why_and_stays_signed_out(context: BrowserContext) -> None:
    page = context.new_page()
    page.goto("/sign-in")
    _sign_in_at_provider(page, "mallory")
    expect(page).to_have_url(re.compile(r"/sign-in\?sso=not-allowed"))
    expect(page.get_by_role("alert")).to_contain_text(f"Your {NAME} account may not sign in here")
    expect(page.locator(".top-links .session")).to_have_text("sign in")
    # The button is there to try again (with another account at the provider, say).
    expect(page.get_by_role("link", name=f"Sign in with {NAME}")).to_be_visible()
