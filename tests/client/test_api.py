"""tuneplane.Api against a real server process on SQLite and PostgreSQL: runs, one series'
points and a run's history, exactly as reported (corrections, NaN and infinities in their
places), as lists, NumPy arrays and pandas and polars frames, read as Arrow and, on a machine
without pyarrow, as JSON; settings from the environment; the server's refusals as ApiError."""

from __future__ import annotations

import math
import random
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd
import polars as pl
import pytest

import tuneplane
from tests.conftest import scratch_postgres
from tests.serving import free_port, running_server
from tuneplane.contract.datadir import DATA_DIR_VARIABLES
from tuneplane.store import accounts
from tuneplane.store.database import Database

PROJECT = "demo"
PASSWORD = "correct horse battery"
N = 3000
EDGES = [0.0, -0.0, 5e-324, 1.7976931348623157e308, -2.2250738585072014e-308, 1 / 3]
#: Steps reported as NaN or an infinity (step 5 had a number first), and the corrected ones.
INVALID = {5: "nan", 3000: "inf", 3001: "-inf"}
CORRECTED = {10: 7.5, 2000: -8.25}


@dataclass
class Server:
    base: str
    admin_key: str
    outsider_key: str
    loss: dict[int, float]  # step -> value, NaN and infinities included


def _setup(base: str, admin: dict[str, str]) -> dict[int, float]:
    """Run r with train/loss (corrected, with invalid points), acc at even steps and 40
    more series; run r2 with one point."""
    for run in ("r", "r2"):
        assert (
            httpx.post(
                f"{base}/api/v1/projects/{PROJECT}/runs", json={"run": run}, headers=admin
            ).status_code
            == 201
        )
    token = httpx.post(f"{base}/api/v1/projects/{PROJECT}/runs/r/attempts", headers=admin)
    ingest = {"Authorization": f"Bearer {token.json()['token']}"}
    rng = random.Random(7)
    values = EDGES + [rng.uniform(-1e6, 1e6) for _ in range(N - len(EDGES))]
    bodies: list[dict[str, Any]] = [
        {
            "series": [
                {
                    "name": "train/loss",
                    "steps": list(range(b, min(b + 2000, N))),
                    "values": values[b : b + 2000],
                }
            ]
        }
        for b in range(0, N, 2000)
    ]
    bodies.append(
        {
            "series": [
                {
                    "name": "train/loss",
                    "steps": list(CORRECTED),
                    "values": list(CORRECTED.values()),
                },
                {
                    "name": "acc",
                    "steps": list(range(0, 100, 2)),
                    "values": [s / 100 for s in range(0, 100, 2)],
                },
            ],
            "invalid": [
                {"name": "train/loss", "steps": list(INVALID), "kinds": list(INVALID.values())}
            ],
        }
    )
    bodies.append(
        {"series": [{"name": f"extra/{i:02}", "steps": [1], "values": [i]} for i in range(40)]}
    )
    for body in bodies:
        stored = httpx.post(f"{base}/api/v1/ingest/scalars", json=body, headers=ingest)
        assert stored.status_code == 200, stored.text
    loss = dict(enumerate(values))
    loss.update(CORRECTED)
    loss.update(
        {
            step: {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[kind]
            for step, kind in INVALID.items()
        }
    )
    return dict(sorted(loss.items()))


def _key(base: str, login: str) -> str:
    signed_in = httpx.post(f"{base}/api/v1/session", json={"login": login, "password": PASSWORD})
    assert signed_in.status_code == 200, signed_in.text
    made = httpx.post(
        f"{base}/api/v1/keys",
        json={"name": "sdk", "scope": "read"},
        cookies=signed_in.cookies,
        headers={"Origin": base, "X-CSRF-Token": signed_in.json()["csrf_token"]},
    )
    assert made.status_code == 201, made.text
    key: str = made.json()["key"]
    return key


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("api")
    with scratch_postgres() if request.param == "postgresql" else _no_database() as pg_url:
        url = pg_url or f"sqlite:///{data / 'tuneplane.db'}"
        database = Database(url)
        database.migrate()
        database.run_write(
            lambda c: accounts.add_user(
                c, "outsider", password_hash=accounts.hash_password(PASSWORD)
            )
        )
        database.close()
        with running_server("--data-dir", str(data), "--database-url", url) as base:
            admin_key = (data / "admin.key").read_text().strip()
            loss = _setup(base, {"Authorization": f"Bearer {admin_key}"})
            yield Server(base, admin_key, _key(base, "outsider"), loss)


class _no_database:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *_: object) -> None:
        return None


def same(left: list[float], right: list[float]) -> bool:
    """Bit for bit: NaN equals NaN, 0.0 is not -0.0."""
    return len(left) == len(right) and all(
        (x != x and y != y) or (x == y and math.copysign(1, x) == math.copysign(1, y))
        for x, y in zip(left, right, strict=True)
    )


def test_a_series_reads_back_exactly_in_every_format(server: Server) -> None:
    steps, values = list(server.loss), list(server.loss.values())
    with tuneplane.Api(server.base, server.admin_key) as api:
        rows = api.points(PROJECT, "r", "train/loss")
        arrays = api.points(PROJECT, "r", "train/loss", format="numpy")
        frame = api.points(PROJECT, "r", "train/loss", format="pandas")
        polars = api.points(PROJECT, "r", "train/loss", format="polars")
        ranged = api.points(PROJECT, "r", "train/loss", start=4, end=6)
    assert [row["step"] for row in rows] == steps
    assert same([row["value"] for row in rows], values)
    invalid_times = [row["time"] for row in rows if row["step"] in INVALID]
    assert invalid_times == [None, None, None]
    assert all(row["time"] > 1e9 for row in rows if row["step"] not in INVALID)
    assert arrays["step"].dtype == np.int64
    assert arrays["step"].tolist() == steps
    assert same(arrays["value"].tolist(), values)
    assert np.isnan(arrays["time"][[5, 3000, 3001]]).all()
    assert list(frame.columns) == ["step", "value", "time"]
    assert frame["step"].tolist() == steps
    assert same(frame["value"].tolist(), values)
    assert isinstance(polars, pl.DataFrame)
    assert same(polars["value"].to_list(), values)
    assert [(row["step"], row["time"] is None) for row in ranged] == [
        (4, False),
        (5, True),
        (6, False),
    ]


