"""The dashboard behind a real reverse proxy under a path prefix: Debian's nginx on
loopback publishes a real ``tuneplane serve --root-path /tp`` at ``http://127.0.0.1:PORT/tp/``
(``proxy_buffering off``, as docs/deploy.md configures it), and Chromium drives it there:
the lists, a run's charts, both live streams, the first administrator's link, signing in
and out, the API reference, and not one request outside ``/tp/``."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.dashboard.pages import wait_points, wait_ready
from tests.dashboard.seed import (
    ENV,
    PROJECT,
    SDK_PROJECT,
    arena_run,
    post_ingest,
    post_logs,
    start_sdk_run,
)
from tests.helpers import log
from tests.nginx import Proxy, running_nginx
from tests.serving import running_server

PREFIX = "/tp"
LOGIN, PASSWORD = "grace", "a long enough password"
#: nginx reaches the server from loopback: its forwarded headers are believed, as
#: docs/deploy.md sets the server up.
TRUSTED = {"TUNEPLANE_TRUSTED_PROXIES": "127.0.0.1"}


@dataclass(frozen=True)
class Proxied:
    proxy: Proxy
    #: ``http://127.0.0.1:PORT/tp``: the dashboard's address through nginx.
    base: str
    admin_key: str
    #: the first administrator's one-time link, through nginx
    welcome: str
    #: the ingest token of ``lab/logged``
    token: str


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxied]:
    root = tmp_path_factory.mktemp("proxy")
    data, output = root / "data", root / "server.log"
    server = running_server(
        "--data-dir", str(data), "--root-path", PREFIX, env={**ENV, **TRUSTED}, output=output
    )
    with server as upstream:
        upstream_host = urlsplit(upstream).netloc
        with running_nginx(upstream_host, PREFIX, root / "nginx") as proxy:
            base = proxy.origin + PREFIX
            admin_key = (data / "admin.key").read_text().strip()
            # Everything is sent through the proxy too: Arena batches, an SDK run, its logs.
            arena_run(base, "behind-proxy", 0, 40)
            token = start_sdk_run(base, admin_key, "logged")
            post_logs(base, token, 0, ["first line through the proxy"])
            shown = httpx.patch(
                f"{base}/api/v1/projects/{SDK_PROJECT}/access",
                json={"public_logs": True},
                headers={"Authorization": f"Bearer {admin_key}"},
            )
            assert shown.status_code == 200, shown.text
            welcome = _welcome_link(output).replace(upstream, proxy.origin)
            yield Proxied(proxy, base, admin_key, welcome, token)


def _welcome_link(output: Path) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = re.search(r"(http://\S+/welcome#\S+)", output.read_text())
        if found:
            return found.group(1)
        time.sleep(0.1)
    raise AssertionError(f"no first-administrator link:\n{output.read_text()}")


@pytest.fixture
def context(browser: Browser, proxied: Proxied) -> Iterator[BrowserContext]:
    """A browser context whose every request is recorded; each must stay under /tp/."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(10_000)
    requested: list[str] = []
    errors: list[str] = []
    context.on("request", lambda request: requested.append(request.url))
    context.on("weberror", lambda error: errors.append(str(error.error)))
    yield context
    context.close()
    assert errors == []
    assert requested, "the browser asked for nothing"
    outside = [url for url in requested if not url.startswith(proxied.base + "/")]
    assert outside == [], f"requests outside {PREFIX}/: {outside}"


def _page(context: BrowserContext) -> Page:
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.problems = problems  # type: ignore[attr-defined]
    return page


def test_the_lists_a_run_chart_and_its_live_stream_work_under_the_prefix(
    context: BrowserContext, proxied: Proxied
) -> None:
    page = _page(context)
    page.goto(proxied.base + "/")
    project = page.locator("main a", has_text=PROJECT)
    expect(project).to_have_attribute("href", f"{PREFIX}/projects/{PROJECT}")
    project.click()
    run_link = page.locator("a.run-link", has_text="behind-proxy")
    expect(run_link).to_have_attribute("href", f"{PREFIX}/projects/{PROJECT}/runs/behind-proxy")
    run_link.click()
    expect(page).to_have_url(f"{proxied.base}/projects/{PROJECT}/runs/behind-proxy")
    wait_ready(page)
    key = f"{PROJECT}/behind-proxy"
    wait_points(page, "reward", key, 40)
    wait_points(page, "loss", key, 40)
    csv = page.get_by_role("link", name="Download CSV")
    expect(csv).to_have_attribute(
        "href", f"{PREFIX}/api/v1/projects/{PROJECT}/runs/behind-proxy/export.csv"
    )
    expect(page.locator(".live-state").first).to_have_text("live")

    # A batch sent through the proxy reaches the open page on its unbuffered stream.
    steps = range(40, 45)
    post_ingest(
        proxied.base,
        {"logs": [log(f"e{s}", s, {"reward": s / 10}, run="behind-proxy") for s in steps]},
    )
    wait_points(page, "reward", key, 45)
    expect(page.locator(".fact", has_text="last step").locator("dd")).to_have_text("44")

    # The page's own links keep the prefix: the breadcrumbs, the run's reports.
    expect(page.locator("#crumbs a").first).to_have_attribute(
        "href", f"{PREFIX}/projects/{PROJECT}"
    )
    page.locator("a.button", has_text="Reports").click()
    expect(page).to_have_url(re.compile(rf"^{re.escape(proxied.base)}/reports\?"))
    expect(page.locator("main")).to_contain_text("behind-proxy")
    assert page.problems == []  # type: ignore[attr-defined]


