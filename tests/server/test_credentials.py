"""Credentials stop writing the moment they are replaced or superseded, on every server
process, whatever it has cached; the web guard reads the Authorization header as the routes
do."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from tests.conftest import _truncate_postgres
from tests.server.test_run_protocol import RUN, admin_key, scalars, start, summary
from tests.serving import running_server
from tuneplane.server.app import create_app
from tuneplane.server.settings import Settings

LOSS = {"series": [{"name": "loss", "steps": [1], "values": [0.5]}]}
REWARD_AT_0 = {"series": [{"name": "reward", "steps": [0], "values": [0.25]}]}


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        client.headers["Authorization"] = f"Bearer {admin_key(settings)}"
        yield client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def start_with_key(api: TestClient, key: str) -> str:
    answer = api.post(RUN + "/attempts", headers={"Idempotency-Key": key})
    assert answer.status_code == 201, answer.text
    token: str = answer.json()["token"]
    return token


def test_a_replaced_token_stops_writing_even_after_it_was_used(api: TestClient) -> None:
    api.post("/api/v1/projects/demo/runs", json={"run": "grpo-7"})
    first = start_with_key(api, "k-1")
    assert scalars(api, bearer(first), LOSS).status_code == 200  # now known to the server
    second = start_with_key(api, "k-1")  # the documented recovery of a lost answer
    refused = scalars(api, bearer(first), LOSS)
    assert refused.status_code == 401
    assert "replaced" in refused.json()["error"]["message"]
    assert scalars(api, bearer(second), LOSS).status_code == 200


ROUTES: list[tuple[str, dict[str, Any]]] = [
    ("/api/v1/ingest/scalars", REWARD_AT_0),
    ("/api/v1/ingest/logs", {"lines": [{"seq": 0, "stream": "stdout", "time": 1, "text": "x"}]}),
    ("/api/v1/ingest/status", {"status": "failed", "exit_code": 1}),
    (
        "/api/v1/ingest/observations",
        {"events": [{"event_id": "e-1", "type": "event", "name": "late", "fields": {}}]},
    ),
    (
        "/api/v1/ingest/heartbeat",
        {
            "queued": 1, "sent": 1, "dropped": 0, "failed_sends": 0, "queue_size": 0,
            "queue_capacity": 10, "interval": 10.0,
        },
    ),
]  # fmt: skip


@pytest.mark.parametrize(("path", "body"), ROUTES, ids=[path for path, _ in ROUTES])
def test_an_older_attempt_is_refused_on_every_ingest_route(
    api: TestClient, path: str, body: dict[str, Any]
) -> None:
    old = start(api)
    assert scalars(api, old, LOSS).status_code == 200  # the old token is known and cached
    new = start(api)
    assert scalars(api, new, REWARD_AT_0).status_code == 200
    api.post("/api/v1/ingest/status", json={"status": "running"}, headers=new)

    refused = api.post(path, json=body, headers=old)
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "attempt_superseded"
    assert "attempt superseded by attempt 2" in error["message"]
    # Nothing of the old attempt's write landed.
    run = api.get(RUN).json()
    assert (run["status"], run["attempt"]) == ("running", 2)
    assert summary(api, "reward")["last"] == 0.25
    assert [line["text"] for line in api.get(RUN + "/logs").json()["lines"]] == []
    assert api.get(RUN + "/observations").json() == []


def test_an_expired_cached_token_is_refused(settings: Settings) -> None:
    brief = replace(settings, ingest_token_days=1.5 / 86_400)  # 1.5 seconds
    with TestClient(create_app(brief), raise_server_exceptions=False) as client:
        client.headers["Authorization"] = f"Bearer {admin_key(brief)}"
        token = start(client)
        assert scalars(client, token, LOSS).status_code == 200
        time.sleep(1.6)
        refused = scalars(client, token, LOSS)
    assert refused.status_code == 401
    assert "expired" in refused.json()["error"]["message"]


def test_every_server_process_refuses_a_superseded_token(
    pg_database_url: str, tmp_path: Path
) -> None:
    """Two real server processes on one PostgreSQL: the second has the old token cached
    when the first starts a new attempt; from then on neither accepts it."""
    _truncate_postgres(pg_database_url)
    url = ["--database-url", pg_database_url]
    with (
        running_server(*url, "--data-dir", str(tmp_path / "a")) as first,
        running_server(*url, "--data-dir", str(tmp_path / "b")) as second,
    ):
        servers = (first, second)
        admin = (tmp_path / "a" / "admin.key").read_text().strip()
        runs = f"{first}/api/v1/projects/demo/runs"
        assert httpx.post(runs, json={"run": "r"}, headers=bearer(admin)).status_code == 201

        def attempt(idempotency: str | None = None) -> str:
            headers = bearer(admin) | ({"Idempotency-Key": idempotency} if idempotency else {})
            answer = httpx.post(f"{runs}/r/attempts", headers=headers)
            assert answer.status_code == 201, answer.text
            token: str = answer.json()["token"]
            return token

        def write(base: str, token: str) -> int:
            return httpx.post(
                base + "/api/v1/ingest/scalars", json=LOSS, headers=bearer(token)
            ).status_code

        old = attempt("k-1")
        assert [write(base, old) for base in servers] == [200, 200]  # both have it cached
        replaced = attempt("k-1")
        assert [write(base, old) for base in servers] == [401, 401]
        assert [write(base, replaced) for base in servers] == [200, 200]
        newer = attempt()
        assert [write(base, replaced) for base in servers] == [409, 409]
        assert [write(base, newer) for base in servers] == [200, 200]


SPELLINGS = [
    "Bearer\t{token}",
    "bearer {token}",
    "BEARER \t {token}",
    "  Bearer {token}  ",
    "Bearer\t\t{token}",
    "Token {token}",
    "{token}",
    "Basic x {token}",
]


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize("path", ["/api/v1/projects", RUN, RUN + "/logs", "/healthz"])
def test_the_guard_refuses_ingest_tokens_on_every_spelling(
    api: TestClient, spelling: str, path: str
) -> None:
    token = start(api)["Authorization"].removeprefix("Bearer ")
    response = api.get(path, headers={"Authorization": spelling.format(token=token)})
    assert response.status_code == 403, response.text
    assert response.json()["error"]["code"] == "ingest_token"


@pytest.mark.parametrize("spelling", ["Bearer\t{token}", "bearer  {token}", " BEARER {token}"])
def test_ingest_routes_read_the_header_as_the_guard_does(api: TestClient, spelling: str) -> None:
    token = start(api)["Authorization"].removeprefix("Bearer ")
    headers = {"Authorization": spelling.format(token=token)}
    assert scalars(api, headers, LOSS).status_code == 200


def test_two_authorization_headers_are_refused(api: TestClient) -> None:
    token = start(api)["Authorization"]
    key = api.headers["Authorization"]
    for path in ("/api/v1/projects", "/api/v1/ingest/scalars"):
        response = api.post(
            path,
            json=LOSS,
            headers=[("Authorization", key), ("Authorization", token)],  # type: ignore[arg-type]
        )
        assert response.status_code == 400, (path, response.text)
        assert "one Authorization header" in response.json()["error"]["message"]
