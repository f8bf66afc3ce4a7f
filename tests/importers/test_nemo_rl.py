"""NeMo-RL step files (written as NeMo-RL 0.7 writes them, tests/importers/nemo_rl_logs.py)
read into training rollouts and validation rounds."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.importers.nemo_rl_logs import (
    log_batched_dict_as_jsonl,
    train_data,
    write_train_step,
    write_val_step,
)
from tuneplane.contract.trajectories import parse_trajectory
from tuneplane.importers.nemo_rl import (
    import_nemo_rl,
    low_reward_threshold,
    write_snapshots,
)
from tuneplane.importers.nemo_rl_files import Watch, step_file
from tuneplane.importers.problems import ImportRefused
from tuneplane.importers.rollout_snapshot import read_all

NAN = float("nan")


def only_step(directory: Path) -> dict:
    imported = import_nemo_rl(str(directory))
    assert len(imported.rollouts) == 1
    return imported.rollouts[0].document


def test_a_step_keeps_at_most_32_taken_in_turn_from_each_category(tmp_path: Path) -> None:
    # 100 rollouts: 10 without a valid reward, rewards 0..0.89 for the others.
    rewards = [NAN if i % 10 == 0 else i / 100 for i in range(100)]
    write_train_step(tmp_path, 7, rewards)
    snapshot = only_step(tmp_path)
    threshold = low_reward_threshold([r for r in rewards if not math.isnan(r)])
    low = [r for r in rewards if not math.isnan(r) and r <= threshold]
    assert snapshot["lines"] == 100
    assert snapshot["categories"] == {
        "low_reward": len(low),
        "invalid_reward": 10,
        "representative": 90 - len(low),
    }
    kept = snapshot["trajectories"]
    assert len(kept) == 32
    by = {}
    for document in kept:
        parsed, violations = parse_trajectory("t", document)
        assert violations == []
        assert parsed is not None
        by.setdefault(parsed.category, []).append(document)
    assert {name: len(items) for name, items in by.items()} == {
        "low_reward": 11,
        "invalid_reward": 10,
        "representative": 11,
    }
    # The lowest rewards first among low ones; each low one is below the quartile.
    lows = sorted(d["reward"] for d in by["low_reward"])
    assert lows == sorted(r for r in low)[:11]
    assert all(d["reward"] > threshold for d in by["representative"])
    assert all(d.get("diagnostic") != "failure" for d in kept)
    assert all("collection_policy" not in d and "consumption_policy" not in d for d in kept)
    assert {d["trajectory_id"] for d in kept} <= {f"idx-{i}" for i in range(100)}
    assert all(d["step"] == 7 and d["capture_policy"] == "sampled" for d in kept)


def test_the_same_files_give_the_same_snapshot(tmp_path: Path) -> None:
    write_train_step(tmp_path, 1, [i % 3 for i in range(50)])
    assert only_step(tmp_path) == only_step(tmp_path)


def test_low_reward_is_the_lower_quartile_below_the_best() -> None:
    assert low_reward_threshold([1.0] * 8) is None  # all equal: none is low
    assert low_reward_threshold([]) is None
    assert low_reward_threshold([0.0, 0.0, 0.0, 1.0]) == 0.0
    assert low_reward_threshold([1, 2, 3, 4, 5, 6, 7, 8, 9]) == 3
    assert low_reward_threshold([0.0, 1.0, 1.0, 1.0, 1.0]) == 1.0  # but only 0.0 is below 1


def test_binary_rewards_make_the_zeros_low_and_a_uniform_step_none(tmp_path: Path) -> None:
    write_train_step(tmp_path, 1, [0.0, 1.0, 0.0, 1.0, 1.0, 0.0])
    write_train_step(tmp_path, 2, [1.0, 1.0, 1.0])
    one, two = (r.document for r in import_nemo_rl(str(tmp_path)).rollouts)
    assert one["categories"] == {"low_reward": 3, "invalid_reward": 0, "representative": 3}
    low = [d for d in one["trajectories"] if d.get("diagnostic") == "low_reward"]
    assert {d["reward"] for d in low} == {0.0}
    assert two["categories"] == {"low_reward": 0, "invalid_reward": 0, "representative": 3}


def test_missing_and_nan_rewards_are_invalid_rewards_never_failures(tmp_path: Path) -> None:
    write_train_step(tmp_path, 1, None, count=3)  # distillation: no rewards key at all
    write_train_step(tmp_path, 2, [NAN, float("inf"), 1.0, 0.0])
    one, two = (r.document for r in import_nemo_rl(str(tmp_path)).rollouts)
    for document in one["trajectories"]:
        assert "reward" not in document
        assert "reward_invalid" not in document  # missing, not invalid
        assert "diagnostic" not in document
        parsed, _ = parse_trajectory("t", document)
        assert parsed is not None
        assert parsed.category == "invalid_reward"
    invalid = [d for d in two["trajectories"] if d.get("reward_invalid")]
    assert {d["trajectory_id"] for d in invalid} == {"idx-0", "idx-1"}
    assert all("reward" not in d and "diagnostic" not in d for d in invalid)


def test_dynamic_sampling_reads_rewards_not_filtered_rewards(tmp_path: Path) -> None:
    write_train_step(tmp_path, 3, [0.25, 0.75], dynamic_sampling=True, agent_ref=True)
    line = json.loads((tmp_path / "train_data_step3.jsonl").read_text().splitlines()[0])
    assert set(line) >= {"agent_ref", "content", "rewards", "filtered_rewards", "idx"}
    kept = only_step(tmp_path)["trajectories"]
    assert sorted(d["reward"] for d in kept) == [0.25, 0.75]


def test_training_texts_have_no_roles_so_the_last_is_the_assistant_s(tmp_path: Path) -> None:
    conversations = [["system text", "question", "answer"], [{"type": "image"}, "caption"]]
    log_batched_dict_as_jsonl(
        train_data(conversations, [1.0, 0.0]), tmp_path / "train_data_step1.jsonl"
    )
    kept = {d["trajectory_id"]: d for d in only_step(tmp_path)["trajectories"]}
    assert kept["idx-0"]["messages"] == [
        {"role": "user", "content": "system text"},
        {"role": "user", "content": "question"},
        {"role": "assistant", "content": "answer"},
    ]
    assert kept["idx-0"]["complete"] is True
    assert kept["idx-1"]["messages"][0] == {"role": "user", "content": '{"type": "image"}'}


def test_long_texts_and_conversations_are_cut_and_say_so(tmp_path: Path) -> None:
    conversations = [["q", "x" * 200_000], [f"turn {i}" for i in range(1_100)], ["q", "a"]]
    log_batched_dict_as_jsonl(
        train_data(conversations, [0.0, 0.5, 1.0]), tmp_path / "train_data_step1.jsonl"
    )
    kept = {d["trajectory_id"]: d for d in only_step(tmp_path)["trajectories"]}
    long_text = kept["idx-0"]
    assert long_text["complete"] is False
    assert long_text["total_messages"] == 2
    assert "[cut by tuneplane import: " in long_text["messages"][1]["content"]
    many = kept["idx-1"]
    assert (many["complete"], many["total_messages"], len(many["messages"])) == (False, 1100, 1024)
    assert kept["idx-2"]["complete"] is True


def test_validation_is_a_round_of_unscored_trials_with_roles(tmp_path: Path) -> None:
    write_val_step(tmp_path, 0, [1.0, 0.0, NAN])
    imported = import_nemo_rl(str(tmp_path))
    assert imported.rollouts == ()
    (snapshot,) = imported.rounds
    document = snapshot.document
    assert snapshot.round_id.startswith("nemo-rl-val-step0-")
    assert document["population"]["expected"] == 3
    # The log has rewards, no verdicts: said once for the round, and by each trial.
    assert document["population"]["verdicts"] is False
    assert [
        (t["trial_id"], t["status"], t["reward"], t["reason_code"]) for t in snapshot.trials
    ] == [
        ("idx-0", "unscored", 1.0, "reward_only"),
        ("idx-1", "unscored", 0.0, "reward_only"),
        ("idx-2", "unscored", None, "no_reward"),
    ]
    assert all(t["eligible"] is False for t in snapshot.trials)
    text = {t["trial_id"]: t for t in snapshot.trajectories}
    assert [m["role"] for m in text["idx-0"]["messages"]] == ["system", "user", "assistant", "tool"]
    assert text["idx-0"]["messages"][3]["tool_name"] == "environment"


def test_a_cut_last_line_is_skipped_with_a_warning(tmp_path: Path) -> None:
    path = write_train_step(tmp_path, 1, [0.0, 1.0, 0.5])
    path.write_bytes(path.read_bytes()[:-40])
    imported = import_nemo_rl(str(tmp_path))
    assert imported.rollouts[0].document["lines"] == 2
    assert any("line 3: cut short" in w for w in imported.warnings)


@pytest.mark.parametrize(
    ("line", "field", "rule"),
    [
        ('{"content": [["q", "a"]], "rewards": ["high"], "idx": 0}', "line 1.rewards", "number"),
        ('{"content": [["q", "a"]], "rewards": [1.0, 0.0], "idx": 0}', "line 1.rewards", "one"),
        ('{"content": ["q", "a"], "idx": 0}', "line 1.content", "one-element list"),
        ('{"content": [["q"]], "rewards": [1.0]}', "line 1.idx", "required"),
        ("[1, 2]", "line 1", "JSON object"),
        ("{not json", "line 1", "not JSON"),
    ],
)
def test_bad_lines_are_named_by_file_line_field_and_rule(
    tmp_path: Path, line: str, field: str, rule: str
) -> None:
    path = tmp_path / "train_data_step4.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(ImportRefused) as refused:
        import_nemo_rl(str(tmp_path))
    (problem,) = refused.value.problems
    assert (problem.file, problem.field) == (str(path), field)
    assert rule in problem.rule


def test_a_repeated_idx_and_a_validation_message_without_role_are_refused(
    tmp_path: Path,
) -> None:
    line = '{"content": [["q", "a"]], "rewards": [1.0], "idx": 0}\n'
    (tmp_path / "train_data_step1.jsonl").write_text(line + line)
    bad = '{"content": [[{"content": "hi"}]], "rewards": [1.0], "idx": 0}\n'
    (tmp_path / "val_data_step1.jsonl").write_text(bad)
    with pytest.raises(ImportRefused) as refused:
        import_nemo_rl(str(tmp_path))
    assert {(p.field, p.rule.split(":")[0]) for p in refused.value.problems} == {
        ("line 2.idx", "0 repeats line 1"),
        ("line 1.content[0][0].role", "required"),
    }


def test_the_log_directory_may_be_the_parent_of_one_experiment(tmp_path: Path) -> None:
    write_train_step(tmp_path / "exp_001", 1, [1.0, 0.0])
    assert import_nemo_rl(str(tmp_path)).directory == str(tmp_path / "exp_001")
    write_train_step(tmp_path / "exp_002", 1, [1.0, 0.0])
    with pytest.raises(ImportRefused, match="several NeMo-RL experiments"):
        import_nemo_rl(str(tmp_path))
    with pytest.raises(ImportRefused, match="is not a directory"):
        import_nemo_rl(str(tmp_path / "exp_003"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ImportRefused, match="holds no train_data_step"):
        import_nemo_rl(str(tmp_path / "empty"))


def test_snapshots_are_written_and_read_back(tmp_path: Path) -> None:
    write_train_step(tmp_path / "logs", 1, [1.0, 0.0])
    write_val_step(tmp_path / "logs", 1, [1.0])
    out = tmp_path / "out"
    written = write_snapshots(import_nemo_rl(str(tmp_path / "logs")), str(out))
    assert sorted(Path(p).name for p in written) == ["train-step1.json", "val-step1.json"]
    rounds, rollouts = read_all([str(out)])
    assert (len(rounds), len(rollouts)) == (1, 1)
    edited = json.loads((out / "train-step1.json").read_text())
    edited["trajectories"][0]["reward"] = 0.5
    (out / "train-step1.json").write_text(json.dumps(edited))
    with pytest.raises(ImportRefused, match="content_hash"):
        read_all([str(out)])


def test_a_step_file_is_complete_when_a_later_step_exists_or_the_run_ended(
    tmp_path: Path,
) -> None:
    write_train_step(tmp_path / "exp_001", 1, [1.0])  # an earlier run's
    watch = Watch(str(tmp_path))
    assert watch.ready(ended=True) == []
    new = tmp_path / "exp_002"
    write_val_step(new, 1, [1.0])
    write_train_step(new, 1, [1.0])
    assert watch.ready(ended=False) == []  # step 1 may still be written
    write_train_step(new, 2, [1.0])
    ready = watch.ready(ended=False)
    assert [(f.kind, f.step) for f in ready] == [("val", 1), ("train", 1)]
    for file in ready:
        watch.done(file)
    assert watch.ready(ended=False) == []
    assert watch.ready(ended=True) == [step_file(str(new / "train_data_step2.jsonl"))]
