"""Searching, sorting and choosing columns of the runs list through the API, evaluated by
SQLite and PostgreSQL alike; bad queries answer 422 naming the part that is wrong."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.server.conftest import admin_client
from tests.server.test_run_management import API
from tuneplane.server.settings import Settings

RUNS = API + "/lab/runs"

#: (run, config, group, tags, summary metrics as {name: [values in step order]}).
CATALOG: list[tuple[str, dict[str, Any], str | None, list[str], dict[str, list[float]]]] = [
    ("a", {"lr": 3e-5, "model": "qwen2.5-7b", "opt": {"name": "adam"}}, "sweep", ["base"],
     {"reward": [0.1, 0.9], "loss": [0.5, 0.2]}),
    ("b", {"lr": 1e-3, "model": "qwen2.5-7b", "lora": True}, "sweep", [],
     {"reward": [0.7, 0.6], "loss": [0.9, 0.4]}),
    ("c", {"lr": "auto", "model": "llama-3-8b"}, None, ["base", "long"],
     {"reward": [0.95]}),
    ("d", {}, "seeds", ["long"], {}),
]  # fmt: skip


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    for client in admin_client(settings):
        for name, config, group, tags, series in CATALOG:
            body = {"run": name, "config": config, "group": group, "tags": tags}
            assert client.post(RUNS, json=body).status_code == 201
            token = client.post(f"{RUNS}/{name}/attempts", json={"config": {"seed": len(name)}})
            auth = {"Authorization": f"Bearer {token.json()['token']}"}
            batch = [
                {"name": metric, "steps": list(range(len(values))), "values": values}
                for metric, values in series.items()
            ]
            if batch:
                sent = client.post("/api/v1/ingest/scalars", json={"series": batch}, headers=auth)
                assert sent.status_code == 200, sent.text
        yield client


def names(api: TestClient, **params: str) -> list[str]:
    answer = api.get(RUNS, params=params)
    assert answer.status_code == 200, answer.text
    return [run["run"] for run in answer.json()]


QUERIES = [
    ("", ["a", "b", "c", "d"]),
    ("config.lr < 1e-4", ["a"]),
    ("config.lr >= 3e-5", ["a", "b"]),
    ("config.model = qwen2.5-7b", ["a", "b"]),
    ("config.model != qwen2.5-7b", ["c"]),
    ("config.model ~ LLAMA", ["c"]),
    ('config.lr = "auto"', ["c"]),
    ("config.lora = true", ["b"]),
    ("config.opt.name = adam", ["a"]),
    ("attempt.config.seed = 1", ["a", "b", "c", "d"]),
    ("attempt.config.seed > 1", []),
    ("reward.last > 0.8", ["a", "c"]),
    ("reward.max >= 0.7 and loss.min < 0.3", ["a"]),
    ("loss.count = 2", ["a", "b"]),
    ("tag = base", ["a", "c"]),
    ("tag != base", ["b", "d"]),
    ("tag=long tag=base", ["c"]),
    ("group = sweep", ["a", "b"]),
    ("group != sweep", ["c", "d"]),
    ("status = none", ["a", "b", "c", "d"]),
    ("status = running", []),
    ("points > 1", ["a", "b"]),
    ("name ~ A", ["a"]),
    ("seeds", ["d"]),
    ("long", ["c", "d"]),
]
SORTS = [
    ("-created_at", ["d", "c", "b", "a"]),
    ("reward.last", ["b", "a", "c", "d"]),
    ("-reward.last", ["c", "a", "b", "d"]),
    ("config.lr", ["a", "b", "c", "d"]),  # numbers, then text, then none
    ("-config.lr", ["b", "a", "c", "d"]),
    ("group", ["d", "a", "b", "c"]),
    ("-points", ["b", "a", "c", "d"]),  # a tie: the newest first
]


def test_a_query_keeps_the_runs_that_match(api: TestClient) -> None:
    wrong = [(q, names(api, q=q), want) for q, want in QUERIES if names(api, q=q) != want]
    assert wrong == []


def test_any_column_sorts_and_runs_without_a_value_come_last(api: TestClient) -> None:
    """Config values sort numbers first, then text; runs without one come last."""
    wrong = [(s, names(api, sort=s), want) for s, want in SORTS if names(api, sort=s) != want]
    assert wrong == []


def test_chosen_columns_a_page_and_the_total(api: TestClient) -> None:
    answer = api.get(
        RUNS,
        params={"q": "config.model ~ qwen", "sort": "-reward.last", "limit": "1",
                "columns": "config.lr,config.opt.name,reward.last,loss.min"},
    )  # fmt: skip
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-total-count"] == "2"
    (run,) = answer.json()
    assert run["run"] == "a"
    assert run["columns"] == {
        "config.lr": 3e-5, "config.opt.name": "adam", "reward.last": 0.9, "loss.min": 0.2,
    }  # fmt: skip
    second = api.get(RUNS, params={"q": "config.model ~ qwen", "sort": "-reward.last",
                                   "limit": "1", "offset": "1"})  # fmt: skip
    assert [r["run"] for r in second.json()] == ["b"]
    beyond = api.get(RUNS, params={"offset": "10"})
    assert (beyond.json(), beyond.headers["x-total-count"]) == ([], "4")


BAD = [
    ({"q": "config.lr <"}, "q", "config.lr <"),
    ({"q": "loss.median < 3"}, "q", "loss.median"),
    ({"q": "reward.last > high"}, "q", "reward.last > high"),
    ({"q": "config.model < qwen"}, "q", "config.model < qwen"),
    ({"q": "status = sleeping"}, "q", "status = sleeping"),
    ({"q": 'name = "open'}, "q", '"open'),
    ({"q": "tag ~ x"}, "q", "tag ~ x"),
    ({"sort": "config.a b"}, "sort", "config.a b"),
    ({"sort": "-wat"}, "sort", "wat"),
    ({"columns": "status"}, "columns", "status"),
    ({"columns": ",".join(f"config.k{i}" for i in range(17))}, "columns", "at most 16"),
]


def test_a_bad_query_is_a_422_naming_the_bad_part(api: TestClient) -> None:
    wrong = []
    for params, field, names_part in BAD:
        answer = api.get(RUNS, params=params)
        detail = answer.json()["error"]["details"][0] if answer.status_code == 422 else {}
        if detail.get("field") != field or names_part not in detail.get("rule", ""):
            wrong.append((params, answer.status_code, answer.text))
    assert wrong == []
