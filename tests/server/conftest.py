"""The server tests' shared world of accounts and credentials (docs/access.md)."""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from argon2 import PasswordHasher
from fastapi.testclient import TestClient
from sqlalchemy import update

from tests.conftest import INGEST_SECRET
from tuneplane.server.app import create_app
from tuneplane.server.settings import Settings
from tuneplane.store import accounts
from tuneplane.store.database import Database
from tuneplane.store.schema import share_links

PASSWORD = "correct horse battery"
SECRET_PROJECT = "secret"
OPEN_PROJECT = "open"


@dataclass
class World:
    client: TestClient
    callers: dict[str, dict[str, str]]
    run_id: int


def session_headers(client: TestClient, login: str) -> dict[str, str]:
    """Sign ``login`` in as a browser does: the session cookie stays in ``client`` (until
    ``client.cookies.clear()``), and these headers make its writes the page's own."""
    answer = client.post(
        "/api/v1/session",
        json={"login": login, "password": PASSWORD},
        headers={"Authorization": ""},
    )
    assert answer.status_code == 200, answer.text
    return {
        "Authorization": "",
        "Origin": "http://testserver",
        "X-CSRF-Token": answer.json()["csrf_token"],
    }


def make_key(client: TestClient, login: str, scope: str = "write", name: str = "tests") -> Any:
    """A new API key of ``login``'s, made as people make them: signed in, in a browser
    session (keys never make keys). The answer's JSON: id, name, scope and key."""
    headers = session_headers(client, login)
    key = client.post("/api/v1/keys", json={"name": name, "scope": scope}, headers=headers)
    client.cookies.clear()
    assert key.status_code == 201, key.text
    return key.json()


def revoke_key(client: TestClient, login: str, key_id: int) -> None:
    """Revoke one of ``login``'s keys, signed in as ``login``."""
    headers = session_headers(client, login)
    revoked = client.delete(f"/api/v1/keys/{key_id}", headers=headers)
    client.cookies.clear()
    assert revoked.status_code == 200, revoked.text


