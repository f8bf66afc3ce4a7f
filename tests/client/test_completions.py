"""TRL's completion files as training rollouts, without training: the row rules, and files
written exactly as TRL's ``GRPOTrainer.log()`` writes them (a pandas frame to Parquet)
read by the callback's reader and sent to a real server. The trainer itself runs in
tests/client/test_trl.py."""

from __future__ import annotations

import logging
import math
import uuid
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.client.runs import PROJECT, Server
from tests.client.test_trajectories import FAST
from tuneplane import Reporter
from tuneplane.client.integrations.completions import (
    CompletionLog,
    categories,
    choose,
    messages,
    reward,
    reward_names,
    unanswered,
)

TOOL_PROMPT = [
    {"role": "system", "content": [{"type": "text", "text": "You may call tools."}]},
    {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is 17*3?"}]},
]
TOOL_COMPLETION = [
    {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "python", "arguments": {"code": "17*3"}}}
    ]},
    {"role": "tool", "name": "python", "content": "51"},
    {"role": "assistant", "content": "51"},
]  # fmt: skip


def test_a_reward_is_the_weighted_sum_of_the_functions_that_answered() -> None:
    assert reward([1.0, 0.5], None) == 1.5
    assert reward([1.0, 0.5], [1.0, 2.0]) == 2.0
    assert reward([3], None) == 3.0
    for missing in (None, math.nan, math.inf, True, "1"):
        # TRL trains on the sum of the others (nansum); the missing one is named.
        assert reward([1.0, missing], [2.0, 1.0]) == 2.0
        assert reward([missing, missing], None) is None  # none answered: no reward
        assert unanswered([1.0, missing], ["acc", "format"]) == ["format"]
    assert unanswered([0.0, 1], ["acc", "format"]) == []
    assert reward([1e308, 1e308], None) is None  # the sum is not finite either


def test_low_is_the_lowest_quarter_below_the_mean_and_never_a_failure() -> None:
    assert categories([1.0, 1.0, 1.0, 1.0]) == ["representative"] * 4
    assert categories([None, None]) == ["invalid_reward"] * 2
    assert categories([0.0, 1.0, 2.0, 3.0, None]) == [
        "low_reward", "representative", "representative", "representative", "invalid_reward"
    ]  # fmt: skip
    # ceil(5/4) = 2: the two lowest; a tie at the quartile is low too.
    assert categories([5.0, 0.0, 1.0, 1.0, 9.0]) == [
        "representative", "low_reward", "low_reward", "low_reward", "representative"
    ]  # fmt: skip
    assert categories([2.0]) == ["representative"]


def test_the_chosen_rows_are_stratified_lowest_first_and_spread() -> None:
    rewards: list[float | None] = [float(i % 10) for i in range(100)]
    rewards[3] = rewards[50] = None
    kinds = categories(rewards)
    chosen = choose(rewards, kinds)
    assert len(chosen) == 32 == len(set(chosen))
    picked = [kinds[row] for row in chosen]
    assert picked.count("invalid_reward") == 2
    assert picked.count("low_reward") == picked.count("representative") == 15
    low = [rewards[row] for row in chosen if kinds[row] == "low_reward"]
    assert sorted(low) == [0.0] * 9 + [1.0] * 6  # the lowest of the 29 low rows (<= 2.0)
    spread = [row for row in chosen if kinds[row] == "representative"]
    assert spread[0] < 10  # across the file, not its first rows
    assert spread[-1] > 85
    assert choose([1.0, 2.0], ["low_reward", "representative"]) == [0, 1]


def test_messages_from_a_string_or_a_conversation() -> None:
    assert messages("2+2?", "4") == [
        {"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}
    ]  # fmt: skip
    assert messages(TOOL_PROMPT, TOOL_COMPLETION) == [
        {"role": "system", "content": "You may call tools."},
        {"role": "user", "content": "What is 17*3?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call-0", "name": "python", "arguments": {"code": "17*3"}}
        ]},
        {"role": "tool", "content": "51", "tool_name": "python"},
        {"role": "assistant", "content": "51"},
    ]  # fmt: skip
    assert messages([{"role": "narrator", "content": "x"}], None) == [
        {"role": "assistant", "content": ""}
    ]


