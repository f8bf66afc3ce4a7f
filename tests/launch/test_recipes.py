"""Recipes: the shipped examples load, every problem of a recipe is one line naming its file,
field and rule (``tuneplane serve`` stops with them, exit 2), and the API lists them to
signed-in callers on both engines."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.serving import free_port
from tests.test_bad_settings import clean_environment
from tuneplane.contract.settings import SettingError
from tuneplane.launch.recipes import load_recipes, render_command
from tuneplane.server.app import create_app
from tuneplane.server.settings import Settings

EXAMPLES = Path(__file__).parents[2] / "examples" / "recipes"

GOOD = """
description = "a tiny job"
engine = "local"
command = ["python", "job.py", "--lr", "{lr}"]
rules = [{ check = "batch % world_size == 0", message = "whole batches per rank" }]

[source]
path = "."

[runtime]
python = "/usr"

[parameters]
type = "object"
required = ["lr"]

[parameters.properties]
lr = { type = "number", minimum = 0 }
batch = { type = "integer", default = 8 }
world_size = { type = "integer", default = 2 }
"""


def test_the_shipped_examples_load() -> None:
    recipes = load_recipes(EXAMPLES)
    assert sorted(recipes) == ["grpo", "harbor_cohort", "lm_eval", "sft"]
    assert {name: r.kind for name, r in recipes.items()} == {
        "grpo": "training",
        "sft": "training",
        "lm_eval": "evaluation",
        "harbor_cohort": "evaluation",
    }
    assert recipes["harbor_cohort"].command[:3] == ("tuneplane", "eval", "run")
    assert recipes["grpo"].rules[0].check.endswith("% num_generations == 0")
    for recipe in recipes.values():
        assert recipe.source.directory == EXAMPLES / "scripts"
        assert recipe.engine == "local"


def test_a_good_recipe_reads_whole(tmp_path: Path) -> None:
    (tmp_path / "tiny.toml").write_text(GOOD)
    recipe = load_recipes(tmp_path)["tiny"]
    assert recipe.command == ("python", "job.py", "--lr", "{lr}")
    assert recipe.source.directory == tmp_path.resolve()
    assert (recipe.resources.cpus, recipe.resources.gpus) == (1, 0)
    assert render_command(recipe.command, {"lr": 1e-5}) == ["python", "job.py", "--lr", "1e-05"]
    assert recipe.spec()["rules"] == [
        {"check": "batch % world_size == 0", "message": "whole batches per rank"}
    ]


def _edit(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new)


BAD = [
    (
        _edit('engine = "local"', 'engine = "kubernetes"'),
        "engine: must be one of local, slurm, ray",
    ),
    (_edit('engine = "local"', 'engine = "local"\ncolour = 1'), "colour: unknown field"),
    (
        _edit('"{lr}"]', '"{learning_rate}"]'),
        "command[3]: {learning_rate} is not a parameter of the recipe (parameters.properties)",
    ),
    (
        _edit('command = ["python", "job.py", "--lr", "{lr}"]', "command = []"),
        "command: must be a non-empty list of strings",
    ),
    (_edit("batch % world_size == 0", "batch %% world_size"), "rules[0].check: unexpected '%'"),
    (_edit("batch % world_size == 0", "__import__('os')"), "rules[0].check: unexpected"),
    (
        _edit("default = 8 }", 'default = "eight" }'),
        "parameters.properties.batch.default: 'eight' is not of type 'integer'",
    ),
    (
        _edit("minimum = 0 }", 'format = "email" }'),
        "parameters.properties.lr.format: is not a supported schema keyword",
    ),
    (
        _edit('type = "object"', 'type = "array"'),
        'parameters: must be a JSON Schema of type "object"',
    ),
    (
        _edit('path = "."', 'path = "."\ngit = "https://example.com/x.git"'),
        "source: must be a table with path (a directory) or with git and commit",
    ),
    (
        _edit('path = "."', 'git = "https://example.com/x.git"\ncommit = "main"'),
        "source.commit: must be a full commit hash (40 lowercase hex digits)",
    ),
    (
        _edit('python = "/usr"', 'python = "venv"'),
        "runtime.python: must be an absolute path to a Python environment",
    ),
    (
        _edit("[runtime]", "[resources]\ngpus = -1\n\n[runtime]"),
        "resources.gpus: must be a whole number from 0 to 1024",
    ),
    (
        _edit("[runtime]", "[resources]\nmemory_gb = 0\n\n[runtime]"),
        "resources.memory_gb: must be a number of GB greater than 0",
    ),
    (
        _edit("[runtime]", "[resources]\ntime_minutes = -5\n\n[runtime]"),
        "resources.time_minutes: must be a number of minutes greater than 0 and at most 525600",
    ),
    ("engine = ", "is not valid TOML"),
]


@pytest.mark.parametrize(("text", "expected"), BAD)
def test_each_problem_is_one_line_naming_file_field_and_rule(
    tmp_path: Path, text: str, expected: str
) -> None:
    (tmp_path / "tiny.toml").write_text(text)
    with pytest.raises(SettingError) as raised:
        load_recipes(tmp_path)
    assert len(raised.value.problems) == 1, raised.value.problems
    assert raised.value.problems[0].startswith(f"{tmp_path / 'tiny.toml'}: {expected}")


def test_every_file_s_problems_are_listed_at_once(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text(_edit('engine = "local"', 'engine = "kubernetes"'))
    (tmp_path / "b.json").write_text(json.dumps({"engine": "local"}))
    (tmp_path / "bad name.toml").write_text(GOOD)
    (tmp_path / "c.toml").write_text(GOOD)
    (tmp_path / "c.json").write_text(json.dumps({**_as_json(tmp_path / "c.toml")}))
    with pytest.raises(SettingError) as raised:
        load_recipes(tmp_path)
    problems = raised.value.problems
    assert f"{tmp_path / 'a.toml'}: engine: must be one of local, slurm, ray" in problems
    assert any(p.startswith(f"{tmp_path / 'b.json'}: command:") for p in problems)
    assert any(p.startswith(f"{tmp_path / 'b.json'}: source:") for p in problems)
    assert any(p.startswith(f"{tmp_path / 'bad name.toml'}: name:") for p in problems)
    assert f"{tmp_path / 'c.toml'}: a second recipe named 'c' (.toml and .json)" in problems


def _as_json(path: Path) -> dict[str, object]:
    import tomllib

    return tomllib.loads(path.read_text())


def test_serve_stops_on_a_bad_recipe_with_one_line_each(tmp_path: Path) -> None:
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "a.toml").write_text(_edit('engine = "local"', 'engine = "kubernetes"'))
    (recipes / "b.toml").write_text(_edit("batch % world_size == 0", "batch % "))
    (recipes / "good.toml").write_text(GOOD)
    env = {
        **clean_environment(tmp_path),
        "TUNEPLANE_PORT": str(free_port()),
        "TUNEPLANE_RECIPES_DIR": str(recipes),
    }
    done = subprocess.run(
        [sys.executable, "-m", "tuneplane.cli", "serve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        f"tuneplane: {recipes / 'a.toml'}: engine: must be one of local, slurm, ray",
        f"tuneplane: {recipes / 'b.toml'}: rules[0].check: ends too early",
    ]
    assert done.returncode == 2


@pytest.fixture
def recipes_api(settings: Settings, tmp_path: Path) -> Iterator[TestClient]:
    recipes = tmp_path / "listed"
    recipes.mkdir()
    (recipes / "tiny.toml").write_text(GOOD)
    (recipes / "sft.toml").write_text((EXAMPLES / "sft.toml").read_text())
    configured = dataclasses.replace(settings, recipes_dir=recipes)
    with TestClient(create_app(configured), raise_server_exceptions=False) as client:
        yield client


def test_the_api_lists_recipes_to_signed_in_callers(
    recipes_api: TestClient, settings: Settings
) -> None:
    admin = {"Authorization": f"Bearer {(settings.data_dir / 'admin.key').read_text().strip()}"}
    listed = recipes_api.get("/api/v1/recipes", headers=admin)
    assert listed.status_code == 200, listed.text
    assert [r["name"] for r in listed.json()] == ["sft", "tiny"]
    one = recipes_api.get("/api/v1/recipes/tiny", headers=admin).json()
    assert one["command"] == ["python", "job.py", "--lr", "{lr}"]
    assert one["parameters"]["required"] == ["lr"]
    assert one["resources"] == {"gpus": 0, "cpus": 1, "memory_gb": 1.0, "time_minutes": None}
    missing = recipes_api.get("/api/v1/recipes/nope", headers=admin)
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "recipe: no recipe named 'nope'"
    for path in ("/api/v1/recipes", "/api/v1/recipes/tiny"):
        assert recipes_api.get(path).status_code == 401
