"""Who may call what: the route table is derived from the app itself and every route is
tried by every kind of caller, on SQLite and PostgreSQL (docs/access.md)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from tests.server.conftest import OPEN_PROJECT, PASSWORD, SECRET_PROJECT, World
from tuneplane.contract.outbound import parse_allow_list
from tuneplane.server.access import RULES, rule_for
from tuneplane.server.app import create_app
from tuneplane.server.settings import Settings
from tuneplane.store import accounts


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The webhook made below is on loopback, which outbound calls reach when listed."""
    listed = parse_allow_list("127.0.0.1")
    assert listed is not None
    return dataclasses.replace(settings, outbound_allow=listed)


def app_routes(app: FastAPI) -> set[tuple[str, str]]:
    """Every (method, path template) the app answers, included routers' too."""
    found: set[tuple[str, str]] = set()

    def walk(routes: list[Any]) -> None:
        for route in routes:
            original = getattr(route, "original_router", None)
            if original is not None:
                walk(original.routes)
            elif hasattr(route, "methods") and route.methods:
                found.update((method, route.path) for method in route.methods if method != "HEAD")

    walk(app.routes)
    return found


def test_every_route_of_the_app_has_an_access_rule(settings: Settings) -> None:
    app = create_app(settings)
    routes = app_routes(app)
    missing = sorted(route for route in routes if rule_for(*route) is None)
    assert missing == [], f"routes without an access rule: {missing}"
    stale = sorted(set(RULES) - {(m, p.replace(":path", "")) for m, p in routes})
    assert stale == [], f"rules for routes the app does not have: {stale}"


_S = f"/api/v1/projects/{SECRET_PROJECT}"
_R = _S + "/runs/r1"
# A concrete request for every rule about the private project: (method, path, body).
PRIVATE_REQUESTS: list[tuple[str, str, Any]] = [
    ("GET", f"/projects/{SECRET_PROJECT}", None),
    ("GET", f"/projects/{SECRET_PROJECT}/runs/r1", None),
    ("GET", f"/projects/{SECRET_PROJECT}/runs/r1/trajectory", None),
    ("GET", _S + "/runs", None),
    ("GET", _S + "/metrics?runs=r1", None),
    ("GET", _S + "/points/loss?runs=r1&max_points=10", None),
    ("GET", _S + "/points?runs=r1&metric=loss&max_points=10", None),
    ("GET", _R, None),
    ("GET", _R + "/metrics", None),
    ("GET", _R + "/metrics/loss", None),
    ("GET", _R + "/points/loss", None),
    ("GET", _R + "/points?metric=loss", None),
    ("GET", _R + "/invalid/loss", None),
    ("GET", _R + "/invalid?metric=loss", None),
    ("GET", _R + "/alerts", None),
    ("GET", _R + "/export.csv", None),
    ("GET", _R + "/observations", None),
    ("GET", _R + "/evaluation", None),
    ("GET", _R + "/logs", None),
    ("GET", _R + "/diagnoses", None),
    ("POST", _R + "/diagnoses", None),
    ("GET", _R + "/trajectories", None),
    ("GET", _R + "/trajectories/1", None),
    ("GET", _R + "/trajectories/1/search?q=prompt", None),
    ("POST", _S + "/runs", {"run": "r3"}),
    ("POST", _R + "/attempts", None),
    ("GET", _S + "/access", None),
    ("PATCH", _S + "/access", {"public_logs": False}),
    ("GET", _S + "/members", None),
    ("PUT", _S + "/members/outsider", {"role": "viewer"}),
    ("POST", _R + "/shares", {}),
    ("GET", _S + "/shares", None),
    ("GET", _S + "/launch/jobs", None),
    ("GET", f"/projects/{SECRET_PROJECT}/access", None),
    ("GET", f"/projects/{SECRET_PROJECT}/alerts", None),
    ("GET", f"/projects/{SECRET_PROJECT}/launch", None),
    ("GET", f"/projects/{SECRET_PROJECT}/launch/recipes/tiny", None),
    ("DELETE", _R + "/trajectories?trial_id=nothing", None),
    ("PATCH", _R, {"tags": ["checked"]}),
    ("GET", _S + "/alert-rules", None),
    ("GET", _S + "/alert-rules/1", None),
    ("POST", _S + "/alert-rules", {"kind": "nan", "metric": "grad_norm"}),
    ("PATCH", _S + "/alert-rules/1", {"enabled": True}),
    ("GET", _S + "/webhooks", None),
    ("POST", _S + "/webhooks", {"url": "http://127.0.0.1:9/hook"}),
    ("GET", _S + "/webhooks/1/deliveries", None),
    ("DELETE", _S + "/webhooks/1", None),
    ("DELETE", _S + "/alert-rules/2", None),
    # Deletions last: what an allowed caller deletes is gone for the requests after it.
    ("DELETE", _S + "/runs/r2", None),
    ("DELETE", _S, None),
]
READS = {
    (m, p)
    for m, p, _ in PRIVATE_REQUESTS
    if m == "GET" and not p.endswith(("/access", "/members", "/shares", "/webhooks", "/deliveries"))
}
LOGS = {("GET", _R + "/logs"), ("GET", _R + "/diagnoses")}
#: Trajectory bodies: members with the content permission (and the administrator) only.
BODIES = {("GET", _R + "/trajectories/1"), ("GET", _R + "/trajectories/1/search?q=prompt")}
RUN_LEVEL_READS = {(m, p) for m, p in READS if "/runs/r1" in p or "runs=r1" in p} - {
    ("GET", _S + "/runs")
}
EDITOR_WRITES = {
    ("GET", f"/projects/{SECRET_PROJECT}/access"),  # the page: editors manage share links there
    ("POST", _S + "/runs"),
    ("POST", _R + "/attempts"),
    ("POST", _R + "/diagnoses"),
    ("POST", _R + "/shares"),
    ("GET", _S + "/shares"),
    ("PATCH", _R),
    ("POST", _S + "/alert-rules"),
    ("PATCH", _S + "/alert-rules/1"),
    ("DELETE", _S + "/alert-rules/2"),
    ("GET", _S + "/webhooks"),
    ("POST", _S + "/webhooks"),
    ("GET", _S + "/webhooks/1/deliveries"),
    ("DELETE", _S + "/webhooks/1"),
}
OWNER_ONLY = {
    (m, p)
    for m, p, _ in PRIVATE_REQUESTS
    if p.endswith(("/access", "/members", "/members/outsider"))
} | {
    ("DELETE", _R + "/trajectories?trial_id=nothing"),
    ("DELETE", _S + "/runs/r2"),
    ("DELETE", _S),
}


