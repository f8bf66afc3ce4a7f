"""``--root-path``: the real app in-process under a prefix, asked as a proxy that strips it,
one that keeps it, and a client straight at the server would ask (the browser and nginx
are tests/dashboard/test_proxy.py)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tuneplane.server.access import RULES
from tuneplane.server.app import create_app
from tuneplane.server.settings import ROOT_PATH, SERVER_SEGMENTS, Settings

PREFIX = "/tp"


@pytest.fixture
def prefixed(settings: Settings) -> Iterator[TestClient]:
    app = create_app(dataclasses.replace(settings, root_path=PREFIX))
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def test_the_reserved_segments_are_the_servers_own() -> None:
    """A prefix may not start like one of the server's paths; the list is the app's."""
    own = {path.split("/")[1] for _, path in RULES} - {""}
    assert own | {"static"} == SERVER_SEGMENTS


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [("/tp", "/tp"), ("/tp/", "/tp"), ("/a/b.c~d", "/a/b.c~d"), ("/", ""), ("/apis", "/apis")],
)
def test_a_root_path_is_read_as_the_prefix(raw: str, parsed: str) -> None:
    assert ROOT_PATH.rule.parse(raw) == parsed


@pytest.mark.parametrize(
    "raw", ["tp", "/tp//", "//tp", "/t p", "/a/../b", "/.", '/"x', "/api", "/static/x", "/x?y"]
)
def test_a_bad_root_path_is_refused(raw: str) -> None:
    assert ROOT_PATH.rule.parse(raw) is None


@pytest.mark.parametrize("path", ["/tp/api/v1/projects", "/api/v1/projects"])
def test_the_api_answers_with_and_without_the_prefix(prefixed: TestClient, path: str) -> None:
    answer = prefixed.get(path)
    assert answer.status_code == 200, answer.text
    assert answer.json() == []


def test_the_prefix_alone_redirects_to_its_root_page(prefixed: TestClient) -> None:
    answer = prefixed.get("/tp?x=1", follow_redirects=False)
    assert answer.status_code == 308
    assert answer.headers["location"] == "/tp/?x=1"


@pytest.mark.parametrize("path", ["/tp/", "/tp/projects/p/runs/r", "/tp/docs"])
def test_a_page_addresses_everything_under_the_prefix(prefixed: TestClient, path: str) -> None:
    page = prefixed.get(path).text
    assert '<meta name="tuneplane-root" content="/tp">' in page
    addresses = re.findall(r'(?:href|src)="([^"]*)"', page)
    assert addresses
    assert [a for a in addresses if not a.startswith("/tp/")] == []


def test_at_the_hosts_root_the_page_names_no_prefix(client: TestClient) -> None:
    page = client.get("/").text
    assert '<meta name="tuneplane-root" content="">' in page
    assert '<script type="module" src="/static/app.js">' in page


def test_the_static_files_answer_under_the_prefix(prefixed: TestClient) -> None:
    answer = prefixed.get("/tp/static/lib/root.js")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/javascript")


def test_the_session_cookie_is_the_prefixs(prefixed: TestClient) -> None:
    state = prefixed.app.state.tuneplane  # type: ignore[attr-defined]
    made = prefixed.post(
        "/tp/api/v1/setup",
        json={"token": state.first_admin.token, "login": "ada", "password": "long password"},
    )
    assert made.status_code == 200, made.text
    assert "Path=/tp;" in made.headers["set-cookie"]
    csrf = made.json()["csrf_token"]
    gone = prefixed.delete(
        "/tp/api/v1/session", headers={"X-CSRF-Token": csrf, "Origin": "http://testserver"}
    )
    assert gone.status_code == 200, gone.text
    deleted = gone.headers.get_list("set-cookie")
    assert len(deleted) == 2
    assert all("Path=/tp;" in line and "Max-Age=0" in line for line in deleted)


def test_an_ingest_token_works_under_the_prefix_and_nowhere_else(
    prefixed: TestClient, tmp_path: Path, settings: Settings
) -> None:
    key = (settings.data_dir / "admin.key").read_text().strip()
    auth = {"Authorization": f"Bearer {key}"}
    created = prefixed.post("/tp/api/v1/projects/lab/runs", json={"run": "r"}, headers=auth)
    assert created.status_code == 201, created.text
    attempt = prefixed.post("/tp/api/v1/projects/lab/runs/r/attempts", json={}, headers=auth)
    token = {"Authorization": f"Bearer {attempt.json()['token']}"}
    body = {"series": [{"name": "loss", "steps": [1], "values": [0.5]}]}
    for path in ("/tp/api/v1/ingest/scalars", "/api/v1/ingest/scalars"):
        sent = prefixed.post(path, json=body, headers=token)
        assert sent.status_code == 200, sent.text
    refused = prefixed.get("/tp/api/v1/projects/lab/runs", headers=token)
    assert refused.status_code == 403
    assert "ingest tokens only authorize /api/v1/ingest/" in refused.text


def test_the_api_description_names_the_prefix_as_its_server(prefixed: TestClient) -> None:
    assert prefixed.get("/tp/openapi.json").json()["servers"] == [{"url": PREFIX}]


def test_a_share_link_carries_the_prefix(prefixed: TestClient, settings: Settings) -> None:
    key = (settings.data_dir / "admin.key").read_text().strip()
    auth = {"Authorization": f"Bearer {key}"}
    prefixed.post("/tp/api/v1/projects/lab/runs", json={"run": "r"}, headers=auth)
    share = prefixed.post(
        "/tp/api/v1/projects/lab/runs/r/shares", json={"expires_in_days": 1}, headers=auth
    )
    assert share.status_code == 201, share.text
    assert share.json()["url"].startswith("http://testserver/tp/shared#tpl_")
    opened = prefixed.post(
        "/tp/api/v1/share-session", json={"token": share.json()["url"].split("#")[1]}
    )
    assert "Path=/tp;" in opened.headers["set-cookie"]
