"""A whole import: plan and trial directories into a snapshot, text rules, identity, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.importers.cohort import (
    ASYNC,
    DATAGEN,
    DRAFT,
    ETL,
    TWIN_COHORT,
    TWIN_TASK,
    TWIN_TRIAL,
    atif,
    make_trial,
    plan,
    trial_result,
    write_plan,
)
from tests.shared_fixtures import REPO, real_fixture
from tuneplane.cli import main
from tuneplane.contract.limits import TRAJECTORY_MAX_BYTES, TRAJECTORY_MAX_MESSAGES
from tuneplane.importers.harbor_import import import_harbor
from tuneplane.importers.problems import ImportRefused
from tuneplane.importers.snapshot import check_snapshot, read_snapshot, write_snapshot
from tuneplane.importers.text import load_redactor

FIXTURE_TRIALS = [
    {
        "task": "etl_checkpoint_resume_bug",
        "repeat": 0,
        "attempts": [{"retry": 0, "directory": ETL}],
    },
    {"task": "draft_dp_96443054", "repeat": 0, "attempts": [{"retry": 0, "directory": DRAFT}]},
    {"task": "fix-async-worker-queue", "repeat": 0, "attempts": [{"retry": 0, "directory": ASYNC}]},
    {"task": "never_ran", "repeat": 0, "attempts": []},
]


#: The twin cohort's trials: a failure renamed after its run, a success inside its job's
#: directory, and a trial that never ran.
TWIN_TRIALS = [
    {"task": TWIN_TASK, "repeat": 0, "attempts": [{"retry": 0, "directory": TWIN_TRIAL}]},
    {
        "task": "csv_dedupe",
        "repeat": 0,
        "attempts": [
            {"retry": 0, "directory": "csv_dedupe/job_2025-12-01__10-30-00/csv_dedupe__Vb7Kp1m"}
        ],
    },
    {"task": "never_ran", "repeat": 0, "attempts": []},
]


@pytest.mark.parametrize(
    ("root", "trials", "statuses"),
    [
        pytest.param(
            DATAGEN,
            FIXTURE_TRIALS,
            {
                "draft_dp_96443054-r0": "success",
                "etl_checkpoint_resume_bug-r0": "failure",
                "fix-async-worker-queue-r0": "failure",
            },
            marks=real_fixture,
            id="real",
        ),
        pytest.param(
            TWIN_COHORT,
            TWIN_TRIALS,
            {"csv_dedupe-r0": "success", "log_rotation_race-r0": "failure"},
            id="twin",
        ),
    ],
)
def test_the_fixtures_import_with_missing_coverage_and_no_text(
    tmp_path: Path, root: Path, trials: list[dict[str, Any]], statuses: dict[str, str]
) -> None:
    snapshot = import_harbor(write_plan(tmp_path, plan(trials)), str(root)).document
    assert snapshot["population"]["expected"] == len(trials)
    assert snapshot["population"]["text_samples"] == 0
    assert {t["trial_id"]: t["status"] for t in snapshot["trials"]} == statuses
    assert all(t["eligible"] is False for t in snapshot["trials"])
    assert snapshot["trajectories"] == []
    assert snapshot["checkpoint"] == {"name": "org/model@step-100"}


def test_every_attempt_is_sent_and_the_greatest_retry_is_last(tmp_path: Path) -> None:
    root = tmp_path / "root"
    make_trial(root, "first", trial_result(rewards={"reward": 1}))
    make_trial(root, "second", None)  # the retry never wrote its result
    trials = [
        {
            "task": "t",
            "repeat": 0,
            "attempts": [{"retry": 3, "directory": "second"}, {"retry": 1, "directory": "first"}],
        }
    ]
    snapshot = import_harbor(write_plan(tmp_path, plan(trials)), str(root)).document
    assert [(t["trial_attempt"], t["status"]) for t in snapshot["trials"]] == [
        (1, "success"),
        (3, "unscored"),
    ]
    assert snapshot["evidence"][1]["reason"].startswith("no result.json")


def test_the_same_inputs_make_the_same_round_and_changed_ones_a_new_round(tmp_path: Path) -> None:
    root = tmp_path / "root"
    make_trial(root, "a", trial_result(rewards={"reward": 1}))
    path = write_plan(
        tmp_path, plan([{"task": "t", "repeat": 0, "attempts": [{"retry": 0, "directory": "a"}]}])
    )
    first, again = import_harbor(path, str(root)), import_harbor(path, str(root))
    assert first.document == again.document
    assert first.round_id == f"val-{first.content_hash[:16]}"
    assert first.observation_events(2) == again.observation_events(2)
    make_trial(root, "a", trial_result(rewards={"reward": 0}))
    changed = import_harbor(path, str(root))
    assert changed.round_id != first.round_id
    other_checkpoint = write_plan(
        tmp_path,
        plan(json.loads(Path(path).read_text())["trials"], checkpoint={"name": "other"}),
        "other.json",
    )
    assert import_harbor(other_checkpoint, str(root)).round_id not in (
        first.round_id,
        changed.round_id,
    )


def test_event_ids_carry_the_execution_attempt(tmp_path: Path) -> None:
    snapshot = import_harbor(write_plan(tmp_path, plan(TWIN_TRIALS[:1])), str(TWIN_COHORT))
    ids = [e["event_id"] for e in snapshot.observation_events(1)]
    assert len(set(ids)) == 3
    assert all(i.startswith("a1-import-") for i in ids)
    assert not set(ids) & {e["event_id"] for e in snapshot.observation_events(2)}
    checkpoint = snapshot.observation_events(1)[1]
    assert checkpoint["fields"] == {
        "round_id": snapshot.round_id,
        "checkpoint": "org/model@step-100",
    }


def test_a_snapshot_round_trips_and_an_edited_one_is_refused(tmp_path: Path) -> None:
    snapshot = import_harbor(
        write_plan(tmp_path, plan(TWIN_TRIALS)), str(TWIN_COHORT), trace_limit=1
    )
    path = tmp_path / "snapshot.json"
    write_snapshot(snapshot, str(path))
    assert read_snapshot(str(path)).document == snapshot.document
    edited = json.loads(path.read_text())
    edited["trials"][0]["status"] = "unscored"
    with pytest.raises(ImportRefused, match="content_hash: does not match the content"):
        check_snapshot("s.json", edited)
    with pytest.raises(ImportRefused, match="format: must be 'tuneplane-import-snapshot'"):
        check_snapshot("s.json", {"trials": []})


@pytest.mark.parametrize(
    ("root", "trials", "sampled"),
    [
        pytest.param(
            DATAGEN,
            FIXTURE_TRIALS,
            ["draft_dp_96443054-r0", "etl_checkpoint_resume_bug-r0"],
            marks=real_fixture,
            id="real",
        ),
        pytest.param(
            TWIN_COHORT, TWIN_TRIALS, ["csv_dedupe-r0", "log_rotation_race-r0"], id="twin"
        ),
    ],
)
def test_text_is_sampled_incomplete_and_in_task_repeat_retry_order(
    tmp_path: Path, root: Path, trials: list[dict[str, Any]], sampled: list[str]
) -> None:
    path = write_plan(tmp_path, plan(trials))
    snapshot = import_harbor(path, str(root), trace_limit=2).document
    assert [(t["trial_id"], t["trial_attempt"]) for t in snapshot["trajectories"]] == [
        (trial_id, 0) for trial_id in sampled
    ]
    assert all(
        t["capture_policy"] == "sampled" and t["complete"] is False
        for t in snapshot["trajectories"]
    )
    assert snapshot["population"]["text_samples"] == 2
    assert all(t["round_id"] == snapshot["round_id"] for t in snapshot["trajectories"])


def test_at_most_128_trajectories_each_within_the_limits(tmp_path: Path) -> None:
    root = tmp_path / "root"
    steps = [
        {"step_id": i, "source": "agent", "message": f"{i} " + "x" * 2000} for i in range(1, 1500)
    ]
    trials = []
    for n in range(130):
        make_trial(
            root,
            f"d{n:03}",
            trial_result(f"t{n:03}", rewards={"reward": 1}),
            trajectory=atif(steps if n == 0 else steps[:2]),
        )
        trials.append(
            {"task": f"t{n:03}", "repeat": 0, "attempts": [{"retry": 0, "directory": f"d{n:03}"}]}
        )
    path = write_plan(tmp_path, plan(trials))
    with pytest.raises(ImportRefused, match="--trace-limit: must be 0-128"):
        import_harbor(path, str(root), trace_limit=129)
    snapshot = import_harbor(path, str(root), trace_limit=128).document
    kept = snapshot["trajectories"]
    assert len(kept) == 128
    assert [t["trial_id"] for t in kept] == [f"t{n:03}-r0" for n in range(128)]
    big = kept[0]
    assert big["total_messages"] == 1499
    assert len(big["messages"]) < TRAJECTORY_MAX_MESSAGES
    assert len(json.dumps(big).encode()) <= TRAJECTORY_MAX_BYTES


def test_one_huge_message_is_cut_with_a_mark(tmp_path: Path) -> None:
    root = tmp_path / "root"
    make_trial(
        root,
        "d",
        trial_result(rewards={"reward": 1}),
        trajectory=atif([{"step_id": 1, "source": "user", "message": "y" * 3_000_000}]),
    )
    path = write_plan(
        tmp_path, plan([{"task": "t", "repeat": 0, "attempts": [{"retry": 0, "directory": "d"}]}])
    )
    (document,) = import_harbor(path, str(root), trace_limit=1).document["trajectories"]
    assert document["messages"][0]["content"].endswith(
        "[cut by tuneplane import: 2934464 more characters]"
    )


SECRET_STEPS = [
    {"step_id": 1, "source": "system", "message": "key SECRET in the prompt"},
    {
        "step_id": 2,
        "source": "agent",
        "message": "use SECRET",
        "reasoning_content": "SECRET thoughts",
        "tool_calls": [
            {
                "tool_call_id": "SECRET-call",
                "function_name": "SECRET_tool",
                "arguments": {"token": "SECRET", "nested": ["a SECRET", {"k": "SECRET"}]},
            }
        ],
        "observation": {"results": [{"source_call_id": "SECRET-call", "content": "got SECRET"}]},
    },
]


def redaction_cohort(tmp_path: Path) -> tuple[str, str]:
    root = tmp_path / "root"
    make_trial(root, "d", trial_result(rewards={"reward": 1}), trajectory=atif(SECRET_STEPS))
    path = write_plan(
        tmp_path, plan([{"task": "t", "repeat": 0, "attempts": [{"retry": 0, "directory": "d"}]}])
    )
    (tmp_path / "redact_here.py").write_text(
        "def clean(text):\n    return text.replace('SECRET', '')\n\n"
        "def broken(text):\n    return None\n"
    )
    return path, str(root)


def test_the_redactor_sees_messages_arguments_observations_names_and_call_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, root = redaction_cohort(tmp_path)
    monkeypatch.chdir(tmp_path)
    unredacted = json.dumps(import_harbor(path, root, trace_limit=1).document["trajectories"])
    assert unredacted.count("SECRET") == 11
    redactor = load_redactor("redact_here:clean")
    snapshot = import_harbor(path, root, trace_limit=1, redactor=redactor).document
    assert "SECRET" not in json.dumps(snapshot)
    messages = snapshot["trajectories"][0]["messages"]
    assert messages[1]["tool_calls"][0]["id"] == "-call"
    assert messages[1]["tool_calls"][0]["name"] == "_tool"
    assert messages[1]["tool_calls"][0]["arguments"] == {"token": "", "nested": ["a ", {"k": ""}]}
    assert messages[2]["tool_call_id"] == "-call"
    with pytest.raises(ImportRefused, match="the redactor returned NoneType, not text"):
        import_harbor(path, root, trace_limit=1, redactor=load_redactor("redact_here:broken"))


def test_the_redactor_runs_before_truncation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    make_trial(
        root,
        "d",
        trial_result(rewards={"reward": 1}),
        trajectory=atif([{"step_id": 1, "source": "user", "message": "SECRET" * 20_000 + "tail"}]),
    )
    path = write_plan(
        tmp_path, plan([{"task": "t", "repeat": 0, "attempts": [{"retry": 0, "directory": "d"}]}])
    )
    (tmp_path / "shrink.py").write_text("def clean(text):\n    return text.replace('SECRET', '')\n")
    monkeypatch.chdir(tmp_path)
    (document,) = import_harbor(
        path, str(root), trace_limit=1, redactor=load_redactor("shrink:clean")
    ).document["trajectories"]
    assert (
        document["messages"][0]["content"] == "tail"
    )  # cut afterwards, it would be "SECRETSECRET…"


def test_a_redactor_that_does_not_load_is_named(tmp_path: Path) -> None:
    for spec, rule in (
        ("nocolon", "must be module:function"),
        ("no_such_module_x:f", "cannot import"),
        ("json:no_such_function", "has no function"),
    ):
        with pytest.raises(ImportRefused, match=rule):
            load_redactor(spec)


def test_a_litellm_trajectory_refuses_an_import_with_text(tmp_path: Path) -> None:
    root = tmp_path / "root"
    trial = make_trial(root, "d", trial_result(rewards={"reward": 1}))
    (trial / "agent").mkdir()
    (trial / "agent" / "litellm-trajectory.jsonl").write_text("{}\n")
    path = write_plan(
        tmp_path, plan([{"task": "t", "repeat": 0, "attempts": [{"retry": 0, "directory": "d"}]}])
    )
    assert import_harbor(path, str(root)).document["trials"][0]["status"] == "success"
    with pytest.raises(ImportRefused, match="legacy litellm trajectories are not supported"):
        import_harbor(path, str(root), trace_limit=1)


# -- the command ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("root", "trials", "said"),
    [
        pytest.param(
            DATAGEN,
            FIXTURE_TRIALS,
            ["4 planned trials, 3 with results (1 not yet reported)", "2 failure, 1 success"],
            marks=real_fixture,
            id="real",
        ),
        pytest.param(
            TWIN_COHORT,
            TWIN_TRIALS,
            ["3 planned trials, 2 with results (1 not yet reported)", "1 failure, 1 success"],
            id="twin",
        ),
    ],
)
def test_the_command_writes_a_snapshot(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    root: Path,
    trials: list[dict[str, Any]],
    said: list[str],
) -> None:
    out = tmp_path / "snapshot.json"
    argv = [
        "import",
        "harbor",
        "--plan",
        write_plan(tmp_path, plan(trials)),
        "--root",
        str(root),
        "--out",
        str(out),
        "--trace-limit",
        "1",
    ]
    assert main(argv) == 0
    assert read_snapshot(str(out)).document["population"]["expected"] == len(trials)
    err = capsys.readouterr().err
    for line in said:
        assert line in err


def test_the_command_names_every_problem_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "snapshot.json"
    document = plan([{"task": "t", "repeat": 0, "attempts": [{"retry": 0, "directory": "../x"}]}])
    document["digests"]["dataset"] = "REPLACE_ME"
    argv = [
        "import",
        "harbor",
        "--plan",
        write_plan(tmp_path, document),
        "--root",
        str(tmp_path),
        "--out",
        str(out),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "import-plan.json: digests.dataset: is the placeholder 'REPLACE_ME'" in err
    assert (
        "trials[0].attempts[0].directory: trials[0] (task 't', repeat 0): '../x' contains '..'"
        in err
    )
    assert "nothing was written or uploaded" in err
    assert not out.exists()


def test_the_example_plan_is_printed_by_the_installed_command(tmp_path: Path) -> None:
    printed = subprocess.run(
        [sys.executable, "-m", "tuneplane.cli", "import", "harbor", "--example-plan"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout
    example = json.loads(printed)
    assert set(example["digests"]) == {"dataset", "verifier", "runtime", "harness"}
    assert main(["import", "harbor", "--plan", "p.json"]) == 2


def run_import(tmp_path: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """The installed command, as people run it, importing the twin cohort to ``out``."""
    argv = ["import", "harbor", "--plan", write_plan(tmp_path, plan(TWIN_TRIALS))]
    argv += ["--root", str(TWIN_COHORT), "--out", str(out)]
    return subprocess.run(
        [sys.executable, "-m", "tuneplane.cli", *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )


def test_an_out_file_in_a_missing_directory_is_refused_with_status_2(tmp_path: Path) -> None:
    out = tmp_path / "missing" / "snapshot.json"
    done = run_import(tmp_path, out)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{out}: its directory {out.parent} does not exist" in done.stderr
    assert "nothing was written or uploaded" in done.stderr
    assert not out.parent.exists()


def test_an_out_directory_is_refused_and_leaves_nothing_behind(tmp_path: Path) -> None:
    out = tmp_path / "snapshots"
    out.mkdir()
    done = run_import(tmp_path, out)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{out}: is a directory: --out names the snapshot file to write" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["import-plan.json", "snapshots"]
    assert list(out.iterdir()) == []


def test_a_failed_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    snapshot = import_harbor(write_plan(tmp_path, plan(TWIN_TRIALS)), str(TWIN_COHORT))
    taken = tmp_path / "taken"
    (taken / "inside").mkdir(parents=True)  # a directory the rename cannot replace
    with pytest.raises(IsADirectoryError):
        write_snapshot(snapshot, str(taken))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["import-plan.json", "taken"]


def test_a_broken_trajectory_past_the_trace_limit_still_stops_the_import(tmp_path: Path) -> None:
    root = tmp_path / "root"
    steps = [{"step_id": 1, "source": "user", "message": "hello"}]
    make_trial(root, "a", trial_result("a", rewards={"reward": 1}), trajectory=atif(steps))
    legacy = make_trial(root, "b", trial_result("b", rewards={"reward": 1}))
    (legacy / "agent").mkdir()
    (legacy / "agent" / "litellm-trajectory.jsonl").write_text("{}\n")
    broken = make_trial(root, "c", trial_result("c", rewards={"reward": 0}))
    (broken / "agent").mkdir()
    (broken / "agent" / "trajectory.json").write_text("{not json")
    trials = [{"task": t, "repeat": 0, "attempts": [{"retry": 0, "directory": t}]} for t in "abc"]
    path = write_plan(tmp_path, plan(trials))
    assert len(import_harbor(path, str(root)).document["trials"]) == 3  # no text: no problem
    for limit in (1, 2, 3):
        with pytest.raises(ImportRefused) as refused:
            import_harbor(path, str(root), trace_limit=limit)
        assert [(p.file, p.rule.split(" (")[0].split(":")[0]) for p in refused.value.problems] == [
            (
                str(legacy / "agent" / "litellm-trajectory.jsonl"),
                "legacy litellm trajectories are not supported",
            ),
            (str(broken / "agent" / "trajectory.json"), "is not JSON"),
        ]