def test_reward_functions_are_named_by_the_training_log() -> None:
    logs = {"loss": 0.1, "rewards/accuracy/mean": 0.5, "rewards/accuracy/std": 0.1,
            "rewards/my/format/mean": 1.0, "reward": 1.5}  # fmt: skip
    assert reward_names(logs) == ["accuracy", "my/format"]


def trl_file(directory: Path, step: int, rows: dict[str, list[Any]]) -> Path:
    """A file as TRL's ``GRPOTrainer.log()`` writes it."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"completions_{step:05d}.parquet"
    count = len(rows["prompt"])
    table = {"step": [step] * count, **rows, "advantage": [0.0] * count}
    pd.DataFrame(table).to_parquet(path)
    return path


class Args:
    """The fields of ``GRPOConfig`` the reader uses."""

    def __init__(self, output_dir: Path, reward_weights: list[float] | None = None) -> None:
        self.output_dir = str(output_dir)
        self.log_completions = True
        self.reward_weights = reward_weights


def test_files_in_trls_format_arrive_as_rollouts_and_a_bad_one_is_logged_once(
    sqlite_server: Server, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = sqlite_server
    completions = tmp_path / "completions"
    trl_file(completions, 9, {"prompt": ["old"], "completion": ["leftover"], "ok": [1.0]})
    log = CompletionLog.of(Args(tmp_path, reward_weights=[1.0, 0.5]))
    assert log is not None
    run = f"completions-{uuid.uuid4().hex[:8]}"
    token = server.start_attempt(run)
    logs = {"rewards/ok/mean": 1.0, "rewards/style/mean": 0.0}
    with Reporter(server.base, f"{PROJECT}/{run}", token, attempt=1, flush_interval=0.02,
                  retry=FAST, status_retry=FAST) as reporter:  # fmt: skip
        for step in (1, 2, 3, 9):
            log.logged(step, logs)
        first = {"prompt": [TOOL_PROMPT] * 3, "completion": [TOOL_COMPLETION] * 3,
                 "ok": [1.0, None, None], "style": [2.0, 0.0, math.nan],
                 "extra": ["a", "b", "c"]}  # fmt: skip
        trl_file(completions, 1, first)
        (completions / "completions_00002.parquet").write_bytes(b"not parquet")
        trl_file(completions, 3, {"prompt": ["x"], "completion": ["y"], "other": [1.0]})
        with caplog.at_level(logging.WARNING, logger="tuneplane"):
            log.collect(reporter)
            log.logged(2, logs)  # read once: a file rewritten later is not read again
            log.collect(reporter)
        assert reporter.flush(20)
    page = server.get(f"/api/v1/projects/{PROJECT}/runs/{run}/trajectories", scope="training")
    rows = {(row["step"], row["trajectory_id"]): row for row in page["items"]}
    assert sorted(rows) == [(1, "completion-0"), (1, "completion-1"), (1, "completion-2")]
    scored, partial, missing = (rows[1, f"completion-{row}"] for row in range(3))
    assert (scored["reward"], scored["category"], scored["capture_policy"]) == (
        2.0, "representative", "sampled"
    )  # fmt: skip
    assert scored["reward_missing"] is None
    # 'ok' gave nothing: the reward is style's weighted value, as TRL trained on.
    assert (partial["reward"], partial["category"], partial["reward_missing"]) == (
        0.0, "low_reward", ["ok"]
    )  # fmt: skip
    assert (missing["reward"], missing["category"], missing["reward_missing"]) == (
        None, "invalid_reward", ["ok", "style"]
    )  # fmt: skip
    read = server.get(f"/api/v1/projects/{PROJECT}/runs/{run}/trajectories/{scored['id']}")
    assert read["messages"] == messages(TOOL_PROMPT, TOOL_COMPLETION)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2, warnings
    assert "completions_00002.parquet" in warnings[0]
    assert "00003.parquet: Unreadable: reward columns ['ok', 'style'] missing" in warnings[1]