def test_history_puts_series_side_by_side_by_step(server: Server) -> None:
    with tuneplane.Api(server.base, server.admin_key) as api:
        rows = api.history(PROJECT, "r", ["acc", "train/loss"], end=3)
        frame = api.history(PROJECT, "r", ["acc", "train/loss"], format="pandas")
        everything = api.history(PROJECT, "r", format="polars")
        arrays = api.history(PROJECT, "r", ["acc"], start=90, format="numpy")
    assert rows == [
        {"step": 0, "acc": 0.0, "train/loss": 0.0},
        {"step": 1, "train/loss": -0.0},
        {"step": 2, "acc": 0.02, "train/loss": 5e-324},
        {"step": 3, "train/loss": 1.7976931348623157e308},
    ]
    assert list(frame.columns) == ["step", "acc", "train/loss"]
    assert frame["step"].tolist() == list(server.loss)
    assert same(frame["train/loss"].tolist(), list(server.loss.values()))
    assert frame["acc"].iloc[2] == 0.02
    assert math.isnan(frame["acc"].iloc[1])
    extras = [f"extra/{i:02}" for i in range(40)]
    assert everything.columns == ["step", "acc", *extras, "train/loss"]
    assert everything.filter(pl.col("step") == 1)["extra/07"].to_list() == [7.0]
    assert arrays["step"].tolist() == [90, 92, 94, 96, 98]
    assert arrays["acc"].tolist() == [0.9, 0.92, 0.94, 0.96, 0.98]


def test_runs_are_listed_as_the_api_lists_them(server: Server) -> None:
    with tuneplane.Api(server.base, server.admin_key) as api:
        runs = api.runs(PROJECT)
        frame = api.runs(PROJECT, format="pandas")
        found = api.runs(PROJECT, "name = r2")
    assert [run["run"] for run in runs] == ["r", "r2"]
    assert isinstance(frame, pd.DataFrame)
    assert frame["run"].tolist() == ["r", "r2"]
    assert [run["run"] for run in found] == ["r2"]


def test_without_pyarrow_the_same_points_come_as_json(server: Server) -> None:
    """A machine without pyarrow reads the JSON columns, and gets what Arrow gives."""
    script = (
        "import sys; sys.modules['pyarrow'] = None\n"
        "import tuneplane\n"
        f"api = tuneplane.Api({server.base!r}, {server.admin_key!r})\n"
        "print(repr(api.points('demo', 'r', 'train/loss')))\n"
        "wide = api.history('demo', 'r', ['acc', 'train/loss'], format='numpy')\n"
        "print(repr(wide['acc'].tolist()))\n"
    )
    printed = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(tuneplane.__file__).parents[1],
    ).stdout
    with tuneplane.Api(server.base, server.admin_key) as api:
        rows = api.points(PROJECT, "r", "train/loss")
        acc = api.history(PROJECT, "r", ["acc", "train/loss"], format="numpy")["acc"].tolist()
    assert printed == f"{rows!r}\n{acc!r}\n"


def test_settings_come_from_the_environment(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TUNEPLANE_URL", server.base)
    monkeypatch.setenv("TUNEPLANE_API_KEY", server.admin_key)
    with tuneplane.Api() as api:
        assert api.url == server.base
        assert [run["run"] for run in api.runs(PROJECT)] == ["r", "r2"]


def test_refusals_raise_api_error_with_the_servers_message(
    server: Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Without a key: neither the variable nor an admin key in the data directory.
    monkeypatch.delenv("TUNEPLANE_API_KEY", raising=False)
    for variable in DATA_DIR_VARIABLES:
        monkeypatch.setenv(variable, str(tmp_path))
    cases = [
        (server.outsider_key, "r", "train/loss", 404, "no project named 'demo'"),
        (None, "r", "train/loss", 404, "no project named 'demo'"),
        ("tpk_" + "0" * 40, "r", "train/loss", 401, "authorization"),
        (server.admin_key, "nope", "train/loss", 404, "run 'nope' not found"),
        (server.admin_key, "r", "nope", 404, "series 'nope' not found in run 'r'"),
    ]
    for key, run, series, status, words in cases:
        with tuneplane.Api(server.base, key) as api, pytest.raises(tuneplane.ApiError) as raised:
            api.points(PROJECT, run, series)
        assert raised.value.status == status, raised.value
        assert words in raised.value.message, raised.value
    nowhere = f"http://127.0.0.1:{free_port()}"
    with (
        tuneplane.Api(nowhere, server.admin_key) as api,
        pytest.raises(tuneplane.ApiError) as raised,
    ):
        api.runs(PROJECT)
    assert raised.value.status is None
    assert "unreachable" in raised.value.message


def test_a_format_that_is_not_one_is_refused(server: Server) -> None:
    refused = "format must be one of list, numpy, pandas, polars"
    with (
        tuneplane.Api(server.base, server.admin_key) as api,
        pytest.raises(ValueError, match=refused),
    ):
        api.points(PROJECT, "r", "acc", format="arrow")  # type: ignore[arg-type]
