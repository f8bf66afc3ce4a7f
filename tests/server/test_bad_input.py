"""Bad input that once reached a 500: non-finite numbers, deep nesting, integers past 64 bits
in query parameters and repeated keys. Each answers a 4xx naming the field and stores
nothing, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import INGEST_SECRET
from tuneplane.server.app import create_app
from tuneplane.server.settings import Settings

PROJECT = "/api/v1/projects/demo"
RUN = f"{PROJECT}/runs/r"
HUGE = str(2**64)
JSON = {"Content-Type": "application/json"}
ARENA = {**JSON, "Authorization": f"Bearer {INGEST_SECRET}"}


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    """The app with the admin key as the default credential."""
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        key = (settings.data_dir / "admin.key").read_text().strip()
        client.headers["Authorization"] = f"Bearer {key}"
        yield client


@pytest.fixture
def token(api: TestClient) -> dict[str, str]:
    """Run ``demo/r`` with one point of ``loss`` and one log line; its attempt's token."""
    assert api.post(f"{PROJECT}/runs", json={"run": "r"}).status_code == 201
    attempt = api.post(f"{RUN}/attempts").json()
    headers = {"Authorization": f"Bearer {attempt['token']}"}
    series = {"series": [{"name": "loss", "steps": [1], "values": [0.5]}]}
    assert api.post("/api/v1/ingest/scalars", json=series, headers=headers).status_code == 200
    line = {"lines": [{"seq": 0, "stream": "stdout", "time": 1.0, "text": "hi"}]}
    assert api.post("/api/v1/ingest/logs", json=line, headers=headers).status_code == 200
    return headers


def error_of(response: Any, status: int) -> tuple[str, str]:
    assert response.status_code == status, response.text
    (detail,) = response.json()["error"]["details"]
    return detail["field"], detail["rule"]


def nested(levels: int) -> str:
    return '{"a":' * levels + "1" + "}" * levels


# --- non-finite numbers -----------------------------------------------------------------------


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_non_finite_observation_field_is_named_and_stores_nothing(
    api: TestClient, token: dict[str, str], literal: str
) -> None:
    event = f'{{"event_id": "e1", "type": "event", "name": "x", "fields": {{"x": {literal}}}}}'
    good = '{"event_id": "e0", "type": "event", "name": "x", "fields": {"x": 1}}'
    response = api.post(
        "/api/v1/ingest/observations",
        content=f'{{"events": [{good}, {event}]}}',
        headers={**token, **JSON},
    )
    field, rule = error_of(response, 422)
    assert field == "events[1].fields.x"
    assert rule.startswith("not a finite number")
    assert api.get(f"{RUN}/observations").json() == []


def test_a_non_finite_number_in_a_run_config_is_named(api: TestClient) -> None:
    response = api.post(
        f"{PROJECT}/runs", content='{"run": "r", "config": {"lr": NaN}}', headers=JSON
    )
    assert error_of(response, 422) == ("config.lr", "not a finite number (NaN)")
    assert api.get(RUN).status_code == 404


# --- nesting ----------------------------------------------------------------------------------


def test_a_run_config_nests_at_most_32_levels(api: TestClient) -> None:
    for levels in (33, 300):
        response = api.post(
            f"{PROJECT}/runs", content=f'{{"run": "r", "config": {nested(levels)}}}', headers=JSON
        )
        field, rule = error_of(response, 422)
        assert (field, rule) == ("config", "must nest at most 32 levels of objects and lists")
    assert api.get(RUN).status_code == 404
    response = api.post(
        f"{PROJECT}/runs", content=f'{{"run": "r", "config": {nested(32)}}}', headers=JSON
    )
    assert response.status_code == 201, response.text
    assert (
        api.get(RUN).json()["config"]
        == api.post(
            f"{PROJECT}/runs", content=f'{{"run": "r", "config": {nested(32)}}}', headers=JSON
        ).json()["config"]
    )


