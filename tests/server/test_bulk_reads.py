"""Bulk reads (GET …/columns), on SQLite and PostgreSQL: every original point of many
series exactly as stored, in JSON and as an Arrow stream that agree, corrected steps and
invalid points, step ranges, a streamed long series, several runs, and the access rules of
the point reads."""

from __future__ import annotations

import math
import random
from typing import Any

import pyarrow as pa
from fastapi.testclient import TestClient

from tests.server.conftest import OPEN_PROJECT, SECRET_PROJECT, World

PROJECT = "/api/v1/projects/demo"
ARROW = {"Accept": "application/vnd.apache.arrow.stream"}
#: Values JSON and Arrow must carry exactly: the extremes of float64 and their neighbours.
EDGES = [
    0.0,
    -0.0,
    5e-324,
    -5e-324,
    2.2250738585072014e-308,
    1.7976931348623157e308,
    -1.7976931348623157e308,
    0.1,
    1 / 3,
    123456789.123456789,
    -2.5e-17,
]


def start_run(api: TestClient, run: str) -> dict[str, str]:
    """A run of the demo project and the ingest token of its attempt."""
    assert api.post(f"{PROJECT}/runs", json={"run": run}).status_code in (200, 201)
    attempt = api.post(f"{PROJECT}/runs/{run}/attempts")
    assert attempt.status_code == 201, attempt.text
    return {"Authorization": f"Bearer {attempt.json()['token']}"}


def post(api: TestClient, token: dict[str, str], body: dict[str, Any]) -> None:
    stored = api.post("/api/v1/ingest/scalars", json=body, headers=token)
    assert stored.status_code == 200, stored.text


def send_series(
    api: TestClient, token: dict[str, str], name: str, steps: list[int], values: list[float]
) -> None:
    for begin in range(0, len(steps), 2048):
        part = slice(begin, begin + 2048)
        post(api, token, {"series": [{"name": name, "steps": steps[part], "values": values[part]}]})


def from_arrow(content: bytes) -> dict[tuple[str, str], dict[str, list[Any]]]:
    """Each series' columns of an Arrow stream, in stream order."""
    table = pa.ipc.open_stream(content).read_all()
    found: dict[tuple[str, str], dict[str, list[Any]]] = {}
    for row in table.to_pylist():
        columns = found.setdefault(
            (row["run"], row["metric"]), {"steps": [], "values": [], "times": []}
        )
        columns["steps"].append(row["step"])
        columns["values"].append(row["value"])
        columns["times"].append(row["time"])
    return found


def same(left: list[float], right: list[float]) -> bool:
    """Equal float for float, bit for bit (NaN equals NaN, 0.0 is not -0.0)."""
    return [math.copysign(1, x) for x in left] == [math.copysign(1, x) for x in right] and all(
        (x != x and y != y) or x == y for x, y in zip(left, right, strict=True)
    )


def test_a_run_reads_back_exactly_in_json_and_arrow(api: TestClient) -> None:
    rng = random.Random(24)
    token = start_run(api, "r")
    values = EDGES + [rng.uniform(-1e6, 1e6) for _ in range(3000 - len(EDGES))]
    send_series(api, token, "train/loss", list(range(3000)), values)
    # Steps 10 and 2000 corrected; NaN and infinities at steps of their own and at step 5,
    # which had a number and loses it.
    post(
        api,
        token,
        {"series": [{"name": "train/loss", "steps": [10, 2000], "values": [7.5, -8.25]}]},
    )
    invalid = {"name": "train/loss", "steps": [5, 3000, 3001], "kinds": ["nan", "inf", "-inf"]}
    post(api, token, {"series": [], "invalid": [invalid]})
    many = [{"name": f"s/{i:03}", "steps": [0, 7], "values": [i, -i / 7]} for i in range(300)]
    post(api, token, {"series": many})
    values[10], values[2000] = 7.5, -8.25
    expected_steps = [s for s in range(3000) if s != 5]
    expected_values = [v for s, v in enumerate(values) if s != 5]

    answer = api.get(f"{PROJECT}/runs/r/columns")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/json"
    body = answer.json()
    assert [s["metric"] for s in body["series"]] == [
        *(f"s/{i:03}" for i in range(300)),
        "train/loss",
    ]
    assert body["missing"] == []
    loss = body["series"][-1]
    assert loss["run"] == "r"
    assert loss["steps"] == expected_steps
    assert same(loss["values"], expected_values)
    assert len(loss["times"]) == 2999
    assert all(t > 1e9 for t in loss["times"])
    assert loss["invalid"] == {"steps": [5, 3000, 3001], "kinds": ["nan", "inf", "-inf"]}
    assert body["series"][3] == {**body["series"][3], "steps": [0, 7], "values": [3.0, -3 / 7]}

    arrow = api.get(f"{PROJECT}/runs/r/columns", headers=ARROW)
    assert arrow.headers["content-type"] == "application/vnd.apache.arrow.stream"
    series = from_arrow(arrow.content)
    assert list(series) == [("r", s["metric"]) for s in body["series"]]
    arrow_loss = series["r", "train/loss"]
    # The invalid points follow the valid ones, as their NaN or infinity with no time.
    assert arrow_loss["steps"] == [*expected_steps, 5, 3000, 3001]
    assert same(arrow_loss["values"], [*expected_values, math.nan, math.inf, -math.inf])
    assert arrow_loss["times"] == [*loss["times"], None, None, None]
    for s in body["series"][:-1]:
        got = series["r", s["metric"]]
        assert (got["steps"], got["values"], got["times"]) == (s["steps"], s["values"], s["times"])


