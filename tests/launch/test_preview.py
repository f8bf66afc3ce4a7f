"""The readiness preview, on both engines through the real app: each check passed, failed
or not checked with its reason, the fixed list of what is never checked, a git source
fetched into a temporary directory that is always removed, and nothing submitted or
stored."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.launch.jobs import TINY, write_recipes
from tests.server.conftest import SECRET_PROJECT, World
from tuneplane.contract.launch import CHECK_NAMES, NEVER_CHECKED

PREVIEW = f"/api/v1/projects/{SECRET_PROJECT}/launch/preview"
GOOD = {"recipe": "tiny", "parameters": {"mode": "ok"}}


@pytest.fixture
def recipes_dir(tmp_path: Path) -> Path:
    """The launch tests' recipes, and one on an engine these servers do not drive."""
    directory = write_recipes(tmp_path / "recipes")
    on_slurm = TINY.replace('engine = "local"', 'engine = "slurm"')
    (directory / "on_slurm.toml").write_text(on_slurm)
    return directory


def _preview(world: World, body: Any, caller: str = "editor") -> dict[str, Any]:
    answer = world.client.post(PREVIEW, json=body, headers=world.callers[caller])
    assert answer.status_code == 200, answer.text
    shown: dict[str, Any] = answer.json()
    assert [check["name"] for check in shown["checks"]] == list(CHECK_NAMES)
    assert shown["submitted"] is False
    assert shown["not_checked"] == [{"name": n, "reason": r} for n, r in NEVER_CHECKED]
    return shown


def _statuses(shown: dict[str, Any]) -> dict[str, str]:
    return {check["name"]: check["status"] for check in shown["checks"]}


def _reason(shown: dict[str, Any], name: str) -> str:
    reason: str = next(c["reason"] for c in shown["checks"] if c["name"] == name)
    return reason


def test_a_ready_launch_passes_every_check_and_stores_nothing(world: World) -> None:
    client, editor = world.client, world.callers["editor"]
    runs_before = client.get(f"/api/v1/projects/{SECRET_PROJECT}/runs", headers=editor).json()
    shown = _preview(world, GOOD)
    assert _statuses(shown) == dict.fromkeys(CHECK_NAMES, "passed")
    assert shown["ready"] is True
    assert "bin/python runs (Python 3." in _reason(shown, "runtime")
    assert "1 rule hold" in _reason(shown, "configuration")
    assert "reported by the local engine now" in _reason(shown, "fleet")
    assert len(shown["fingerprint"]["sha256"]) == 64
    assert "not a checksum of every source file" in shown["fingerprint"]["covers"]
    # Never submits: no run, no job.
    runs_after = client.get(f"/api/v1/projects/{SECRET_PROJECT}/runs", headers=editor).json()
    assert runs_after == runs_before
    jobs = client.get(f"/api/v1/projects/{SECRET_PROJECT}/launch/jobs", headers=editor)
    assert jobs.json() == []


def test_parameters_and_rules_fail_with_their_reasons(world: World) -> None:
    shown = _preview(world, {"recipe": "tiny", "parameters": {"mode": "go", "lr": -1}})
    assert _statuses(shown)["parameters"] == "failed"
    assert shown["ready"] is False
    reason = _reason(shown, "parameters")
    assert "parameters.lr: -1 is less than the minimum of 0" in reason
    assert "parameters.mode: 'go' is not one of ['ok', 'fail', 'wait']" in reason
    assert _statuses(shown)["configuration"] == "not_checked"
    # A NUL in an argument could reach no program.
    nul = _preview(world, {"recipe": "noted", "parameters": {"mode": "ok", "note": "a\u0000b"}})
    assert _reason(nul, "parameters") == "a value in the command holds a NUL character"
    assert _preview(world, {"recipe": "noted", "parameters": {"mode": "ok", "note": "ab"}})["ready"]
    ruled = _preview(world, {"recipe": "tiny", "parameters": {"mode": "ok", "batch": 7}})
    assert _statuses(ruled)["configuration"] == "failed"
    assert _reason(ruled, "configuration") == ("batch % world_size == 0: whole batches per rank")
    # The config takes part in the rules; a parameter of the same name wins over it.
    configured = _preview(
        world,
        {
            "recipe": "tiny",
            "parameters": {"mode": "ok", "world_size": 3},
            "config": {"world_size": 2, "batch": 6},
        },
    )
    assert _statuses(configured)["configuration"] == "failed"
    # batch's default (8) is a parameter's value: the config's 7 does not replace it.
    assert _preview(world, {**GOOD, "config": {"batch": 7}})["ready"] is True


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary directory of the app's process, to see what it leaves behind."""
    directory = tmp_path / "scratch"
    directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    return directory