@pytest.mark.parametrize("levels", [513, 1_100, 30_000])
def test_bodies_nested_past_the_limit_are_malformed_on_every_route(
    api: TestClient, token: dict[str, str], levels: int
) -> None:
    body = "[" * levels + "]" * levels
    answers = [
        api.post(f"{PROJECT}/runs", content=body, headers=JSON),
        api.post("/ingest", content=body, headers=ARENA),
        *(
            api.post(f"/api/v1/ingest/{route}", content=body, headers={**token, **JSON})
            for route in ("scalars", "logs", "observations")
        ),
    ]
    for response in answers:
        assert error_of(response, 400) == (
            "body",
            "nested deeper than 512 levels of objects and lists",
        )


def test_deep_parts_of_an_observation_or_arena_config_are_refused(
    api: TestClient, token: dict[str, str]
) -> None:
    deep = nested(300)
    event = f'{{"event_id": "e1", "type": "event", "name": "x", "extra": {deep}}}'
    response = api.post(
        "/api/v1/ingest/observations",
        content=f'{{"events": [{event}]}}',
        headers={**token, **JSON},
    )
    assert error_of(response, 422)[0] == "events[0]"
    log = (
        '{"project": "p", "run": "r", "step": 0, "log_id": "e0", "metrics": {"m": 1}, '
        f'"config": {{"model": {deep}}}}}'
    )
    response = api.post("/ingest", content=f'{{"logs": [{log}]}}', headers=ARENA)
    assert error_of(response, 422) == ("logs[0].config.model", "must be a string")
    assert api.get("/api/v1/projects/p/runs/r").status_code == 404


# --- integers past 64 bits in query parameters ------------------------------------------------


@pytest.mark.parametrize(
    ("query", "field"),
    [
        (f"{RUN}/logs?after={HUGE}", "after"),
        (f"{RUN}/logs/stream?after={HUGE}", "after"),
        (f"{RUN}/points/loss?cursor={HUGE}:1", "cursor"),
        (f"{RUN}/points/loss?cursor=1:{HUGE}", "cursor"),
        (f"{RUN}/points/loss?start={HUGE}", "start"),
        (f"{RUN}/points/loss?end={HUGE}", "end"),
        (f"{RUN}/points/loss?max_points=5&start={HUGE}", "start"),
        (f"{RUN}/points/loss?max_points=5&end={HUGE}", "end"),
        (f"{RUN}/points?metric=loss&start={HUGE}", "start"),
        (f"{RUN}/points?metric=loss&cursor={HUGE}:0", "cursor"),
        (f"{RUN}/points?metric=loss&max_points=5&end={HUGE}", "end"),
        (f"{PROJECT}/points/loss?runs=r&max_points=5&end={HUGE}", "end"),
        (f"{PROJECT}/points?metric=loss&runs=r&max_points=5&start={HUGE}", "start"),
        (f"{RUN}/logs?after=-{HUGE}", "after"),
        (f"{RUN}/points/loss?cursor=%C2%B2:1", "cursor"),  # a digit, but not an ASCII one
    ],
)
def test_integers_past_64_bits_in_queries_are_named(
    api: TestClient, token: dict[str, str], query: str, field: str
) -> None:
    assert error_of(api.get(query), 422)[0] == field


@pytest.mark.parametrize("cursor", [HUGE.encode(), b"\xb2"])  # b"\xb2": a latin-1 digit
def test_a_last_event_id_past_64_bits_is_named(
    api: TestClient, token: dict[str, str], cursor: bytes
) -> None:
    response = api.get(f"{RUN}/logs/stream", headers={"Last-Event-ID": cursor})
    assert error_of(response, 422) == ("Last-Event-ID", "must be a cursor")


