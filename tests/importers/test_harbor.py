"""The status mapping of a Harbor trial directory, rule by rule, on real and written files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.importers.cohort import ASYNC, DATAGEN, DRAFT, ETL, make_trial, trial_result
from tests.shared_fixtures import TWINS, real_fixture
from tuneplane.importers.harbor import Evidence, map_outcome, read_attempt


def outcome(
    tmp_path: Path, result: dict[str, Any] | None, **files: Any
) -> tuple[str, float | None, str | None]:
    directory = make_trial(tmp_path, "trial", result, **files)
    evidence, problems = read_attempt(directory, "t", "trials[0]")
    assert problems == []
    mapped = map_outcome(evidence)
    return mapped.status, mapped.reward, mapped.error_type


#: The twin cohort: Harbor's files of trials of our own, one renamed after its run and
#: one inside its job's directory.
COHORT = TWINS / "harbor" / "cohort"
RENAMED = COHORT / "log_rotation_race" / "renamed_2025-12-01"
JOB = COHORT / "csv_dedupe" / "job_2025-12-01__10-30-00"


@pytest.mark.parametrize(
    ("directory", "task", "status", "reward", "trial_name"),
    [
        pytest.param(
            DATAGEN / ETL,
            "etl_checkpoint_resume_bug",
            "failure",
            0.0,
            "etl_checkpoint_resume_bug__cdwMJ5R",
            marks=real_fixture,
        ),
        pytest.param(
            DATAGEN / DRAFT, "draft_dp_96443054", "success", 1.0, None, marks=real_fixture
        ),
        pytest.param(
            DATAGEN / ASYNC, "fix-async-worker-queue", "failure", 0.0, None, marks=real_fixture
        ),
        (RENAMED, "log_rotation_race", "failure", 0.0, "log_rotation_race__Hq2Zs8d"),
        (JOB / "csv_dedupe__Vb7Kp1m", "csv_dedupe", "success", 1.0, None),
    ],
)
def test_the_fixtures_map_to_their_verdicts(
    directory: Path, task: str, status: str, reward: float, trial_name: str | None
) -> None:
    evidence, problems = read_attempt(directory, task, "trials[0]")
    assert problems == []
    assert evidence.reward_file == "verifier/reward.txt"  # holding "0\n" or "1\n"
    assert (map_outcome(evidence).status, map_outcome(evidence).reward) == (status, reward)
    # Renamed after the run: the directory's name is not the trial's name.
    if trial_name is not None:
        assert evidence.facts["trial_name"] == trial_name != directory.name
    assert evidence.facts["naive_timestamps"] is True
    assert evidence.facts["duration_seconds"] > 0


@pytest.mark.parametrize(
    ("directory", "task"),
    [
        pytest.param(DATAGEN / Path(DRAFT).parent, "draft_dp_96443054", marks=real_fixture),
        (JOB, "csv_dedupe"),
    ],
)
def test_a_job_directory_is_not_a_trial(directory: Path, task: str) -> None:
    _, problems = read_attempt(directory, task, "trials[0]")
    assert len(problems) == 1
    assert "is a Harbor job's result.json; name a trial's directory" in str(problems[0])


def test_binary_rewards_are_verdicts(tmp_path: Path) -> None:
    assert outcome(tmp_path / "a", trial_result(rewards={"reward": 1})) == ("success", 1.0, None)
    assert outcome(tmp_path / "b", trial_result(rewards={"reward": 0.0})) == ("failure", 0.0, None)


@pytest.mark.parametrize("value", [0.5, 2, -1, 0.999, True, False, "1", None, [1]])
def test_a_non_binary_reward_is_unscored(tmp_path: Path, value: object) -> None:
    status, reward, _ = outcome(tmp_path, trial_result(rewards={"reward": value}))
    assert status == "unscored"
    assert reward == (
        None if isinstance(value, bool) or not isinstance(value, int | float) else value
    )


def test_a_missing_reward_is_unscored(tmp_path: Path) -> None:
    assert outcome(tmp_path / "a", trial_result(rewards=None))[0] == "unscored"
    assert outcome(tmp_path / "b", trial_result(rewards={}))[0] == "unscored"


def test_an_attempt_without_a_result_is_unscored_even_with_a_reward_file(tmp_path: Path) -> None:
    assert outcome(tmp_path, None, reward_txt="1\n") == ("unscored", None, None)
    assert map_outcome(Evidence(False)).reason.startswith("no result.json")
    assert map_outcome(Evidence(False)).code == "no_result"


def test_a_verifier_timeout_is_an_infrastructure_error(tmp_path: Path) -> None:
    result = trial_result(rewards=None, exception="VerifierTimeoutError")
    assert outcome(tmp_path / "a", result) == ("infra_error", None, "VerifierTimeoutError")
    # Even with a reward file left behind by the first verification try.
    assert outcome(tmp_path / "b", result, reward_txt="1\n")[0] == "infra_error"


@pytest.mark.parametrize(
    ("reward", "status"), [(1.0, "success"), (0, "failure"), (0.5, "unscored")]
)
def test_an_agent_timeout_keeps_a_valid_binary_verdict(
    tmp_path: Path, reward: float, status: str
) -> None:
    result = trial_result(rewards={"reward": reward}, exception="AgentTimeoutError")
    assert outcome(tmp_path, result) == (status, reward, "AgentTimeoutError")


@pytest.mark.parametrize(
    "exception",
    ["RuntimeError", "NonZeroAgentExitCodeError", "EnvironmentStartTimeoutError", "CancelledError"],
)
def test_any_other_exception_is_unscored_even_with_a_reward(tmp_path: Path, exception: str) -> None:
    result = trial_result(rewards={"reward": 1.0}, exception=exception)
    assert outcome(tmp_path, result, reward_txt="1\n") == ("unscored", 1.0, exception)


def test_the_reward_file_counts_when_result_json_recorded_none(tmp_path: Path) -> None:
    assert outcome(tmp_path / "a", trial_result(rewards=None), reward_txt="1\n")[0] == "success"
    assert outcome(tmp_path / "b", trial_result(rewards=None), reward_txt=" 0 \n")[0] == "failure"
    assert outcome(tmp_path / "c", trial_result(rewards=None), reward_txt="")[0] == "unscored"
    assert outcome(tmp_path / "d", trial_result(rewards=None), reward_txt="yes\n")[0] == "unscored"


def test_result_json_and_the_reward_file_must_agree(tmp_path: Path) -> None:
    directory = make_trial(
        tmp_path, "trial", trial_result(rewards={"reward": 1.0}), reward_txt="0\n"
    )
    mapped = map_outcome(read_attempt(directory, "t", "trials[0]")[0])
    assert mapped.status == "unscored"
    assert mapped.reason == "result.json's reward 1 differs from verifier/reward.txt's 0"
    assert mapped.code == "reward_mismatch"


@pytest.mark.parametrize(
    ("rewards", "status"),
    [
        ({"reward": 1, "tests_passed": 7, "tests_total": 9}, "success"),
        ({"reward": 0.0, "partial": 0.5}, "failure"),
        ({"reward": 0.5, "binary": 1}, "unscored"),
        ({"accuracy": 1.0}, "success"),
        ({"accuracy": 1.0, "pass": 1.0}, "unscored"),
    ],
)
def test_a_multi_key_reward_json_is_decided_by_its_reward_key(
    tmp_path: Path, rewards: dict[str, float], status: str
) -> None:
    assert outcome(tmp_path / "a", trial_result(rewards=None), reward_json=rewards)[0] == status
    assert outcome(tmp_path / "b", trial_result(rewards=rewards))[0] == status


def test_reward_txt_is_read_before_reward_json(tmp_path: Path) -> None:
    files = {"reward_txt": "0\n", "reward_json": {"reward": 1}}
    assert outcome(tmp_path, trial_result(rewards=None), **files)[0] == "failure"


def test_unreadable_or_misattributed_results_are_problems(tmp_path: Path) -> None:
    directory = make_trial(tmp_path, "a", None)
    (directory / "result.json").write_text("{cut")
    (problem,) = read_attempt(directory, "t", "trials[0] (task 't', repeat 0), retry 0")[1]
    assert str(problem).startswith(
        f"{directory / 'result.json'}: trials[0] (task 't', repeat 0), retry 0: is not JSON"
    )
    other = make_trial(tmp_path, "b", trial_result("u"))
    (problem,) = read_attempt(other, "t", "trials[0]")[1]
    assert problem.field == "task_name"
    assert "is 'u', but the plan's task is 't'" in problem.rule
    shaped = make_trial(tmp_path, "c", trial_result(verifier_result={"rewards": [1]}))
    assert [p.field for p in read_attempt(shaped, "t", "trials[0]")[1]] == [
        "verifier_result.rewards"
    ]
    exception = make_trial(tmp_path, "d", trial_result(exception_info={"message": "x"}))
    assert [p.field for p in read_attempt(exception, "t", "trials[0]")[1]] == [
        "exception_info.exception_type"
    ]


def test_a_later_harbor_with_z_timestamps_and_schema_version_reads(tmp_path: Path) -> None:
    result = trial_result(
        rewards={"reward": 1.0},
        schema_version=1,
        step_results=None,
        started_at="2026-01-02T03:04:05Z",
        finished_at="2026-01-02T03:04:07.5Z",
    )
    directory = make_trial(tmp_path, "trial", result)
    evidence, problems = read_attempt(directory, "t", "trials[0]")
    assert problems == []
    assert evidence.facts["duration_seconds"] == 2.5
    assert "naive_timestamps" not in evidence.facts


rewards = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
)
exceptions = st.sampled_from([None, "AgentTimeoutError", "VerifierTimeoutError", "RuntimeError"])


@given(reward=rewards, exception=exceptions, has_result=st.booleans())
def test_the_mapping_is_exactly_the_rule(
    reward: object, exception: str | None, has_result: bool
) -> None:
    evidence = Evidence(has_result, exception_type=exception, rewards={"reward": reward})
    binary = type(reward) in (int, float) and reward in (0, 1)
    if not has_result:
        expected = "unscored"
    elif exception == "VerifierTimeoutError":
        expected = "infra_error"
    elif exception not in (None, "AgentTimeoutError") or not binary:
        expected = "unscored"
    else:
        expected = "success" if reward == 1 else "failure"
    assert map_outcome(evidence).status == expected
    json.dumps(map_outcome(evidence).reward, allow_nan=False)  # a reward sent is finite


@pytest.mark.parametrize(
    ("result", "reward_txt", "code"),
    [
        (trial_result(rewards={"reward": 1}), None, "binary_reward"),
        (trial_result(rewards=None), None, "no_reward"),
        (trial_result(rewards={"a": 1, "b": 0}), None, "no_verdict"),
        (trial_result(rewards={"reward": 0.5}), None, "non_binary_reward"),
        (trial_result(rewards={"reward": 1}), "0\n", "reward_mismatch"),
        (trial_result(rewards={"reward": 1}, exception="RuntimeError"), None, "exception"),
        (trial_result(exception="VerifierTimeoutError"), None, "verifier_timeout"),
    ],
)
def test_every_outcome_names_its_rule_by_a_code(
    tmp_path: Path, result: dict[str, object], reward_txt: str | None, code: str
) -> None:
    directory = make_trial(tmp_path, "trial", result, reward_txt=reward_txt)
    assert map_outcome(read_attempt(directory, "t", "trials[0]")[0]).code == code
