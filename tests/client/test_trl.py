"""TRL GRPO's logged completions as training rollouts: a tiny GPT-2 built from a
configuration and a tokenizer built in code (no download) trained for a few GRPO steps on
the CPU by the real ``GRPOTrainer``, in a real process, reporting to a real server; what
arrived is compared with the completion files TRL wrote."""

from __future__ import annotations

import math
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.client.runs import PROJECT, Server, runner_env
from tests.client.test_init import points

TRAIN = """
import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast
from trl import GRPOConfig, GRPOTrainer
from tuneplane.integrations.transformers import TuneplaneCallback

special = ["<pad>", "<eos>", "<unk>", "system:", "user:", "assistant:"]
words = special + [f"w{{i}}" for i in range(26)]
vocabulary = Tokenizer(models.WordLevel({{w: i for i, w in enumerate(words)}}, unk_token="<unk>"))
vocabulary.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tokenizer = PreTrainedTokenizerFast(
    tokenizer_object=vocabulary, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>",
    chat_template=(
        "{{% for m in messages %}}{{{{ m['role'] }}}}: {{{{ m['content'] }}}} {{% endfor %}}"
        "{{% if add_generation_prompt %}}assistant: {{% endif %}}"
    ),
)
torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=len(words),
                                   n_positions=64, bos_token_id=1, eos_token_id=1, pad_token_id=0))

def text(completion):
    return completion if isinstance(completion, str) else completion[-1]["content"]

def length(completions, **kwargs):  # none for the first of each batch
    return [None if i == 0 else float(len(text(c).split())) for i, c in enumerate(completions)]

def sometimes(completions, **kwargs):  # none for the first two of each batch
    return [None if i < 2 else 0.5 * (i % 3) for i in range(len(completions))]

{prompts}
args = GRPOConfig(
    output_dir={output!r}, run_name={run!r}, max_steps=3, logging_steps={logging_steps},
    per_device_train_batch_size={batch}, num_generations=4, max_completion_length=6,
    log_completions=True, report_to="none", use_cpu=True, save_strategy="no",
    reward_weights=[1.0, 2.0], learning_rate=1e-3, {evaluation}
)
trainer = GRPOTrainer(model=model, reward_funcs=[length, sometimes], args=args,
                      train_dataset=prompts, eval_dataset=held_out, processing_class=tokenizer,
                      callbacks=[TuneplaneCallback(project={project!r})])
trainer.train()
"""
CHAT_PROMPTS = """prompts = Dataset.from_dict({"prompt": [
    [{"role": "system", "content": "w0 w1"}, {"role": "user", "content": f"w{i} w{i + 1}"}]
    for i in range(2, 24)
]})
held_out = Dataset.from_dict({"prompt": [
    [{"role": "system", "content": "w0 w1"}, {"role": "user", "content": "w25 w25"}]
] * 2})"""
#: An evaluation at every step, each writing its completions over the step's file after the
#: callback read the training ones; a generation every other step, so that the training log
#: of step 2 writes the evaluation's completions still in TRL's buffer.
EVALUATION = 'eval_strategy="steps", eval_steps=1, per_device_eval_batch_size=4, num_iterations=2,'

STRING_PROMPTS = """prompts = Dataset.from_dict({"prompt": [
    f"w{i} w{i + 1} w{i + 2}" for i in range(23)
]})
held_out = None"""


def train(
    server: Server, output: Path, prompts: str, batch: int, logging_steps: int,
    evaluation: str = "",
) -> str:  # fmt: skip
    run = f"grpo-{uuid.uuid4().hex[:8]}"
    code = TRAIN.format(output=str(output), run=run, project=PROJECT, prompts=prompts,
                        batch=batch, logging_steps=logging_steps,
                        evaluation=evaluation)  # fmt: skip
    env = runner_env(TUNEPLANE_URL=server.base, TUNEPLANE_API_KEY=server.key,
                     TUNEPLANE_JOB_ROLLOUT_UPLOAD_SAMPLES="32")  # fmt: skip
    # About 30 s on an idle machine (mostly imports); minutes on a busy one.
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "not reported" not in done.stderr, done.stderr
    return run


