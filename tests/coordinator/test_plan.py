"""The evaluation plan and the command's refusals, on this interpreter (3.11), where
Harbor is not installed: ``--check-plan`` and every refusal work without it."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from tests.coordinator.cohort import DIGESTS, eval_run, write_plan, write_task
from tuneplane.coordinator.plan import EVAL_TRIALS_MAX, import_plan, load_eval_plan
from tuneplane.importers.plan import parse_plan
from tuneplane.importers.problems import ImportRefused


def test_harbor_is_not_installed_here() -> None:
    # What makes the tests of this module mean "without Harbor".
    assert importlib.util.find_spec("harbor") is None


def test_check_plan_checks_paths_and_declarations_without_harbor(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, ["hello-a", "world-b"], repeats=2)
    done = eval_run("--plan", str(plan), "--check-plan")
    assert done.returncode == 0, done.stderr
    assert "4 trials of 2 tasks, round 'scripted'" in done.stderr
    assert not (tmp_path / "out").exists()


def test_the_plan_becomes_an_import_plan_with_the_declared_denominator(tmp_path: Path) -> None:
    plan = load_eval_plan(str(write_plan(tmp_path, ["world-b", "hello-a"], repeats=2)))
    assert [t.trial_id for t in plan.trials] == [
        "hello-a-r0",
        "hello-a-r1",
        "world-b-r0",
        "world-b-r1",
    ]
    assert plan.trials[0].task_path == (tmp_path / "tasks" / "hello-a").resolve()
    runs = {
        "hello-a-r0": [(0, "trials/hello-a-r0"), (1, "retry-1/hello-a-r0")],
        "hello-a-r1": [(0, "trials/hello-a-r1")],
    }
    document = import_plan(plan, runs, {"harbor": "x"}, "e1")
    imported = parse_plan("import-plan.json", document)
    assert [len(t.attempts) for t in imported.trials] == [2, 1, 0, 0]
    assert imported.trials[0].attempts[0].directory == "trials/hello-a-r0"
    assert imported.trials[0].attempts[1].directory == "retry-1/hello-a-r0"
    assert imported.population_digests()["dataset"] == DIGESTS["dataset"]
    assert imported.settings == {"harbor": "x"}
    assert imported.execution == "e1"
    # The checkpoint is recorded beside the round, its agent fields are the plan's own.
    assert imported.checkpoint == {"name": "scripted/model@1"}
    assert plan.model == {"model_name": "scripted/step-1"}


def _problems(tmp_path: Path, **overrides: object) -> list[str]:
    plan = write_plan(tmp_path, ["hello-a"], **overrides)
    with pytest.raises(ImportRefused) as refused:
        load_eval_plan(str(plan))
    return [f"{p.field}: {p.rule}" for p in refused.value.problems]


def _trial(**fields: object) -> dict[str, object]:
    return {"trials": [{"task": "hello-a", "repeat": 0, **fields}]}


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"digests": {**DIGESTS, "runtime": "REPLACE_X"}}, "digests.runtime: is the placeholder"),
        ({"deadline_seconds": 0}, "deadline_seconds: must be a number of seconds greater than 0"),
        ({"trial_config": {"trial_name": "x"}}, "trial_config.trial_name: is set by the"),
        ({"trial_config": []}, "trial_config: required: a Harbor TrialConfig"),
        (
            {"trial_config": {"agent": {"name": "x", "model_name": "m"}}},
            "trial_config.agent.model_name: is the checkpoint's: give it as checkpoint.model_name",
        ),
        (
            {"trial_config": {"agent": {"base_url": "http://m"}}},
            "trial_config.agent.base_url: is the checkpoint's: give it as checkpoint.base_url",
        ),
        (
            {"checkpoint": {"name": "n", "model_name": 3}},
            "checkpoint.model_name: must be a string of 1-1024 characters",
        ),
        ({"checkpoint": {"name": "n", "port": 3}}, "checkpoint.port: unknown field"),
        (_trial(), "trials[0].path: required"),
        (_trial(path="tasks/none"), "trials[0].path: 'tasks/none' is not a directory"),
        (
            _trial(task="other", path="tasks/hello-a"),
            "trials[0].task: is 'other', but Harbor names the task at 'tasks/hello-a' 'hello-a'",
        ),
        (_trial(path="tasks/hello-a", attempts=[]), "trials[0].attempts: is the coordinator's"),
        ({"settings": {}}, "settings: unknown field"),
        ({"round": "has space"}, "round: required: the round ID's prefix"),
    ],
)
def test_a_plan_breaking_a_rule_is_refused_naming_the_field(
    tmp_path: Path, overrides: dict[str, object], expected: str
) -> None:
    problems = _problems(tmp_path, **overrides)
    assert any(problem.startswith(expected) for problem in problems), problems


def test_a_plan_of_more_than_128_trials_is_refused(tmp_path: Path) -> None:
    problems = _problems(tmp_path, repeats=EVAL_TRIALS_MAX + 1)
    assert f"trials: {EVAL_TRIALS_MAX + 1} trials: one execution runs {EVAL_TRIALS_MAX}" in problems


def test_a_task_directory_without_task_toml_is_refused(tmp_path: Path) -> None:
    write_task(tmp_path / "tasks", "hello-a")
    (tmp_path / "tasks" / "hello-a" / "task.toml").unlink()
    problems = _problems(tmp_path)
    assert any("has no task.toml (not a Harbor task directory)" in p for p in problems), problems


def test_task_toml_may_name_the_task(tmp_path: Path) -> None:
    task = write_task(tmp_path / "tasks", "renamed")
    (task / "task.toml").write_text('[task]\nname = "hello-a"\n' + (task / "task.toml").read_text())
    plan = write_plan(
        tmp_path, [], trials=[{"task": "hello-a", "repeat": 0, "path": "tasks/renamed"}]
    )
    assert load_eval_plan(str(plan)).trials[0].task_path.name == "renamed"


def test_a_bad_plan_is_refused_on_the_command_line_before_harbor_is_looked_for(
    tmp_path: Path,
) -> None:
    plan = write_plan(tmp_path, ["hello-a"], deadline=-1)
    done = eval_run("--plan", str(plan), "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert "deadline_seconds: must be a number" in done.stderr
    assert "Harbor" not in done.stderr
    assert not (tmp_path / "out").exists()


def test_the_output_directory_must_be_new(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, ["hello-a"])
    out = tmp_path / "out"
    out.mkdir()
    (out / "execution.json").write_text("{}")
    for extra in ((), ("--check-plan",)):
        done = eval_run("--plan", str(plan), "--out", str(out), *extra)
        assert done.returncode == 2, done.stderr
        assert "already exists: an execution writes a new directory" in done.stderr
        assert "add --resume to continue the execution in it" in done.stderr
    assert [p.name for p in out.iterdir()] == ["execution.json"]


def test_resume_needs_an_execution_of_the_same_plan(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, ["hello-a"])
    out = tmp_path / "out"
    done = eval_run("--plan", str(plan), "--out", str(out), "--resume")
    assert done.returncode == 2, done.stderr
    assert "--resume: holds no execution.json, so no execution to continue" in done.stderr
    out.mkdir()
    (out / "execution.json").write_text("{}")
    (out / "plan.json").write_text(plan.read_text().replace("scripted", "other"))
    done = eval_run("--plan", str(plan), "--out", str(out), "--resume")
    assert done.returncode == 2, done.stderr
    assert "--resume: differs from" in done.stderr
    assert "the plan the execution started with" in done.stderr
    assert "Harbor" not in done.stderr


def test_without_harbor_the_command_says_so_in_one_line(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, ["hello-a"])
    done = eval_run("--plan", str(plan), "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Harbor needs Python 3.12 or newer" in lines[0]
    assert "TUNEPLANE_HARBOR_PYTHON" in lines[0]
    assert not (tmp_path / "out").exists()


def test_an_interpreter_without_harbor_says_so_after_the_reexecution(tmp_path: Path) -> None:
    # TUNEPLANE_HARBOR_PYTHON names this 3.11 interpreter: it is started, and says why it
    # cannot run Harbor either, instead of starting itself again.
    plan = write_plan(tmp_path, ["hello-a"])
    done = eval_run(
        "--plan", str(plan), "--out", str(tmp_path / "out"), harbor_python=Path(sys.executable)
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"and {sys.executable} is 3.11" in lines[0]


def test_a_harbor_python_that_is_no_executable_is_refused(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, ["hello-a"])
    done = eval_run(
        "--plan", str(plan), "--out", str(tmp_path / "out"), harbor_python=tmp_path / "nope"
    )
    assert done.returncode == 2
    assert "TUNEPLANE_HARBOR_PYTHON=" in done.stderr
    assert "must be an executable file" in done.stderr


def test_the_example_plan_is_a_plan(tmp_path: Path) -> None:
    done = eval_run("--example-plan")
    assert done.returncode == 0
    example = json.loads(done.stdout)
    assert example["trials"][0]["path"] == "tasks/hello-world"
    write_task(tmp_path / "tasks", "hello-world")
    example["digests"] = DIGESTS
    del example["checkpoint"]["digest"]
    (tmp_path / "plan.json").write_text(json.dumps(example))
    assert len(load_eval_plan(str(tmp_path / "plan.json")).trials) == 2
