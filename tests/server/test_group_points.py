"""Groups charted as one (GET …/groups/points), on SQLite and PostgreSQL: the mean, min, max,
population standard deviation and run count per step (or per value of another metric),
checked against what the test posted."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

import pytest
from fastapi.testclient import TestClient

PROJECT = "/api/v1/projects/demo"
GROUPS = PROJECT + "/groups/points"


def make_run(
    api: TestClient, run: str, group: str | None, series: dict[str, Sequence[float]]
) -> None:
    """A run of ``group`` whose series ``name`` has values at steps 0, 1, …, in one batch."""
    created = api.post(f"{PROJECT}/runs", json={"run": run, "group": group})
    assert created.status_code in (200, 201), created.text
    attempt = api.post(f"{PROJECT}/runs/{run}/attempts")
    assert attempt.status_code == 201, attempt.text
    body = {
        "series": [
            {"name": name, "steps": list(range(len(values))), "values": list(values)}
            for name, values in series.items()
        ]
    }
    token = {"Authorization": f"Bearer {attempt.json()['token']}"}
    stored = api.post("/api/v1/ingest/scalars", json=body, headers=token)
    assert stored.status_code == 200, stored.text


def expected(values: list[float]) -> dict[str, Any]:
    """What a cell holds when the runs' values there are ``values`` (a run's value being a
    mean the server sums in another order: equal to the last few bits)."""
    return {
        "mean": pytest.approx(statistics.fmean(values), rel=1e-12),
        "min": pytest.approx(min(values), rel=1e-12),
        "max": pytest.approx(max(values), rel=1e-12),
        "std": pytest.approx(statistics.pstdev(values), rel=1e-9, abs=1e-12),
        "n": len(values),
    }


def cells(group: dict[str, Any]) -> list[dict[str, Any]]:
    keys = ("mean", "min", "max", "std", "n")
    return [{key: bucket[key] for key in keys} for bucket in group["buckets"]]


def loss(seed: int, n: int) -> list[float]:
    return [2.0 / (1 + step) + 0.1 * math.sin(seed * 7 + step) for step in range(n)]


def test_a_group_is_its_runs_mean_band_and_count_per_step(api: TestClient) -> None:
    runs = {"s1": loss(1, 10), "s2": loss(2, 10), "s3": loss(3, 6)}
    for run, values in runs.items():
        make_run(api, run, "seeds", {"train/loss": values})
    make_run(api, "solo", None, {"train/loss": loss(4, 10)})
    make_run(api, "other-a", "other", {"reward": [1.0]})
    params: dict[str, str | int] = {
        "metric": "train/loss",
        "runs": "s1,solo,s2,other-a,s3",
        "max_points": 100,
    }
    answer = api.get(GROUPS, params=params).json()
    assert answer["metric"] == "train/loss"
    assert answer["ungrouped"] == ["solo"]
    seeds, other = answer["groups"]
    assert (seeds["group"], seeds["runs"], seeds["missing"]) == ("seeds", ["s1", "s2", "s3"], [])
    assert (other["group"], other["runs"], other["missing"]) == ("other", [], ["other-a"])
    assert other["buckets"] == []
    assert (seeds["downsampled"], seeds["total_points"]) == (False, 26)
    # Steps 6-9 are only s1's and s2's: n says so.
    want = [expected([v[step] for v in runs.values() if step < len(v)]) for step in range(10)]
    assert cells(seeds) == want
    assert [b["n"] for b in seeds["buckets"]] == [3] * 6 + [2] * 4
    assert [(b["x"], b["step_min"], b["step_max"]) for b in seeds["buckets"]] == [
        (float(step), step, step) for step in range(10)
    ]


def test_a_downsampled_group_pairs_the_runs_buckets_by_step(api: TestClient) -> None:
    runs = {f"d{seed}": loss(seed, 200) for seed in range(3)}
    for run, values in runs.items():
        make_run(api, run, "long", {"train/loss": values})
    names = ",".join(runs)
    whole = api.get(GROUPS, params={"metric": "train/loss", "runs": names, "max_points": 10})
    group = whole.json()["groups"][0]
    assert (group["downsampled"], group["total_points"]) == (True, 600)
    # Ten cells of twenty steps; each run's value in a cell is the mean of its points there.
    means = [[statistics.fmean(v[c * 20 : c * 20 + 20]) for c in range(10)] for v in runs.values()]
    assert cells(group) == [expected([m[c] for m in means]) for c in range(10)]
    assert [(b["step_min"], b["step_max"], b["x"]) for b in group["buckets"]] == [
        (c * 20, c * 20 + 19, c * 20 + 9.5) for c in range(10)
    ]
    # A zoomed range is gridded from its own first step.
    params: dict[str, str | int] = {
        "metric": "train/loss",
        "runs": names,
        "max_points": 10,
        "start": 50,
        "end": 149,
    }
    zoomed = api.get(GROUPS, params=params).json()["groups"][0]
    means = [
        [statistics.fmean(v[50 + c * 10 : 60 + c * 10]) for c in range(10)] for v in runs.values()
    ]
    assert cells(zoomed) == [expected([m[c] for m in means]) for c in range(10)]
    assert zoomed["total_points"] == 300


def test_over_another_metric_the_runs_are_paired_by_its_value(api: TestClient) -> None:
    # One epoch a step in e1, one every two steps in e2: paired by epoch, not by step.
    e1 = loss(1, 10)
    e2 = loss(2, 20)
    make_run(api, "e1", "epochs", {"train/loss": e1, "train/epoch": [float(s) for s in range(10)]})
    make_run(api, "e2", "epochs", {"train/loss": e2, "train/epoch": [s // 2 for s in range(20)]})
    make_run(api, "e3", "epochs", {"train/loss": loss(3, 20)})  # no epoch: no place on the axis
    params: dict[str, str | int] = {
        "metric": "train/loss",
        "runs": "e1,e2,e3",
        "max_points": 10,
        "x": "train/epoch",
    }
    group = api.get(GROUPS, params=params).json()["groups"][0]
    assert group["runs"] == ["e1", "e2", "e3"]
    want = [
        expected([e1[epoch], statistics.fmean(e2[2 * epoch : 2 * epoch + 2])])
        for epoch in range(10)
    ]
    assert cells(group) == want
    assert [b["x"] for b in group["buckets"]] == [float(epoch) for epoch in range(10)]


def test_bad_group_reads_are_named(api: TestClient) -> None:
    make_run(api, "g1", "g", {"m": [1.0, 2.0]})
    unknown = api.get(GROUPS, params={"metric": "m", "runs": "g1,nope", "max_points": 5})
    assert unknown.status_code == 404
    assert "nope" in unknown.json()["error"]["message"]
    no_width = api.get(GROUPS, params={"metric": "m", "runs": "g1"})
    assert no_width.status_code == 422
    assert no_width.json()["error"]["details"][0]["field"] == "max_points"
    too_many = ",".join(f"r{i}" for i in range(65))
    refused = api.get(GROUPS, params={"metric": "m", "runs": too_many, "max_points": 5})
    assert refused.status_code == 422
    assert refused.json()["error"]["details"][0]["field"] == "runs"


def test_a_group_says_where_its_runs_reported_nan_or_infinity(api: TestClient) -> None:
    for run in ("n1", "n2", "n3"):
        make_run(api, run, "nans", {"train/loss": [1.0, 2.0, 3.0, 4.0]})
    token = {"Authorization": f"Bearer {_attempt(api, 'n2')}"}
    marks = {"invalid": [{"name": "train/loss", "steps": [1, 5], "kinds": ["nan", "inf"]}]}
    assert api.post("/api/v1/ingest/scalars", json=marks, headers=token).status_code == 200
    token = {"Authorization": f"Bearer {_attempt(api, 'n3')}"}
    marks = {"invalid": [{"name": "train/loss", "steps": [1], "kinds": ["-inf"]}]}
    assert api.post("/api/v1/ingest/scalars", json=marks, headers=token).status_code == 200
    params: dict[str, str | int] = {"metric": "train/loss", "runs": "n1,n2,n3", "max_points": 50}
    group = api.get(GROUPS, params=params).json()["groups"][0]
    assert group["invalid"] == [
        {"step": 1, "kind": "nan", "runs": ["n2", "n3"]},
        {"step": 5, "kind": "inf", "runs": ["n2"]},
    ]
    # At step 1 only n1 holds a number: the mean is its value, of one run.
    assert [(b["step_min"], b["n"], b["mean"]) for b in group["buckets"][:2]] == [
        (0, 3, 1.0),
        (1, 1, 2.0),
    ]
    zoomed = api.get(GROUPS, params={**params, "start": 2, "end": 3}).json()["groups"][0]
    assert zoomed["invalid"] == []


def _attempt(api: TestClient, run: str) -> str:
    """A new attempt of ``run``: its ingest token."""
    attempt = api.post(f"{PROJECT}/runs/{run}/attempts")
    assert attempt.status_code == 201, attempt.text
    token: str = attempt.json()["token"]
    return token
