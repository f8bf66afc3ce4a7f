"""No credential grants more than it holds, and a share link sees one run: every route of the
app (the API of ``/openapi.json`` and the dashboard's pages) is tried with every kind of
credential, on SQLite and PostgreSQL (docs/access.md, "What each credential may do")."""

from __future__ import annotations

from typing import Any, Final

import pytest

from tests.server.conftest import SECRET_PROJECT, World, session_headers
from tests.server.test_access import app_routes
from tuneplane.contract.access import CREDENTIAL_ACTIONS, Actor, may_mint
from tuneplane.server.access import rule_for

_S = f"/api/v1/projects/{SECRET_PROJECT}"

#: A value for each path and required query parameter, naming things of the private
#: project's run r1.
PATH_VALUES: Final = {
    "project": SECRET_PROJECT,
    "run": "r1",
    "metric": "loss",
    "round_id": "val",
    "trial_id": "t0",
    "trajectory": "1",
    "rule_id": "1",
    "webhook_id": "1",
    "link_id": "1",
    "key_id": "1",
    "login": "outsider",
    "recipe": "none",
    "job_id": "1",
    "pair": "none",
}
QUERY_VALUES: Final = {
    "runs": "r1",
    "metric": "loss",
    "left": f"{SECRET_PROJECT}/r1",
    "right": f"{SECRET_PROJECT}/r1",
    "trial_id": "t0",
    "max_points": "10",
    "transition": "success_to_failure",
}
#: Markers of run r2 that nothing read through a share link of r1 may show.
R2_MARKERS: Final = ("r2_only_metric", "r2 private line", "r2 alert title", "r2-scoped rule")


def _path(template: str, values: dict[str, str]) -> str:
    path = template.replace(":path}", "}")
    for name, value in values.items():
        path = path.replace("{" + name + "}", value)
    assert "{" not in path, f"no value for a parameter of {template}: add it to PATH_VALUES"
    return path


def _required_query(app_schema: dict[str, Any], method: str, template: str) -> dict[str, str]:
    paths = app_schema["paths"]
    operation = paths.get(template.replace(":path}", "}"), {}).get(method.lower(), {})
    names = [
        p["name"]
        for p in operation.get("parameters", [])
        if p["in"] == "query" and p.get("required")
    ]
    missing = [name for name in names if name not in QUERY_VALUES]
    assert missing == [], f"no value for {method} {template}'s {missing}: add to QUERY_VALUES"
    return {name: QUERY_VALUES[name] for name in names}


def test_a_read_key_cannot_mint_a_key_nor_list_or_revoke_keys(world: World) -> None:
    client, read_key = world.client, world.callers["owner_read_key"]
    for scope in ("write", "read"):
        minted = client.post("/api/v1/keys", json={"name": "x", "scope": scope}, headers=read_key)
        assert minted.status_code == 403, minted.text
        assert "sign in" in minted.json()["error"]["message"]
    assert client.get("/api/v1/keys", headers=read_key).status_code == 403
    signed = session_headers(client, "owner")
    keys = client.get("/api/v1/keys", headers=signed).json()
    client.cookies.clear()
    assert client.delete(f"/api/v1/keys/{keys[0]['id']}", headers=read_key).status_code == 403
    # The read key still reads and still writes nothing; the key it tried to revoke works.
    assert client.get(_S + "/runs/r1", headers=read_key).status_code == 200
    patched = client.patch(_S + "/runs/r1", json={"tags": ["x"]}, headers=read_key)
    assert patched.status_code == 403
    assert "read-only" in patched.json()["error"]["message"]
    assert client.get(_S + "/runs/r1", headers=world.callers["owner"]).status_code == 200


def test_a_write_key_manages_no_keys_and_a_session_mints_both_scopes(world: World) -> None:
    client, write_key = world.client, world.callers["owner"]
    refused = client.post("/api/v1/keys", json={"name": "x", "scope": "read"}, headers=write_key)
    assert refused.status_code == 403
    admin = client.post("/api/v1/keys", json={"name": "x"}, headers=world.callers["admin_key"])
    assert admin.status_code == 403
    signed = session_headers(client, "owner")
    for scope in ("read", "write"):
        made = client.post(
            "/api/v1/keys", json={"name": f"k-{scope}", "scope": scope}, headers=signed
        )
        assert made.status_code == 201, made.text
    client.cookies.clear()


def test_minting_is_capped_by_the_credential_s_own_scope() -> None:
    assert may_mint(Actor("session", user_id=1), "write")
    assert may_mint(Actor("write-key", user_id=1), "write")
    assert may_mint(Actor("read-key", user_id=1), "read")
    assert not may_mint(Actor("read-key", user_id=1), "write")
    for credential in ("none", "admin-key", "share-link", "ingest-token", "arena-secret"):
        assert not may_mint(Actor(credential), "read")  # type: ignore[arg-type]


#: Each kind of credential, as the world's owner (or owner's run r1) holds it: the role
#: would allow everything, so whatever is refused is refused by the credential's cap.
CAPPED_CALLERS: Final = {
    "none": "anonymous",
    "write-key": "owner",
    "read-key": "owner_read_key",
    "admin-key": "admin_key",
    "share-link": "share_link",
    "ingest-token": "ingest_token",
    "arena-secret": "arena_secret",
}
_OWN_CREDENTIALS: Final = {"ingest-token": "ingest-run", "arena-secret": "ingest-arena"}