def _sign_in(client: TestClient, login: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {make_key(client, login)['key']}"}


#: One evaluation trajectory of the private project's run r1 (its ID is 1).
TRAJECTORY = {
    "trajectories": [
        {
            "scope": "evaluation",
            "round_id": "val",
            "trial_id": "t0",
            "trial_attempt": 0,
            "messages": [{"role": "user", "content": "private prompt"}],
            "total_messages": 1,
            "complete": True,
            "capture_policy": "all",
        }
    ]
}


def admin_client(settings: Settings) -> Iterator[TestClient]:
    """A client of the app on ``settings`` holding the site administrator's key."""
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        key = (settings.data_dir / "admin.key").read_text().strip()
        client.headers["Authorization"] = f"Bearer {key}"
        yield client


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    """The app on each engine, as the site administrator."""
    yield from admin_client(settings)


@pytest.fixture(params=["directory", "s3"])
def blob_settings(request: pytest.FixtureRequest, settings: Settings) -> Settings:
    """Settings with trajectory bodies in a directory, and in a real S3-compatible server."""
    if request.param == "s3":
        bucket = request.getfixturevalue("s3_bucket")
        return dataclasses.replace(settings, blob_url=f"s3://{bucket}/bodies")
    return settings


@pytest.fixture
def blob_api(blob_settings: Settings) -> Iterator[TestClient]:
    """The app on each engine and each blob store, as the site administrator."""
    yield from admin_client(blob_settings)


@functools.cache
def _password_hash() -> str:
    """PASSWORD's argon2 hash, made once and shared by every account of every world, with
    the cheapest parameters argon2 allows: the server verifies it by the parameters written
    in the hash, so each of a world's nine sign-ins costs milliseconds instead of about
    0.35 s (the server's own hashes keep its costly defaults)."""
    return PasswordHasher(time_cost=1, memory_cost=8, parallelism=1).hash(PASSWORD)


@pytest.fixture
def world(settings: Settings) -> Iterator[World]:
    """Two projects (one private, one public), accounts in every role, and each kind of
    credential, made through the API."""
    app = create_app(settings)
    database: Database = app.state.tuneplane.database
    for login in ("owner", "editor", "viewer", "reader", "outsider", "admin"):
        digest = _password_hash()
        database.run_write(
            lambda c, login=login, digest=digest: accounts.add_user(
                c, login, password_hash=digest, is_admin=login == "admin"
            )
        )
    with TestClient(app, raise_server_exceptions=False) as client:
        admin_key = {
            "Authorization": f"Bearer {(settings.data_dir / 'admin.key').read_text().strip()}"
        }
        callers = {
            login: _sign_in(client, login)
            for login in ("owner", "editor", "viewer", "reader", "outsider", "admin")
        }
        owner = callers["owner"]
        for project in (SECRET_PROJECT, OPEN_PROJECT):
            made = client.post(
                f"/api/v1/projects/{project}/runs", json={"run": "r1"}, headers=owner
            )
            assert made.status_code == 201, made.text
            client.post(f"/api/v1/projects/{project}/runs", json={"run": "r2"}, headers=owner)
        client.patch(
            f"/api/v1/projects/{OPEN_PROJECT}/access", json={"visibility": "public"}, headers=owner
        )
        for login, role, content in (
            ("editor", "editor", False),
            ("viewer", "viewer", False),
            ("reader", "viewer", True),
        ):
            answer = client.put(
                f"/api/v1/projects/{SECRET_PROJECT}/members/{login}",
                json={"role": role, "content": content},
                headers=owner,
            )
            assert answer.status_code == 200, answer.text
        token = client.post(
            f"/api/v1/projects/{SECRET_PROJECT}/runs/r1/attempts", headers=owner
        ).json()["token"]
        ingest = {"Authorization": f"Bearer {token}"}
        points = {"series": [{"name": "loss", "steps": [1], "values": [0.5]}]}
        assert client.post("/api/v1/ingest/scalars", json=points, headers=ingest).status_code == 200
        lines = {"lines": [{"seq": 0, "stream": "stdout", "time": 1, "text": "private line"}]}
        assert client.post("/api/v1/ingest/logs", json=lines, headers=ingest).status_code == 200
        stored = client.post("/api/v1/ingest/trajectories", json=TRAJECTORY, headers=ingest)
        assert stored.json()["new"] == 1, stored.text
        share = client.post(
            f"/api/v1/projects/{SECRET_PROJECT}/runs/r1/shares", json={}, headers=owner
        )
        assert share.status_code == 201, share.text
        share_token = share.json()["url"].partition("#")[2]
        other_share = client.post(
            f"/api/v1/projects/{SECRET_PROJECT}/runs/r2/shares", json={}, headers=owner
        )
        revoked_share = client.post(
            f"/api/v1/projects/{SECRET_PROJECT}/runs/r1/shares", json={}, headers=owner
        ).json()
        client.delete(
            f"/api/v1/projects/{SECRET_PROJECT}/shares/{revoked_share['id']}", headers=owner
        )
        expired_share = client.post(
            f"/api/v1/projects/{SECRET_PROJECT}/runs/r1/shares",
            json={"expires_in_days": 1},
            headers=owner,
        ).json()
        database.run_write(
            lambda c: c.execute(
                update(share_links)
                .where(share_links.c.id == expired_share["id"])
                .values(expires_at=time.time() - 1)
            )
        )
        revoked_key = make_key(client, "owner", name="old")
        revoke_key(client, "owner", revoked_key["id"])
        read_key = make_key(client, "owner", scope="read", name="ro")
        callers.update(
            {
                "anonymous": {"Authorization": ""},
                "admin_key": admin_key,
                "share_link": {"Authorization": f"Bearer {share_token}"},
                "other_share_link": {
                    "Authorization": f"Bearer {other_share.json()['url'].partition('#')[2]}"
                },
                "revoked_share_link": {
                    "Authorization": f"Bearer {revoked_share['url'].partition('#')[2]}"
                },
                "expired_share_link": {
                    "Authorization": f"Bearer {expired_share['url'].partition('#')[2]}"
                },
                "revoked_key": {"Authorization": f"Bearer {revoked_key['key']}"},
                "owner_read_key": {"Authorization": f"Bearer {read_key['key']}"},
                "ingest_token": ingest,
                "arena_secret": {"Authorization": f"Bearer {INGEST_SECRET}"},
            }
        )
        yield World(client, callers, run_id=0)