def _expected(caller: str, method: str, path: str) -> set[int]:
    """The statuses each caller may get: 2xx where allowed; 404 where the private project
    must stay hidden; 401/403 where the caller is known to it but not allowed."""
    ok = {200, 201}
    request = (method, path)
    if caller in ("admin", "admin_key"):
        return ok
    if caller in ("owner",):
        return ok
    if caller in ("editor", "viewer") and request in BODIES:
        return {403}  # members without the content permission
    if caller == "editor":
        return ok if request in READS | EDITOR_WRITES else {403}
    if caller in ("viewer", "reader"):
        return ok if request in READS else {403}
    if caller == "owner_read_key":
        return ok if request in READS else {403}
    if caller == "share_link":
        if request in RUN_LEVEL_READS - LOGS - BODIES:
            return ok
        return {401, 404}
    if caller == "other_share_link" and "/runs/r2" in path:
        return {401, 404}  # the run it opens: seen, never changed
    if caller in ("revoked_key", "revoked_share_link", "expired_share_link"):
        return {401}
    if caller == "ingest_token":
        return {403}
    return {404}  # anonymous, outsider, another run's share link, the Arena secret


CALLERS = [
    "anonymous", "outsider", "viewer", "reader", "editor", "owner", "admin", "admin_key",
    "owner_read_key", "share_link", "other_share_link", "revoked_share_link",
    "expired_share_link", "revoked_key", "ingest_token", "arena_secret",
]  # fmt: skip


@pytest.mark.parametrize("caller", CALLERS)
def test_every_caller_on_every_route_of_a_private_project(world: World, caller: str) -> None:
    wrong = []
    for method, path, body in PRIVATE_REQUESTS:
        answer = world.client.request(method, path, json=body, headers=world.callers[caller])
        allowed = _expected(caller, method, path)
        if answer.status_code not in allowed:
            got = f"{answer.status_code} not in {sorted(allowed)}"
            wrong.append(f"{method} {path}: {got} ({answer.text[:120]})")
        if answer.status_code == 404 and path.startswith("/api/"):
            # Hidden means hidden: the same answer as for a project that does not exist.
            assert "no project named 'secret'" in answer.json()["error"]["message"], answer.text
        elif answer.status_code == 404:
            assert answer.headers["content-type"].startswith("text/html")  # the page's shell
    assert wrong == []


def test_private_projects_are_absent_from_lists(world: World) -> None:
    def listed(caller: str) -> list[str]:
        answer = world.client.get("/api/v1/projects", headers=world.callers[caller])
        assert answer.status_code == 200
        return [p["project"] for p in answer.json()]

    assert listed("anonymous") == [OPEN_PROJECT]
    assert listed("outsider") == [OPEN_PROJECT]
    assert listed("arena_secret") == [OPEN_PROJECT]
    assert listed("viewer") == [OPEN_PROJECT, SECRET_PROJECT]
    assert listed("admin_key") == [OPEN_PROJECT, SECRET_PROJECT]
    shared = world.client.get(_S + "/runs", headers=world.callers["share_link"])
    assert shared.status_code == 404  # a share link opens its run, not the project's list


