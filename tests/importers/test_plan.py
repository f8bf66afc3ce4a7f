"""The import plan: every rule refused with the file, the field and the plan entry."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.importers.cohort import DIGESTS, make_trial, plan, trial_result, write_plan
from tuneplane.importers.paths import locate_attempts
from tuneplane.importers.plan import EXAMPLE_PLAN, load_plan, parse_plan
from tuneplane.importers.problems import ImportRefused


def refused(document: object) -> list[str]:
    with pytest.raises(ImportRefused) as caught:
        parse_plan("import-plan.json", document)
    return [str(p) for p in caught.value.problems]


def one_trial(**attempt_fields: object) -> dict[str, object]:
    return {
        "task": "t",
        "repeat": 0,
        "attempts": [{"retry": 0, "directory": "d", **attempt_fields}],
    }


def test_a_valid_plan_reads_in_task_repeat_retry_order() -> None:
    parsed = parse_plan(
        "p.json",
        plan(
            [
                {
                    "task": "b",
                    "repeat": 1,
                    "attempts": [
                        {"retry": 2, "directory": "b1/x"},
                        {"retry": 0, "directory": "b1/./y"},
                    ],
                },
                {"task": "b", "repeat": 0, "attempts": []},
                {"task": "a", "repeat": 0, "trial_id": "alpha", "attempts": []},
            ]
        ),
    )
    assert [(t.trial_id, t.task, t.repeat) for t in parsed.trials] == [
        ("alpha", "a", 0),
        ("b-r0", "b", 0),
        ("b-r1", "b", 1),
    ]
    assert [(a.retry, a.directory) for a in parsed.trials[2].attempts] == [(0, "b1/y"), (2, "b1/x")]


def test_the_example_plan_is_refused_for_each_placeholder_by_name() -> None:
    problems = refused(json.loads(EXAMPLE_PLAN))
    fields = [p.split(": ")[1] for p in problems]
    assert fields == [
        "digests.dataset",
        "digests.verifier",
        "digests.runtime",
        "digests.harness",
        "checkpoint.digest",
    ]
    assert all("placeholder 'REPLACE_" in p for p in problems)


def test_with_real_digests_the_example_plan_reads() -> None:
    example = json.loads(EXAMPLE_PLAN)
    example["digests"] = dict(DIGESTS)
    example["checkpoint"]["digest"] = "a" * 64
    assert len(parse_plan("p.json", example).trials) == 3


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("A" * 64, "must be lowercase"),
        ("a" * 63, "64 lowercase hexadecimal digits"),
        ("g" * 64, "64 lowercase hexadecimal digits"),
        (64, "64 lowercase hexadecimal digits"),
        ("REPLACE_ME", "placeholder 'REPLACE_ME'"),
    ],
)
@pytest.mark.parametrize("name", ["dataset", "verifier", "runtime", "harness"])
def test_a_malformed_digest_is_refused_naming_its_field(
    name: str, value: object, rule: str
) -> None:
    document = plan([one_trial()])
    document["digests"][name] = value
    (problem,) = refused(document)
    assert problem.startswith(f"import-plan.json: digests.{name}: ")
    assert rule in problem


def test_every_digest_is_required_and_no_other() -> None:
    document = plan([one_trial()])
    del document["digests"]["runtime"]
    document["digests"]["model"] = "a" * 64
    problems = refused(document)
    assert any(p.startswith("import-plan.json: digests.runtime: required") for p in problems)
    assert any(p.startswith("import-plan.json: digests.model: unknown field") for p in problems)


def test_the_checkpoint_is_required_and_outside_the_protocol_fingerprint() -> None:
    assert any(
        "checkpoint: required" in p for p in refused({**plan([one_trial()]), "checkpoint": None})
    )
    first = parse_plan("p", plan([one_trial()], checkpoint={"name": "m@1"}))
    other_checkpoint = parse_plan("p", plan([one_trial()], checkpoint={"name": "m@2"}))
    assert first.population_digests() == other_checkpoint.population_digests()
    assert first.checkpoint != other_checkpoint.checkpoint
    other_settings = parse_plan("p", plan([one_trial()], settings={"timeout_multiplier": 2}))
    runtime = dict(DIGESTS, runtime="9" * 64)
    other_runtime = parse_plan("p", plan([one_trial()], digests=runtime))
    for changed in (other_settings, other_runtime):
        assert changed.population_digests()["settings"] != first.population_digests()["settings"]
        assert changed.population_digests()["cohort"] == first.population_digests()["cohort"]
    assert first.population_digests()["dataset"] == DIGESTS["dataset"]
    assert first.population_digests()["verifier"] == DIGESTS["verifier"]


def test_the_cohort_digest_follows_the_planned_trials() -> None:
    one = parse_plan("p", plan([one_trial()]))
    two = parse_plan("p", plan([one_trial(), {"task": "u", "repeat": 0, "attempts": []}]))
    assert one.population_digests()["cohort"] != two.population_digests()["cohort"]


@pytest.mark.parametrize(
    ("directory", "rule"),
    [
        ("/abs/trial", "is absolute"),
        ("C:/trial", "is absolute"),
        ("../outside", "contains '..'"),
        ("a/../../b", "contains '..'"),
        ("a\\b", "without backslashes"),
        (".", "is --root itself"),
        ("", "required"),
        (None, "required"),
    ],
)
def test_a_directory_outside_the_root_is_refused_naming_the_entry(
    directory: object, rule: str
) -> None:
    (problem,) = refused(plan([one_trial(directory=directory)]))
    assert problem.startswith("import-plan.json: trials[0].attempts[0].directory: ")
    assert "trials[0] (task 't', repeat 0)" in problem
    assert rule in problem


def test_a_directory_used_by_two_attempts_is_refused() -> None:
    document = plan(
        [
            one_trial(directory="jobs/x"),
            {"task": "u", "repeat": 0, "attempts": [{"retry": 1, "directory": "jobs/./x"}]},
        ]
    )
    (problem,) = refused(document)
    assert problem.startswith("import-plan.json: trials[1].attempts[0].directory: ")
    assert "is also used by trials[0].attempts[0] (task 't', retry 0)" in problem


def test_a_directory_inside_another_attempts_is_refused() -> None:
    document = plan(
        [
            {
                "task": "t",
                "repeat": 0,
                "attempts": [
                    {"retry": 0, "directory": "jobs/x"},
                    {"retry": 1, "directory": "jobs/x/inner"},
                ],
            }
        ]
    )
    (problem,) = refused(document)
    assert "trials[0].attempts[1].directory" in problem
    assert "lies inside trials[0].attempts[0]'s directory 'jobs/x'" in problem


@pytest.mark.parametrize(
    ("trials", "field", "rule"),
    [
        ([{"task": "t", "repeat": 0}], "trials[0].attempts", "required: a list"),
        ([{"task": "t", "repeat": -1, "attempts": []}], "trials[0].repeat", "nonnegative integer"),
        (
            [{"task": "t", "repeat": True, "attempts": []}],
            "trials[0].repeat",
            "nonnegative integer",
        ),
        ([{"repeat": 0, "attempts": []}], "trials[0].task", "required"),
        (
            [{"task": "t", "repeat": 0, "attempts": [{"directory": "d"}]}],
            "trials[0].attempts[0].retry",
            "nonnegative",
        ),
        (
            [{"task": "t", "repeat": 0, "attempts": [], "colour": 1}],
            "trials[0].colour",
            "unknown field",
        ),
        ([{"task": "a/b", "repeat": 0, "attempts": []}], "trials[0].trial_id", "give one"),
        (
            [{"task": "t", "repeat": 0, "trial_id": "a b", "attempts": []}],
            "trials[0].trial_id",
            "ASCII",
        ),
        ([], "trials", "at least one trial"),
    ],
)
def test_each_trial_rule(trials: list[object], field: str, rule: str) -> None:
    problems = refused(plan(trials))
    assert any(p.startswith(f"import-plan.json: {field}: ") and rule in p for p in problems), (
        problems
    )


def test_a_retry_number_and_a_task_repeat_are_each_used_once() -> None:
    document = plan(
        [
            {
                "task": "t",
                "repeat": 0,
                "attempts": [{"retry": 1, "directory": "a"}, {"retry": 1, "directory": "b"}],
            },
            {"task": "t", "repeat": 0, "trial_id": "other", "attempts": []},
        ]
    )
    problems = refused(document)
    assert any("trials[0].attempts[1].retry" in p and "retry 1 is also" in p for p in problems)
    assert any(
        p.startswith("import-plan.json: trials[1]: ") and "same task and repeat" in p
        for p in problems
    )


def test_top_level_rules() -> None:
    problems = refused({**plan([one_trial()]), "round": "has space", "plan_version": 2, "extra": 1})
    assert any(p.startswith("import-plan.json: round: ") for p in problems)
    assert any(p.startswith("import-plan.json: plan_version: ") for p in problems)
    assert any(p.startswith("import-plan.json: extra: unknown field") for p in problems)
    assert refused([]) == ["import-plan.json: must be a JSON object (see --example-plan)"]


def test_a_plan_file_that_is_not_json(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text("{nope")
    with pytest.raises(ImportRefused, match=r"p\.json: is not JSON"):
        load_plan(str(path))
    with pytest.raises(ImportRefused, match="cannot be read"):
        load_plan(str(tmp_path / "missing.json"))


# -- directories on disk ------------------------------------------------------------------


def located(tmp_path: Path, directory: str) -> object:
    parsed = load_plan(write_plan(tmp_path, plan([one_trial(directory=directory)])))
    return locate_attempts(parsed, str(tmp_path / "root"))


def test_a_symlink_on_the_path_is_refused(tmp_path: Path) -> None:
    make_trial(tmp_path / "elsewhere", "trial", trial_result("t"))
    (tmp_path / "root").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "root" / "jobs")
    with pytest.raises(ImportRefused) as caught:
        located(tmp_path, "jobs/trial")
    (problem,) = map(str, caught.value.problems)
    assert "trials[0].attempts[0].directory" in problem
    assert "(task 't', repeat 0), retry 0" in problem
    assert "jobs is a symbolic link" in problem


def test_a_symlinked_trial_directory_is_refused(tmp_path: Path) -> None:
    make_trial(tmp_path, "real", trial_result("t"))
    (tmp_path / "root").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "root" / "trial")
    with pytest.raises(ImportRefused, match="trial is a symbolic link"):
        located(tmp_path, "trial")


def test_a_symlink_inside_a_trial_directory_is_refused(tmp_path: Path) -> None:
    trial = make_trial(tmp_path / "root", "trial", trial_result("t"), reward_txt="1\n")
    (tmp_path / "secret.txt").write_text("1\n")
    os.remove(trial / "verifier" / "reward.txt")
    os.symlink(tmp_path / "secret.txt", trial / "verifier" / "reward.txt")
    with pytest.raises(
        ImportRefused, match=r"verifier/reward.txt inside the trial directory is a symbolic link"
    ):
        located(tmp_path, "trial")


def test_a_missing_directory_is_located_as_nothing_and_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    (only,) = located(tmp_path, "not/there")  # type: ignore[misc]
    assert only.path is None
    (tmp_path / "root" / "file").write_text("")
    with pytest.raises(ImportRefused, match="is not a directory"):
        located(tmp_path, "file")
    with pytest.raises(ImportRefused, match="--root must be a directory"):
        locate_attempts(load_plan(write_plan(tmp_path, plan([one_trial()]))), str(tmp_path / "no"))