def test_the_largest_64_bit_integers_are_answered(api: TestClient, token: dict[str, str]) -> None:
    top = str(2**63 - 1)
    assert api.get(f"{RUN}/logs?after={top}").json()["lines"] == []
    assert api.get(f"{RUN}/points/loss?start={top}").json()["points"] == []
    assert api.get(f"{RUN}/points/loss?cursor={top}:{top}").json()["points"] == []
    assert api.get(f"{RUN}/points/loss?max_points=5&end={top}").json()["total_points"] == 1


# --- repeated keys ----------------------------------------------------------------------------

ARENA_LOG = '{"project": "p", "run": "r", "log_id": "e0", "metrics": {"m": 1}, '


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (f'{{"logs": [{ARENA_LOG}"step": 1}}], "logs": [{ARENA_LOG}"step": 2}}]}}', "logs"),
        (f'{{"logs": [{ARENA_LOG}"step": -5, "step": 3}}]}}', "logs[0].step"),
        (
            '{"logs": [{"project": "p", "run": "r", "log_id": "e0", "step": 0, '
            '"metrics": {"m": 1, "m": NaN}}]}',
            "logs[0].metrics.m",
        ),
    ],
)
def test_a_repeated_key_in_an_arena_batch_is_named_and_stores_nothing(
    api: TestClient, body: str, field: str
) -> None:
    response = api.post("/ingest", content=body, headers=ARENA)
    assert error_of(response, 400) == (
        field,
        "duplicate key (a key may appear once in an object)",
    )
    assert api.get("/api/v1/projects/p/runs/r").status_code == 404


def test_a_repeated_key_is_refused_on_the_run_protocol(
    api: TestClient, token: dict[str, str]
) -> None:
    body = '{"series": [{"name": "loss", "steps": [2], "values": [1.0], "values": [9.0]}]}'
    response = api.post("/api/v1/ingest/scalars", content=body, headers={**token, **JSON})
    assert error_of(response, 400)[0] == "series[0].values"
    assert api.get(f"{RUN}/metrics/loss").json()["count"] == 1
    response = api.post(f"{PROJECT}/runs", content='{"run": "r2", "run": "r3"}', headers=JSON)
    assert error_of(response, 400)[0] == "run"
    assert api.get(f"{PROJECT}/runs/r2").status_code == 404
    assert api.get(f"{PROJECT}/runs/r3").status_code == 404


def test_a_batch_without_repeats_is_stored(api: TestClient) -> None:
    # The Arena cases above would pass for the wrong reason if the secret were refused.
    ok = f'{{"logs": [{ARENA_LOG}"step": 1}}]}}'
    assert api.post("/ingest", content=ok, headers=ARENA).status_code == 200


# --- NUL in names -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "field"),
    [
        (f"{PROJECT}/runs/%00", "run"),
        (f"{PROJECT}/metrics?runs=%00", "runs"),
        (f"{RUN}/metrics?metric=a%00", "metric"),
        (f"{RUN}/points/a%00b", "metric"),
        (f"{RUN}/points?metric=%00&max_points=3", "metric"),
        (f"{PROJECT}/points?metric=loss&runs=r,%00&max_points=3", "runs"),
        (f"{RUN}/invalid?metric=%00", "metric"),
        (f"{RUN}/logs/stream?after=0&x=%00", "x"),
        (f"{RUN}/evaluation/%00/trials", "round_id"),
        (f"{RUN}/evaluation/val/trials?after=%00", "after"),
        (f"{RUN}/evaluation/val/trials/%00", "trial_id"),
        ("/api/v1/evaluation/matched?left=demo/r/%00&right=demo/r/v", "left"),
    ],
)
def test_a_nul_in_a_name_is_refused_before_the_store_sees_it(
    api: TestClient, token: dict[str, str], query: str, field: str
) -> None:
    # PostgreSQL cannot compare text holding NUL: these were 500s there.
    assert error_of(api.get(query), 422) == (field, "must not contain NUL (\\u0000) characters")