def test_a_git_source_is_checked_out_and_always_cleaned_up(world: World, scratch: Path) -> None:
    shown = _preview(world, {**GOOD, "recipe": "from_git"})
    assert _statuses(shown)["source"] == "passed", shown
    assert "was checked out" in _reason(shown, "source")
    assert list(scratch.iterdir()) == []
    gone = _preview(world, {**GOOD, "recipe": "gone_commit"})
    assert _statuses(gone)["source"] == "failed"
    assert f"cannot check out {'0' * 40}" in _reason(gone, "source")
    assert list(scratch.iterdir()) == []  # a failed checkout is removed too


def test_what_the_engine_cannot_run_or_fit_fails_and_what_it_cannot_see_is_not_checked(
    world: World,
) -> None:
    image = _preview(world, {**GOOD, "recipe": "image"})
    assert _statuses(image)["recipe"] == "failed"
    assert _reason(image, "recipe") == "the local engine cannot run a container image"
    assert _statuses(image)["runtime"] == "not_checked"
    too_big = _preview(world, {**GOOD, "recipe": "too_big"})
    assert _statuses(too_big)["fleet"] == "failed"
    assert "too few CPUs (needs 4096, has" in _reason(too_big, "fleet")
    no_env = _preview(world, {**GOOD, "recipe": "no_env"})
    assert _statuses(no_env)["runtime"] == "failed"
    assert _reason(no_env, "runtime").endswith("bin/python does not exist")
    no_dir = _preview(world, {**GOOD, "recipe": "no_dir"})
    assert _statuses(no_dir)["source"] == "failed"
    assert _reason(no_dir, "source").endswith("nowhere is not a directory")


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"parameters": {}}, 422, "recipe: required"),
        ({"recipe": "tiny", "parameters": []}, 422, "parameters: must be an object"),
        ({"recipe": "tiny", "config": "x"}, 422, "config: must be an object"),
        ({"recipe": "tiny", "extra": 1}, 422, "extra: unknown field"),
        ({"recipe": "tiny", "run": "no spaces"}, 422, "run: must be"),
        ({"recipe": "nope"}, 404, "recipe: no recipe named 'nope'"),
        ([1], 400, "body: must be a JSON object"),
    ],
)
def test_bad_input_names_the_field_and_the_rule(
    world: World, body: Any, status: int, message: str
) -> None:
    answer = world.client.post(PREVIEW, json=body, headers=world.callers["editor"])
    assert answer.status_code == status, answer.text
    assert answer.json()["error"]["message"].startswith(message)


def test_previews_need_write_access(world: World) -> None:
    for caller, status in (
        ("viewer", 403),
        ("owner_read_key", 403),
        ("outsider", 404),
        ("anonymous", 404),
        ("owner", 200),
        ("admin_key", 200),
    ):
        answer = world.client.post(PREVIEW, json=GOOD, headers=world.callers[caller])
        assert answer.status_code == status, (caller, answer.text)


def test_a_recipe_on_an_engine_the_server_does_not_drive_fails_its_check(world: World) -> None:
    shown = _preview(world, {**GOOD, "recipe": "on_slurm"})
    assert shown["ready"] is False
    assert _reason(shown, "recipe") == "the slurm engine is not configured on this server"
    assert _statuses(shown)["fleet"] == "not_checked"
    launch = PREVIEW.removesuffix("/preview")
    refused = world.client.post(
        launch, json={**GOOD, "recipe": "on_slurm"}, headers=world.callers["editor"]
    )
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["details"][0] == {
        "field": "checks.recipe",
        "rule": "the slurm engine is not configured on this server",
    }
