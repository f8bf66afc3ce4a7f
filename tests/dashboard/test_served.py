"""The shell and the static files as the server sends them (no browser needed)."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.dashboard.seed import Seeded

PAGES = [
    "/",
    "/projects/p",
    "/projects/p/runs/r",
    "/projects/p/launch",
    "/projects/p/launch/recipes/sft?from=r",
    "/compare?project=p&runs=a,b",
    "/reports",
    "/matched?left=p/a/r1&right=p/b/r1",
]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_is_the_shell_with_a_strict_policy(seeded: Seeded, path: str) -> None:
    answer = httpx.get(seeded.base + path)
    # Project "p" does not exist: its pages are the shell too, answered 404 (as a private
    # project's are to everyone outside it).
    assert answer.status_code == (404 if path.startswith("/projects/") else 200)
    assert answer.headers["content-type"] == "text/html; charset=utf-8"
    policy = answer.headers["content-security-policy"]
    assert "script-src 'self';" in policy
    assert "unsafe" not in policy
    assert '<script type="module" src="/static/app.js">' in answer.text


def test_every_module_is_preloaded_and_served_as_javascript(seeded: Seeded) -> None:
    shell = httpx.get(seeded.base + "/").text
    modules = re.findall(r'<link rel="modulepreload" href="([^"]+)">', shell)
    assert "/static/app.js" in modules
    assert "/static/vendor/uPlot.esm.js" in modules
    for module in modules:
        answer = httpx.get(seeded.base + module)
        assert answer.status_code == 200, module
        assert answer.headers["content-type"].startswith("text/javascript"), module
        assert "innerHTML" not in answer.text or module.startswith("/static/vendor/")


def test_the_vendored_chart_library_keeps_its_licence(seeded: Seeded) -> None:
    licence = httpx.get(seeded.base + "/static/vendor/uPlot.LICENSE").text
    assert "MIT License" in licence
    assert "Leon Sorokin" in licence


def test_pages_are_not_part_of_the_api_description(seeded: Seeded) -> None:
    paths = httpx.get(seeded.base + "/openapi.json").json()["paths"]
    # Besides the API: the probes, single sign-on's two steps (their errors are JSON, not
    # pages) and the Trackio protocol's version probe.
    api = ("/api/", "/ingest", "/healthz", "/livez", "/sign-in/oidc", "/version")
    assert not [p for p in paths if not p.startswith(api)]


def test_static_files_are_compressed_and_revalidated(seeded: Seeded) -> None:
    url = seeded.base + "/static/vendor/uPlot.esm.js"
    plain = httpx.get(url, headers={"Accept-Encoding": "identity"})
    packed = httpx.get(url, headers={"Accept-Encoding": "gzip"})
    assert packed.headers["content-encoding"] == "gzip"
    assert int(packed.headers["content-length"]) < len(plain.content) / 2
    assert packed.text == plain.text
    again = httpx.get(url, headers={"If-None-Match": plain.headers["etag"]})
    assert again.status_code == 304
    assert httpx.get(seeded.base + "/static/missing.js").status_code == 404