def test_named_series_and_a_step_range(api: TestClient) -> None:
    token = start_run(api, "r")
    send_series(api, token, "a", list(range(0, 4000, 2)), [float(s) for s in range(0, 4000, 2)])
    post(
        api,
        token,
        {
            "series": [{"name": "b", "steps": [1], "values": [1.0]}],
            "invalid": [{"name": "b", "steps": [3, 999], "kinds": ["nan", "inf"]}],
        },
    )
    query = {"metric": ["a", "nope", "b", "a"], "start": 999, "end": 2501}
    body = api.get(f"{PROJECT}/runs/r/columns", params=query).json()
    a, b = body["series"]
    assert a["metric"] == "a"
    assert a["steps"] == list(range(1000, 2501, 2))
    assert a["values"] == [float(s) for s in a["steps"]]
    assert b == {
        "run": "r",
        "metric": "b",
        "steps": [],
        "values": [],
        "times": [],
        "invalid": {"steps": [999], "kinds": ["inf"]},
    }
    assert body["missing"] == [{"run": "r", "metric": "nope"}]
    arrow = from_arrow(api.get(f"{PROJECT}/runs/r/columns", params=query, headers=ARROW).content)
    assert arrow["r", "a"]["steps"] == a["steps"]
    assert arrow["r", "b"]["steps"] == [999]


def test_a_long_series_is_streamed_whole(api: TestClient) -> None:
    """Past 200,000 points the answer is streamed a page of blocks at a time."""
    token = start_run(api, "long")
    n = 210_000
    send_series(api, token, "x", list(range(n)), [s * 0.25 for s in range(n)])
    body = api.get(f"{PROJECT}/runs/long/columns", params={"metric": "x"}).json()
    assert body["series"][0]["steps"] == list(range(n))
    assert body["series"][0]["values"] == [s * 0.25 for s in range(n)]
    table = pa.ipc.open_stream(api.get(f"{PROJECT}/runs/long/columns", headers=ARROW).content)
    read = table.read_all()
    assert read.column("step").to_pylist() == list(range(n))
    assert read.column("value").to_pylist() == [s * 0.25 for s in range(n)]
    assert read.column("time").to_pylist() == body["series"][0]["times"]


def test_several_runs_in_one_read(api: TestClient) -> None:
    for run, offset in (("r1", 0.0), ("r2", 100.0)):
        token = start_run(api, run)
        post(
            api,
            token,
            {"series": [{"name": "loss", "steps": [0, 1], "values": [offset, offset + 1]}]},
        )
    post(api, start_run(api, "r3"), {"series": [{"name": "other", "steps": [0], "values": [1.0]}]})
    body = api.get(f"{PROJECT}/columns", params={"runs": "r2,r1,r3", "metric": "loss"}).json()
    assert [(s["run"], s["values"]) for s in body["series"]] == [
        ("r2", [100.0, 101.0]),
        ("r1", [0.0, 1.0]),
    ]
    assert body["missing"] == [{"run": "r3", "metric": "loss"}]
    arrow = from_arrow(
        api.get(f"{PROJECT}/columns", params={"runs": "r1,r2"}, headers=ARROW).content
    )
    assert list(arrow) == [("r1", "loss"), ("r2", "loss")]
    assert api.get(f"{PROJECT}/columns", params={"runs": "r1,nope"}).status_code == 404


BAD = [
    ({"start": 10, "end": 9}, "end", "must be at least start"),
    ({"start": -1}, "start", "greater than or equal to 0"),
    ({"end": 2**63}, "end", "less than or equal to"),
    ({"start": "x"}, "start", "valid integer"),
]


def test_bad_parameters_name_the_field_and_the_rule(api: TestClient) -> None:
    start_run(api, "r")
    for query, field, rule in BAD:
        answer = api.get(f"{PROJECT}/runs/r/columns", params=query)
        assert answer.status_code == 422, answer.text
        detail = answer.json()["error"]["details"][0]
        assert detail["field"] == field, detail
        assert rule in detail["rule"], detail


def test_the_runs_parameter_is_required_and_bounded(api: TestClient) -> None:
    start_run(api, "r")
    for query in ({}, {"runs": ","}, {"runs": ",".join(f"r{i}" for i in range(65))}):
        answer = api.get(f"{PROJECT}/columns", params=query)
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["details"][0]["field"] == "runs"


def test_bulk_reads_follow_the_point_reads_rules(world: World) -> None:
    client, callers = world.client, world.callers
    secret = f"/api/v1/projects/{SECRET_PROJECT}"
    reads = [f"{secret}/runs/r1/columns", f"{secret}/columns?runs=r1"]
    for path in reads:
        for caller in ("owner", "viewer", "reader", "admin_key", "share_link", "owner_read_key"):
            answer = client.get(path, headers=callers[caller])
            assert answer.status_code == 200, (caller, path, answer.text)
            assert answer.json()["series"][0]["values"] == [0.5]
            arrow = client.get(path, headers={**callers[caller], **ARROW})
            assert from_arrow(arrow.content)["r1", "loss"]["values"] == [0.5]
        for caller in ("outsider", "anonymous", "other_share_link", "expired_share_link"):
            for headers in (callers[caller], {**callers[caller], **ARROW}):
                answer = client.get(path, headers=headers)
                assert answer.status_code in (401, 404), (caller, path, answer.text)
                assert "loss" not in answer.text
        for caller in ("ingest_token", "arena_secret", "revoked_key"):
            assert client.get(path, headers=callers[caller]).status_code in (401, 403, 404)
    # A share link of r1 reads no other run, alone or beside its own.
    for path in (f"{secret}/runs/r2/columns", f"{secret}/columns?runs=r1,r2"):
        assert client.get(path, headers=callers["share_link"]).status_code in (403, 404)
    public = f"/api/v1/projects/{OPEN_PROJECT}/runs/r1/columns"
    assert client.get(public, headers=callers["anonymous"]).status_code == 200
