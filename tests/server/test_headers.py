"""Every response says ``X-Content-Type-Options: nosniff``: JSON, errors, static files, the
API description, the pages, the guard's refusals; and the probes answer unauthenticated."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.conftest import INGEST_SECRET
from tests.helpers import log
from tuneplane.server.app import create_app
from tuneplane.server.settings import Secret, Settings


@pytest.fixture
def app_client(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(
        data_dir=tmp_path,
        database_url=f"sqlite:///{tmp_path / 'tuneplane.db'}",
        ingest_secret=Secret(INGEST_SECRET),
    )
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        yield client


def test_every_kind_of_answer_says_nosniff(app_client: TestClient) -> None:
    auth = {"Authorization": f"Bearer {INGEST_SECRET}"}
    batch = {"logs": [log("e1", 1, {"reward": 1.0}, project="p", run="r")]}
    answers = {
        "ingest": app_client.post("/ingest", json=batch, headers=auth),
        "json": app_client.get("/api/v1/projects"),
        "openapi": app_client.get("/openapi.json"),
        "static": app_client.get("/static/app.js"),
        "static 404": app_client.get("/static/missing.js"),
        "page": app_client.get("/projects/p"),
        "docs": app_client.get("/docs"),
        "not found": app_client.get("/api/v1/projects/nothing/runs/none"),
        "unauthorized": app_client.post("/ingest", json=batch),
        "invalid": app_client.post("/ingest", json={"logs": []}, headers=auth),
        "guard": app_client.get("/api/v1/projects", headers={"Authorization": "Bearer tpi_x"}),
        "healthz": app_client.get("/healthz"),
        "livez": app_client.get("/livez"),
    }
    statuses = {name: answer.status_code for name, answer in answers.items()}
    assert statuses == {
        "ingest": 200,
        "json": 200,
        "openapi": 200,
        "static": 200,
        "static 404": 404,
        "page": 200,
        "docs": 200,
        "not found": 404,
        "unauthorized": 401,
        "invalid": 422,
        "guard": 403,
        "healthz": 200,
        "livez": 200,
    }
    for name, answer in answers.items():
        assert answer.headers.get_list("x-content-type-options") == ["nosniff"], name


def test_the_probes_are_documented_and_say_what_they_check(app_client: TestClient) -> None:
    ready = app_client.get("/healthz").json()
    assert ready["status"] == "ok"
    assert ready["store"] == "ok"
    assert app_client.get("/livez").json()["status"] == "ok"
    docs = (Path(__file__).parents[2] / "docs" / "api.md").read_text()
    assert "readinessProbe" in docs
    assert "livenessProbe" in docs


def _framing(answer: object) -> list[str]:
    policies = answer.headers.get_list("content-security-policy")  # type: ignore[attr-defined]
    return [p for p in policies if "frame-ancestors" in p]


def test_every_answer_says_who_may_frame_it(app_client: TestClient) -> None:
    for path in ("/", "/docs", "/api/v1/projects", "/static/app.js", "/api/v1/projects/x/runs"):
        answer = app_client.get(path)
        assert _framing(answer) == ["frame-ancestors 'self'"], path
    page = app_client.get("/")
    # The page's own policy leaves framing to that one (two policies are both enforced).
    own = [p for p in page.headers.get_list("content-security-policy") if "default-src" in p]
    assert len(own) == 1
    assert "frame-ancestors" not in own[0]
    assert page.headers["referrer-policy"] == "no-referrer"


def test_an_embedding_site_is_named_by_a_setting(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {"TUNEPLANE_FRAME_ANCESTORS": "'self' https://huggingface.co"}, data_dir=str(tmp_path)
    )
    with TestClient(create_app(settings)) as client:
        assert _framing(client.get("/")) == ["frame-ancestors 'self' https://huggingface.co"]