def test_public_means_runs_but_not_logs_unless_the_owner_says_so(world: World) -> None:
    client, callers = world.client, world.callers
    open_run = f"/api/v1/projects/{OPEN_PROJECT}/runs/r1"
    assert client.get(open_run, headers=callers["anonymous"]).status_code == 200
    assert client.get(open_run + "/logs", headers=callers["anonymous"]).status_code == 401
    assert (
        client.post(
            f"/api/v1/projects/{OPEN_PROJECT}/runs/r1/attempts", headers=callers["outsider"]
        ).status_code
        == 403
    )
    turned = client.patch(
        f"/api/v1/projects/{OPEN_PROJECT}/access",
        json={"public_logs": True},
        headers=callers["owner"],
    )
    assert turned.json() == {"project": OPEN_PROJECT, "visibility": "public", "public_logs": True}
    assert client.get(open_run + "/logs", headers=callers["anonymous"]).status_code == 200
    refused = client.patch(
        f"/api/v1/projects/{OPEN_PROJECT}/access",
        json={"visibility": "secret", "colour": 1},
        headers=callers["owner"],
    )
    assert refused.status_code == 422
    assert [d["field"] for d in refused.json()["error"]["details"]] == ["visibility", "colour"]


def test_cookie_writes_need_the_origin_and_the_csrf_token(world: World) -> None:
    client = world.client
    signed = client.post(
        "/api/v1/session",
        json={"login": "owner", "password": PASSWORD},
        headers={"Authorization": ""},
    )
    csrf = signed.json()["csrf_token"]
    cookie = signed.cookies.get("tuneplane_session") or client.cookies.get("tuneplane_session")
    assert cookie is not None
    set_cookie = signed.headers["set-cookie"].lower()
    assert "httponly" in set_cookie
    assert "samesite=lax" in set_cookie
    body = {"name": "k", "scope": "read"}
    no_auth = {"Authorization": ""}
    assert client.post("/api/v1/keys", json=body, headers=no_auth).status_code == 403
    evil = {**no_auth, "Origin": "http://evil.example", "X-CSRF-Token": csrf}
    assert client.post("/api/v1/keys", json=body, headers=evil).status_code == 403
    forged = {**no_auth, "Origin": "http://testserver", "X-CSRF-Token": "0" * 64}
    assert client.post("/api/v1/keys", json=body, headers=forged).status_code == 403
    good = {**no_auth, "Origin": "http://testserver", "X-CSRF-Token": csrf}
    assert client.post("/api/v1/keys", json=body, headers=good).status_code == 201
    assert client.get("/api/v1/session", headers=no_auth).json()["login"] == "owner"
    assert client.delete("/api/v1/session", headers=good).status_code == 200
    # The old cookie is dead on the server, even if a browser kept it.
    client.cookies.set("tuneplane_session", cookie)
    assert client.get("/api/v1/session", headers=no_auth).json()["signed_in"] is False
    client.cookies.clear()


def test_sign_in_failures_are_limited_with_a_clear_message(world: World) -> None:
    client = world.client
    no_auth = {"Authorization": ""}
    for _ in range(10):
        wrong = client.post(
            "/api/v1/session",
            json={"login": "viewer", "password": "wrong password"},
            headers=no_auth,
        )
        assert wrong.status_code == 401
        assert "wrong login or password" in wrong.json()["error"]["message"]
    limited = client.post(
        "/api/v1/session", json={"login": "viewer", "password": PASSWORD}, headers=no_auth
    )
    assert limited.status_code == 429
    assert "too many failed attempts" in limited.json()["error"]["message"]
    missing = client.post("/api/v1/session", json={"login": "viewer"}, headers=no_auth)
    assert missing.status_code == 422
    assert missing.json()["error"]["details"][0]["field"] == "password"


def test_a_disabled_account_loses_its_keys_and_sessions_at_once(
    world: World, settings: Settings
) -> None:
    client, callers = world.client, world.callers
    assert client.get(_R, headers=callers["viewer"]).status_code == 200
    world.client.app.state.tuneplane.database.run_write(accounts.set_disabled, "viewer", True)  # type: ignore[attr-defined]
    assert client.get(_R, headers=callers["viewer"]).status_code == 401


def test_another_site_cannot_sign_a_browser_in(world: World) -> None:
    body = {"login": "viewer", "password": PASSWORD}
    no_auth = {"Authorization": ""}
    evil = world.client.post(
        "/api/v1/session", json=body, headers={**no_auth, "Origin": "http://evil.example"}
    )
    assert evil.status_code == 403
    assert "origin" in evil.json()["error"]["message"]
    assert "set-cookie" not in evil.headers
    own = world.client.post(
        "/api/v1/session", json=body, headers={**no_auth, "Origin": "http://testserver"}
    )
    assert own.status_code == 200
    world.client.cookies.clear()


def test_the_session_cookie_is_secure_over_https(settings: Settings) -> None:
    app = create_app(settings)
    digest = accounts.hash_password(PASSWORD)
    app.state.tuneplane.database.run_write(
        lambda c: accounts.add_user(c, "ada", password_hash=digest)
    )
    body = {"login": "ada", "password": PASSWORD}
    with TestClient(app, base_url="https://tuneplane.example") as client:
        secure = client.post("/api/v1/session", json=body).headers["set-cookie"].lower()
        plain_url = "http://tuneplane.example/api/v1/session"
        plain = client.post(plain_url, json=body).headers["set-cookie"].lower()
    assert "; secure" in secure
    assert "; secure" not in plain
    assert "httponly" in plain