def rollouts(server: Server, run: str) -> dict[int, dict[str, dict[str, Any]]]:
    """The run's training rollouts by step and trajectory ID."""
    page = server.get(
        f"/api/v1/projects/{PROJECT}/runs/{run}/trajectories", scope="training", limit=500
    )
    found: dict[int, dict[str, dict[str, Any]]] = {}
    for row in page["items"]:
        assert row["scope"] == "training"
        found.setdefault(row["step"], {})[row["trajectory_id"]] = row
    return found


def body(server: Server, run: str, row: dict[str, Any]) -> list[dict[str, Any]]:
    read = server.get(f"/api/v1/projects/{PROJECT}/runs/{run}/trajectories/{row['id']}")
    found: list[dict[str, Any]] = read["messages"]
    return found


def expected_rewards(path: Path) -> list[float | None]:
    """Each row's ``length + 2 * sometimes`` over the functions that answered, as TRL sums
    them for training; None when neither did."""
    rows = pq.read_table(path).to_pylist()
    return [
        None if r["length"] is None and r["sometimes"] is None
        else (r["length"] or 0.0) + 2 * (r["sometimes"] or 0.0)
        for r in rows
    ]  # fmt: skip


def expected_missing(path: Path) -> list[list[str] | None]:
    """Each row's reward functions that gave no value (TRL stores a None as null)."""
    rows = pq.read_table(path).to_pylist()
    return [[n for n in ("length", "sometimes") if r[n] is None] or None for r in rows]


def expected_category(reward: float | None, rewards: list[float | None]) -> str:
    """The documented rule: without a reward, invalid; at or below the ceil(n/4)-th lowest
    and below the mean, low; else representative."""
    if reward is None:
        return "invalid_reward"
    finite = sorted(r for r in rewards if r is not None)
    quartile = finite[math.ceil(len(finite) / 4) - 1]
    low = reward <= quartile and reward < sum(finite) / len(finite)
    return "low_reward" if low else "representative"


def check_step(
    server: Server, run: str, path: Path, arrived: dict[str, dict[str, Any]]
) -> dict[str, list[float | None]]:
    """Every arrived rollout of one step matches its row of ``path``; the rewards of the
    rows of each category, sent or not."""
    rewards = expected_rewards(path)
    missing = expected_missing(path)
    rows = pq.read_table(path).to_pylist()
    assert 0 < len(arrived) <= min(32, len(rows))
    by_category: dict[str, list[float | None]] = {}
    for value in rewards:
        by_category.setdefault(expected_category(value, rewards), []).append(value)
    for trajectory_id, row in arrived.items():
        index = int(trajectory_id.removeprefix("completion-"))
        if rewards[index] is None:
            assert (row["reward"], row["category"]) == (None, "invalid_reward")
        else:
            assert row["reward"] == pytest.approx(rewards[index])
            assert row["category"] == expected_category(rewards[index], rewards)
        assert row["reward_missing"] == missing[index]
        assert (row["collection_policy"], row["consumption_policy"]) == (None, None)
        prompt, completion = rows[index]["prompt"], rows[index]["completion"]
        if isinstance(prompt, str):
            expected = [{"role": "user", "content": prompt}]
            expected.append({"role": "assistant", "content": completion})
        else:
            expected = [dict(m) for m in prompt] + [dict(m) for m in completion]
        assert body(server, run, row) == expected
    return by_category


