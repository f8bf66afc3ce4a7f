"""The API reference at /docs works offline, under the dashboard's Content-Security-Policy."""

from __future__ import annotations

import httpx
from playwright.sync_api import Page, Route, expect

from tests.dashboard.seed import Seeded

# Collects what the page's policy refused, from before the first script runs.
WATCH_POLICY = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__violations.push(`${event.violatedDirective} ${event.blockedURI}`);
});
"""


def test_docs_render_every_operation_with_nothing_from_elsewhere(
    page: Page, seeded: Seeded
) -> None:
    elsewhere: list[str] = []

    def only_the_server(route: Route) -> None:
        if route.request.url.startswith(seeded.base + "/"):
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    page.context.route("**/*", only_the_server)
    page.add_init_script(WATCH_POLICY)
    page.goto("/docs")
    operations = page.locator(".opblock")
    expect(operations.first).to_be_visible()
    paths = httpx.get(seeded.base + "/openapi.json").json()["paths"]
    count = sum(len(methods) for methods in paths.values())
    expect(operations).to_have_count(count)
    expect(page.locator(".opblock-summary-path", has_text="/ingest").first).to_be_visible()
    page.locator(".opblock-summary", has_text="/healthz").first.click()
    expect(page.locator(".opblock.is-open")).to_have_count(1)
    assert page.evaluate("window.__violations") == []
    assert elsewhere == []


def test_docs_are_served_with_the_dashboard_policy(seeded: Seeded) -> None:
    docs = httpx.get(seeded.base + "/docs")
    shell = httpx.get(seeded.base + "/")
    assert docs.status_code == 200
    assert docs.headers["content-type"] == "text/html; charset=utf-8"
    assert docs.headers["content-security-policy"] == shell.headers["content-security-policy"]
    assert docs.headers["x-content-type-options"] == "nosniff"
    assert "<script>" not in docs.text  # no inline script: only files from the package
    assert "http" not in docs.text.replace("<!doctype html>", "")
    for asset in ("/static/vendor/swagger-ui-bundle.js", "/static/vendor/swagger-ui.css"):
        answer = httpx.get(seeded.base + asset)
        assert answer.status_code == 200, asset
        assert answer.headers["x-content-type-options"] == "nosniff"
    licence = httpx.get(seeded.base + "/static/vendor/swagger-ui.LICENSE").text
    assert "Apache License" in licence
    assert httpx.get(seeded.base + "/redoc").status_code == 404


def test_the_dashboard_does_not_preload_the_docs_scripts(seeded: Seeded) -> None:
    shell = httpx.get(seeded.base + "/").text
    assert "swagger" not in shell
    assert "api-docs.js" not in shell
