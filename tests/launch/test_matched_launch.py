"""A matched benchmark pair end to end through a real server process on the local engine:
two training runs register exports of tiny models (built from a configuration, no
download), the preview checks both sides with equal protocol digests, each side starts as
its own job running the real lm-eval on a local task, both land as evaluation rounds, and
the pair answers the address of their matched view, which the matched API serves with
matching digests. Bad choices are refused naming the field, starting nothing."""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.launch.benchmark import OFFLINE, TASK, tiny_model, write_benchmark
from tests.launch.jobs import write_recipes
from tests.launch.slurm_cluster import slurm_cluster
from tests.launch.test_submit import PROJECT, Server
from tests.serving import running_server
from tuneplane import Reporter
from tuneplane.client.exports import register_export
from tuneplane.contract.matched_launch import MATCHED_CONFIG_KEY

MATCHED = f"/api/v1/projects/{PROJECT}/launch/matched"


@contextlib.contextmanager
def serving(tmp: Path, engine: str = "local", **env: str) -> Iterator[Server]:
    """A server on SQLite with the tiny recipes and the lm-eval benchmark on ``engine``."""
    tmp.mkdir(parents=True, exist_ok=True)
    recipes = write_recipes(tmp / "recipes")
    write_benchmark(recipes, engine)
    env |= {
        "TUNEPLANE_DIR": str(tmp / "data"),
        "TUNEPLANE_RECIPES_DIR": str(recipes),
        "HF_HOME": str(tmp / "hf"),
        **OFFLINE,
    }
    url = f"sqlite:///{tmp / 'data' / 'tuneplane.db'}"
    with running_server("--database-url", url, env=env) as base:
        opened = Server.opened(base, tmp / "data")
        yield opened
        opened.http.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Every job is a real lm-eval process: the module shares one server."""
    with serving(tmp_path_factory.mktemp("matched")) as opened:
        yield opened


def trained(server: Server, run: str, model: Path) -> dict[str, Any]:
    """A training run that registered ``model`` as its export; the export as listed."""
    runs = f"/api/v1/projects/{PROJECT}/runs"
    assert server.http.post(runs, json={"run": run}).status_code == 201
    token = server.http.post(f"{runs}/{run}/attempts").json()["token"]
    base = str(server.http.base_url).rstrip("/")
    with Reporter(base, f"{PROJECT}/{run}", token, attempt=1, flush_interval=0.05) as reporter:
        assert register_export(reporter, model, step=100)
        assert reporter.flush(10)
    exports: list[dict[str, Any]] = server.http.get(f"{runs}/{run}/exports").json()
    return exports[-1]


def body(left: dict[str, Any], right: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {
        "recipe": "bench",
        "parameters": {"tasks": TASK},
        "limit": 6,
        "left": {"run": "train-a", "export": left["export_id"]},
        "right": {"run": "train-b", "export": right["export_id"]},
        **more,
    }


def two_exports(server: Server, tmp: Path) -> dict[str, Any]:
    return {
        "a": trained(server, "train-a", tiny_model(tmp / "a", seed=1)),
        "b": trained(server, "train-b", tiny_model(tmp / "b", seed=2)),
    }


@pytest.fixture(scope="module")
def exports(server: Server, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return two_exports(server, tmp_path_factory.mktemp("models"))


def wait_finished(server: Server, pair: str, timeout: float = 600) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        answer: dict[str, Any] = server.http.get(f"{MATCHED}/{pair}").json()
        states = [s["job"]["state"] for s in answer["sides"].values() if s["job"]]
        if answer["finished"] or any(state in ("failed", "lost", "cancelled") for state in states):
            return answer
        assert time.monotonic() < deadline, answer
        time.sleep(1)


def ends_in_a_matched_view(
    server: Server, pair: str, left: dict[str, Any], right: dict[str, Any]
) -> None:
    """Both sides finish, each run says what it evaluated, and the pair's matched view
    answers with the same protocol on both sides and the difference shown."""
    done = wait_finished(server, pair)
    assert done["finished"], done
    for side, export in (("left", left), ("right", right)):
        run = server.run(f"{pair}-{side}")
        block = run["config"]["config"][MATCHED_CONFIG_KEY]
        assert (block["side"], block["export"]["digest"]) == (side, export["digest"])
        assert run["config"]["parameters"]["model"] == export["uri"]
        assert run["config"]["parameters"]["limit"] == 6
        assert [r["task"] for r in done["sides"][side]["rounds"]] == [TASK]
    [matched] = done["matched"]
    assert matched["task"] == TASK
    evidence = server.http.get(
        "/api/v1/evaluation/matched",
        params={
            "left": matched["left"],
            "right": matched["right"],
            "left_attempt": done["sides"]["left"]["attempt"],
            "right_attempt": done["sides"]["right"]["attempt"],
        },
    )
    assert evidence.status_code == 200, evidence.text
    found = evidence.json()
    # Same task, documents, scoring and settings: the difference is shown.
    assert found["left"]["digests"] == found["right"]["digests"]
    assert found["difference"]["shown"] is True, found["difference"]
    assert found["left"]["counts"]["reported"] == found["right"]["counts"]["reported"] == 6
    page = server.http.get(matched["url"])
    assert page.status_code == 200


def test_a_matched_pair_ends_in_a_matched_view(server: Server, exports: dict[str, Any]) -> None:
    left, right = exports["a"], exports["b"]
    assert left["digest"] != right["digest"]  # two models: different weights
    preview = server.http.post(f"{MATCHED}/preview", json=body(left, right))
    assert preview.status_code == 200, preview.text
    shown = preview.json()
    assert (shown["ready"], shown["same_protocol"], shown["submitted"]) == (True, True, False)
    sides = shown["sides"]
    assert sides["left"]["protocol"] == sides["right"]["protocol"]
    assert sides["left"]["export"]["digest"] == left["digest"]
    assert sides["right"]["report"]["ready"] is True
    pair = shown["pair"]
    assert server.jobs() == []  # a preview starts nothing

    # Starting one side starts that side only.
    started = server.http.post(MATCHED, json=body(left, right, pair=pair, side="left"))
    assert started.status_code == 201, started.text
    job = started.json()["job"]
    assert (job["run"], job["recipe"]) == (f"{pair}-left", "bench")
    assert [j["run"] for j in server.jobs()] == [f"{pair}-left"]
    waiting = server.http.get(f"{MATCHED}/{pair}").json()
    assert waiting["sides"]["right"]["job"] is None
    assert (waiting["finished"], waiting["matched"]) == (False, [])
    # Starting it again answers the same job.
    again = server.http.post(MATCHED, json=body(left, right, pair=pair, side="left"))
    assert (again.status_code, again.json()["job"]["id"]) == (200, job["id"])

    assert (
        server.http.post(MATCHED, json=body(left, right, pair=pair, side="right")).status_code
        == 201
    )
    ends_in_a_matched_view(server, pair, left, right)


def test_bad_choices_are_refused_naming_the_field(server: Server, exports: dict[str, Any]) -> None:
    left, right = exports["a"], exports["b"]
    cases = [
        ({**body(left, right), "recipe": "tiny"}, 422, "recipe"),
        ({**body(left, right), "limit": 0}, 422, "limit"),
        (
            {**body(left, right), "parameters": {"tasks": TASK, "model": "x"}},
            422,
            "parameters.model",
        ),
        ({**body(left, right), "right": {"run": "train-b", "export": "nope"}}, 404, None),
        ({**body(left, right), "left": {"run": "train-a"}}, 422, "left"),
    ]
    for sent, status, field in cases:
        answer = server.http.post(f"{MATCHED}/preview", json=sent)
        assert answer.status_code == status, (sent, answer.text)
        if field is not None:
            assert field in [d["field"] for d in answer.json()["error"]["details"]], answer.text
    no_pair = server.http.post(MATCHED, json=body(left, right, side="left"))
    assert no_pair.status_code == 422
    assert [d["field"] for d in no_pair.json()["error"]["details"]] == ["pair"]
    assert server.http.get(f"{MATCHED}/not-a-pair").status_code == 404
    unstarted = server.http.get(f"{MATCHED}/matched-00000000").json()
    assert (unstarted["finished"], unstarted["sides"]["left"]["job"]) == (False, None)
    assert not [j for j in server.jobs() if j["recipe"] == "bench" and "nope" in j["run"]]


def test_a_matched_pair_on_slurm(tmp_path: Path) -> None:
    """The same pair, each side a Slurm batch job (tests/launch/slurm_cluster.py)."""
    if shutil.which("sbatch") is None:  # scripts/test installs slurm-wlm and munge
        pytest.fail("Slurm's commands are not installed (apt-get install slurm-wlm munge)")
    with (
        slurm_cluster(tmp_path / "slurm") as cluster,
        serving(tmp_path / "home", "slurm", TUNEPLANE_SLURM_CONF=str(cluster.conf)) as server,
    ):
        left, right = two_exports(server, tmp_path).values()
        shown = server.http.post(f"{MATCHED}/preview", json=body(left, right)).json()
        assert (shown["ready"], shown["same_protocol"]) == (True, True), shown
        fleet = shown["sides"]["left"]["report"]["checks"][4]
        assert fleet["reason"].endswith("reported by the slurm engine now"), fleet
        for side in ("left", "right"):
            started = server.http.post(
                MATCHED, json=body(left, right, pair=shown["pair"], side=side)
            )
            assert started.json()["job"]["engine"] == "slurm", started.text
        ends_in_a_matched_view(server, shown["pair"], left, right)