def test_grpo_chat_completions_are_the_runs_training_rollouts(
    sqlite_server: Server, tmp_path: Path
) -> None:
    server = sqlite_server
    # A file of an earlier training in the same output directory is not this run's.
    (tmp_path / "completions").mkdir()
    leftover = tmp_path / "completions" / "completions_00007.parquet"
    pq.write_table(pq.read_table(_string_file(tmp_path)), leftover)
    run = train(server, tmp_path, CHAT_PROMPTS, batch=8, logging_steps=1)
    arrived = rollouts(server, run)
    assert sorted(arrived) == [1, 2, 3]
    categories: set[str] = set()
    for step in (1, 2, 3):
        path = tmp_path / "completions" / f"completions_{step:05d}.parquet"
        assert pq.read_table(path).num_rows == 8
        check_step(server, run, path, arrived[step])
        assert len(arrived[step]) == 8  # all of a batch under the cap
        categories |= {row["category"] for row in arrived[step].values()}
    # The first completion of each batch has no reward at all; the second has the sum of
    # the one function that answered, as TRL trained on; a completion is never a failure.
    assert categories == {"invalid_reward", "low_reward", "representative"}
    second = arrived[1]["completion-1"]
    assert second["reward_missing"] == ["sometimes"]
    assert second["reward"] is not None
    assert [step for step, _ in points(server, run, "train/reward")] == [1, 2, 3]


def _string_file(tmp_path: Path) -> Path:
    """A file in TRL's format, written the way TRL writes it (a pandas frame to Parquet)."""
    import pandas as pd

    path = tmp_path / "leftover.parquet"
    frame = {"step": [7, 7], "prompt": ["w1", "w2"], "completion": ["w3", "w4"],
             "length": [1.0, 1.0], "sometimes": [0.5, 0.5], "advantage": [0.0, 0.0]}  # fmt: skip
    pd.DataFrame(frame).to_parquet(path)
    return path


def test_a_large_generation_batch_sends_32_stratified_rollouts_a_step(
    server: Server, tmp_path: Path
) -> None:
    # Training logs at step 2 and, with the end-of-training summary, at step 3.
    run = train(server, tmp_path, STRING_PROMPTS, batch=40, logging_steps=2)
    arrived = rollouts(server, run)
    assert sorted(arrived) == [2, 3]
    assert not (tmp_path / "completions" / "completions_00001.parquet").exists()
    for step in (2, 3):
        path = tmp_path / "completions" / f"completions_{step:05d}.parquet"
        assert pq.read_table(path).num_rows == 40
        by_category = check_step(server, run, path, arrived[step])
        assert len(arrived[step]) == 32
        assert set(by_category) == {"invalid_reward", "low_reward", "representative"}
        sent = list(arrived[step].values())
        # Taken in turn from each category: one with fewer rows sends them all.
        for category, rewards in by_category.items():
            count = sum(row["category"] == category for row in sent)
            assert count == len(rewards) or count >= 32 // len(by_category)
        # The lowest rewards are the low ones sent.
        low_sent = sorted(row["reward"] for row in sent if row["category"] == "low_reward")
        low_all = sorted(r for r in by_category.get("low_reward", []) if r is not None)
        assert low_sent == pytest.approx(low_all[: len(low_sent)])


def test_evaluation_completions_are_not_training_rollouts(
    sqlite_server: Server, tmp_path: Path
) -> None:
    server = sqlite_server
    run = train(sqlite_server, tmp_path, CHAT_PROMPTS, batch=8, logging_steps=1,
                evaluation=EVALUATION)  # fmt: skip
    arrived = rollouts(server, run)
    # Step 2 trained on step 1's generation: its file holds step 1's evaluation completions.
    assert sorted(arrived) == [1, 3]
    for step in (1, 3):
        assert len(arrived[step]) == 8
        prompts = {body(server, run, row)[1]["content"] for row in arrived[step].values()}
        assert "w25 w25" not in prompts
    for step in (1, 2, 3):  # every file now holds an evaluation's completions
        path = tmp_path / "completions" / f"completions_{step:05d}.parquet"
        held_out = {row["prompt"][1]["content"] for row in pq.read_table(path).to_pylist()}
        assert held_out == {"w25 w25"}