def test_the_logs_stream_and_the_api_reference_work_under_the_prefix(
    context: BrowserContext, proxied: Proxied
) -> None:
    page = _page(context)
    page.goto(f"{proxied.base}/projects/{SDK_PROJECT}/runs/logged?tab=logs")
    lines = page.locator(".log-line")
    expect(lines).to_have_count(1)
    expect(page.locator(".logs .live-state")).to_have_text("live")
    post_logs(proxied.base, proxied.token, 1, ["second line, live through nginx"])
    expect(lines).to_have_count(2)
    expect(lines.last.locator(".ln-text")).to_have_text("second line, live through nginx")
    page.get_by_placeholder("search log lines").fill("nginx")
    expect(page).to_have_url(
        f"{proxied.base}/projects/{SDK_PROJECT}/runs/logged?tab=logs&logq=nginx"
    )

    page.goto(f"{proxied.base}/docs")
    expect(page.locator(".swagger-ui .title").first).to_contain_text("tuneplane")
    expect(page.locator(".swagger-ui .servers select")).to_contain_text(PREFIX)
    assert page.problems == []  # type: ignore[attr-defined]


def test_the_first_administrator_signs_in_and_out_under_the_prefix(
    context: BrowserContext, proxied: Proxied
) -> None:
    page = _page(context)
    page.goto(proxied.welcome)
    expect(page).to_have_url(f"{proxied.base}/welcome")  # the token left the address bar
    page.get_by_label("Login").fill(LOGIN)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Create and sign in").click()
    expect(page).to_have_url(f"{proxied.base}/")
    session = page.locator(".top-links .session")
    expect(session).to_have_text(LOGIN)
    expect(session).to_have_attribute("href", f"{PREFIX}/account")
    (cookie,) = [c for c in context.cookies() if c["name"] == "tuneplane_session"]
    assert cookie["path"] == PREFIX

    page.goto(f"{proxied.base}/account")
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(f"{proxied.base}/")
    expect(session).to_have_text("sign in")
    assert [c for c in context.cookies() if c["name"] == "tuneplane_session"] == []

    # Signing in from a page's link comes back to that page, under the prefix.
    page.goto(f"{proxied.base}/projects/{PROJECT}/runs/behind-proxy")
    expect(session).to_have_attribute(
        "href", f"{PREFIX}/sign-in?next=%2Fprojects%2F{PROJECT}%2Fruns%2Fbehind-proxy"
    )
    session.click()
    page.get_by_label("Login").fill(LOGIN)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{proxied.base}/projects/{PROJECT}/runs/behind-proxy")
    expect(session).to_have_text(LOGIN)
    assert page.problems == []  # type: ignore[attr-defined]


def test_a_share_link_made_through_the_proxy_opens_under_the_prefix(
    browser: Browser, context: BrowserContext, proxied: Proxied
) -> None:
    share = httpx.post(
        f"{proxied.base}/api/v1/projects/{PROJECT}/runs/behind-proxy/shares",
        json={"expires_in_days": 1},
        headers={"Authorization": f"Bearer {proxied.admin_key}"},
    )
    assert share.status_code == 201, share.text
    url = share.json()["url"]
    assert url.startswith(f"{proxied.base}/shared#tpl_")
    page = _page(context)
    page.goto(url)
    expect(page).to_have_url(f"{proxied.base}/projects/{PROJECT}/runs/behind-proxy")
    cookies = [c for c in context.cookies() if c["name"] == "tuneplane_share"]
    assert [c["path"] for c in cookies] == [PREFIX]


def test_a_proxy_that_keeps_the_prefix_and_a_request_without_it_are_served_alike(
    proxied: Proxied, tmp_path: Path
) -> None:
    """nginx's ``proxy_pass`` without a trailing slash forwards ``/tp/…`` as it came; a
    health check straight at the server has no prefix at all. Both reach the same routes,
    and the stream's first event arrives while it is still open (nginx does not hold it)."""
    upstream = _upstream(proxied)
    with running_nginx(upstream, PREFIX, tmp_path / "nginx", strip=False) as kept:
        shell = httpx.get(f"{kept.origin}{PREFIX}/")
        assert shell.status_code == 200
        assert f'<script type="module" src="{PREFIX}/static/app.js">' in shell.text
        runs = httpx.get(f"{kept.origin}{PREFIX}/api/v1/projects/{PROJECT}/runs").json()
        assert "behind-proxy" in [run["run"] for run in runs]
        # nginx writes its access log once an answer is sent: give it a moment.
        line = f"GET {PREFIX}/api/v1/projects/{PROJECT}/runs HTTP/1.1"
        deadline = time.monotonic() + 5
        while line not in kept.requested() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert line in kept.requested()
        stream = f"{kept.origin}{PREFIX}/api/v1/projects/{PROJECT}/runs/behind-proxy/stream"
        with httpx.stream("GET", stream, timeout=10) as answer:
            assert answer.status_code == 200
            first = next(answer.iter_lines())
            assert first.startswith(("event:", ":", "id:", "retry:")), first
    direct = httpx.get(f"http://{upstream}/healthz")
    assert direct.status_code == 200
    # The prefix alone is its root page's address: nginx says so before the server, the
    # server itself to a request straight at it.
    by_nginx = httpx.get(f"{proxied.proxy.origin}{PREFIX}", follow_redirects=True)
    assert by_nginx.url.path == f"{PREFIX}/"
    bare = httpx.get(f"http://{upstream}{PREFIX}?a=1", follow_redirects=False)
    assert bare.status_code == 308
    assert bare.headers["location"] == f"{PREFIX}/?a=1"


def _upstream(proxied: Proxied) -> str:
    """The server's own host:port, from nginx's configuration."""
    config = (proxied.proxy.access_log.parent / "nginx.conf").read_text()
    found = re.search(r"proxy_pass http://([0-9.:]+)", config)
    assert found
    return found.group(1)