def _action_of(method: str, template: str) -> str:
    rule = rule_for(method, template)
    assert rule is not None
    if rule.action == "ingest-token":
        return "ingest-run"
    if rule.action == "arena-secret":
        return "ingest-arena"
    if rule.action == "create-run":
        return "write-run"
    return rule.action


@pytest.mark.parametrize("credential", sorted(CAPPED_CALLERS))
def test_no_route_answers_a_credential_beyond_its_cap(world: World, credential: str) -> None:
    client = world.client
    schema = client.get("/openapi.json", headers=world.callers["owner"]).json()
    routes = app_routes(client.app)  # type: ignore[arg-type]
    api_paths = {path for path in schema["paths"]}
    assert api_paths <= {template.replace(":path}", "}") for _, template in routes}
    cap = CREDENTIAL_ACTIONS[credential]  # type: ignore[index]
    headers = world.callers[CAPPED_CALLERS[credential]]
    wrong, tried = [], 0
    for method, template in sorted(routes):
        action = _action_of(method, template)
        if action in ("anyone", "sign-in", "trackio-token") or action in cap:
            continue  # open to all, or the credential may: its role decides (test_access.py)
        tried += 1
        path = _path(template, PATH_VALUES)
        query = _required_query(schema, method, template)
        answer = client.request(method, path, params=query, json={}, headers=headers)
        if answer.status_code not in (401, 403, 404):
            wrong.append(f"{method} {path}: {answer.status_code} {answer.text[:100]}")
    assert tried > 0
    assert wrong == [], f"{credential} got beyond its cap on {len(wrong)} routes"


def _give_r2_its_own(world: World) -> dict[str, str]:
    """Run r2 gets a metric, a log line, an alert and an alert rule of its own, each with a
    marker that nothing read through r1's share link may show. The path values that name
    that rule."""
    client, owner = world.client, world.callers["owner"]
    token = client.post(_S + "/runs/r2/attempts", headers=owner).json()["token"]
    ingest = {"Authorization": f"Bearer {token}"}
    series = {"series": [{"name": "r2_only_metric", "steps": [1], "values": [1.0]}]}
    assert client.post("/api/v1/ingest/scalars", json=series, headers=ingest).status_code == 200
    line = {"lines": [{"seq": 0, "stream": "stdout", "time": 1, "text": "r2 private line"}]}
    assert client.post("/api/v1/ingest/logs", json=line, headers=ingest).status_code == 200
    alert = {"alert_id": "a", "title": "r2 alert title", "text": "", "level": "warn", "step": 1}
    sent = client.post("/api/v1/ingest/alerts", json={"alerts": [alert]}, headers=ingest)
    assert sent.status_code == 200, sent.text
    rule = {"kind": "nan", "metric": "r2_only_metric", "run": "r2", "name": "r2-scoped rule"}
    made = client.post(_S + "/alert-rules", json=rule, headers=owner)
    assert made.status_code == 201, made.text
    return {**PATH_VALUES, "rule_id": str(made.json()["id"])}


def test_a_share_link_reads_its_run_and_nothing_of_another(world: World) -> None:
    values = _give_r2_its_own(world)
    client = world.client
    schema = client.get("/openapi.json", headers=world.callers["owner"]).json()
    share = world.callers["share_link"]
    leaks, opened = [], 0
    for method, template in sorted(app_routes(client.app)):  # type: ignore[arg-type]
        if method != "GET" or template.endswith("/stream"):
            continue  # streams: test_a_share_link_s_stream_is_its_run_s
        query = {**_required_query(schema, method, template), "runs": "r1"}
        answer = client.get(_path(template, values), params=query, headers=share)
        assert answer.status_code < 500, f"{template}: {answer.status_code}"
        opened += answer.status_code == 200
        shown = [marker for marker in R2_MARKERS if marker in answer.text]
        if shown:
            leaks.append(f"GET {template}?runs=r1: {answer.status_code} shows {shown}")
        other = client.get(
            _path(template, {**values, "run": "r2"}), params={**query, "runs": "r2"},
            headers=share,
        )  # fmt: skip
        if "{run}" in template or "/points" in template or "/metrics" in template:
            assert other.status_code in (401, 404), f"{template} of r2: {other.status_code}"
    assert opened >= 10  # the run's own reads answer
    assert leaks == []


def test_a_share_link_lists_no_private_project(world: World) -> None:
    listed = world.client.get("/api/v1/projects", headers=world.callers["share_link"])
    assert listed.status_code == 200
    anyone = world.client.get("/api/v1/projects", headers=world.callers["anonymous"]).json()
    assert listed.json() == anyone
    assert SECRET_PROJECT not in listed.text


def test_a_share_link_reads_no_project_wide_rule_or_episode(world: World) -> None:
    rule_id = _give_r2_its_own(world)["rule_id"]
    share = world.callers["share_link"]
    for path in ("/alert-rules", f"/alert-rules/{rule_id}", "/runs"):
        for query in ({}, {"runs": "r1"}, {"runs": ["r1", "r1"]}):
            answer = world.client.get(_S + path, params=query, headers=share)
            assert answer.status_code == 404, (path, query, answer.text[:100])


def test_a_share_link_s_stream_is_its_run_s(world: World) -> None:
    _give_r2_its_own(world)
    client, share = world.client, world.callers["share_link"]
    assert client.get(_S + "/stream", params={"runs": "r2"}, headers=share).status_code == 404
    both = client.get(_S + "/stream", params={"runs": "r1,r2"}, headers=share)
    assert both.status_code == 404
    with client.stream("GET", _S + "/stream", params={"runs": "r1"}, headers=share) as stream:
        assert stream.status_code == 200
