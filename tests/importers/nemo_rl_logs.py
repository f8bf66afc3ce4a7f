"""NeMo-RL 0.7 step files written as NeMo-RL writes them (no real one is in the fixtures).

It follows the writer's code at NVIDIA-NeMo/RL v0.7.0
(81aa43dda4765b0429cf31dab44441e4e4383911):

- ``nemo_rl/utils/logger.py`` ``Logger.log_batched_dict_as_jsonl``: the file is opened "w"
  under the experiment directory, the batch sliced one sample at a time
  (``BatchedDataDict.make_microbatch_iterator(1)``, so every value is ``value[i:i+1]``: a
  one-element list, or a tensor's ``tolist()`` of shape ``[1, …]``), and each sample written
  as ``json.dumps({**sample, "idx": i}, default=str) + "\\n"`` (NaN as the literal ``NaN``).
- ``nemo_rl/algorithms/grpo.py`` (the sync loop's "Log training data"): the keys of
  ``train_data_step{total_steps + 1}.jsonl``, in this order: ``agent_ref`` (when the batch
  has one), ``content`` (``flat_messages["content"]``: per sample the list of message texts,
  no roles), ``rewards``, ``filtered_rewards`` (with dynamic sampling, ``rewards`` being
  then the total reward), ``input_lengths``, ``token_ids``, ``token_loss_mask``,
  ``sample_loss_mask``, ``advantages``, ``generation_logprobs``, ``prev_logprobs``.
- ``grpo.py`` ``validate``: ``val_data_step{step}.jsonl`` with ``content`` (each sample's
  message log as ``[{"role", "content"}, …]``, ``get_keys_from_message_log``) and
  ``rewards`` (the total rewards).
- ``nemo_rl/algorithms/distillation.py``: a training file with only ``content`` and
  ``input_lengths`` (no rewards).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def log_batched_dict_as_jsonl(to_log: dict[str, list[Any]], path: Path) -> Path:
    """The writer itself, on lists (a tensor's ``tolist()`` slice is the same list)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    size = len(next(iter(to_log.values())))
    with open(path, "w") as handle:
        for i in range(size):
            sample = {key: value[i : i + 1] for key, value in to_log.items()}
            handle.write(json.dumps({**sample, "idx": i}, default=str) + "\n")
    return path


def _tokens(texts: Sequence[str]) -> list[int]:
    return [len(word) for text in texts for word in str(text).split()] or [0]


def train_data(
    conversations: Sequence[Sequence[str]],
    rewards: Sequence[float] | None,
    *,
    dynamic_sampling: bool = False,
    agent_ref: bool = False,
) -> dict[str, list[Any]]:
    """GRPO's training log payload for these conversations (texts only) and rewards; with
    ``rewards=None`` the distillation payload."""
    width = max(len(_tokens(c)) for c in conversations)
    padded = [_tokens(c) + [0] * (width - len(_tokens(c))) for c in conversations]
    if rewards is None:
        return {"content": [list(c) for c in conversations], "input_lengths": [width] * len(padded)}
    data: dict[str, list[Any]] = {}
    if agent_ref:
        data["agent_ref"] = [{"name": "math", "index": i} for i in range(len(conversations))]
    data["content"] = [list(c) for c in conversations]
    data["rewards"] = list(rewards)
    if dynamic_sampling:
        data["filtered_rewards"] = [r if not math.isnan(r) else 0.0 for r in rewards]
    data["input_lengths"] = [len(_tokens(c)) for c in conversations]
    data["token_ids"] = padded
    data["token_loss_mask"] = [[1 if t else 0 for t in row] for row in padded]
    data["sample_loss_mask"] = [1.0] * len(padded)
    data["advantages"] = [[0.5] * width for _ in padded]
    data["generation_logprobs"] = [[-0.25] * width for _ in padded]
    data["prev_logprobs"] = [[-0.25] * width for _ in padded]
    return data


def val_data(
    message_logs: Sequence[Sequence[dict[str, str]]], rewards: Sequence[float]
) -> dict[str, list[Any]]:
    return {"content": [list(m) for m in message_logs], "rewards": list(rewards)}


def conversation(i: int, answer: str | None = None) -> list[str]:
    return [f"<|user|>What is {i} + {i}?", answer if answer is not None else f"It is {2 * i}."]


def write_train_step(
    directory: Path, step: int, rewards: Sequence[float] | None, **options: Any
) -> Path:
    count = len(rewards) if rewards is not None else options.pop("count", 4)
    conversations = [conversation(i) for i in range(count)]
    return log_batched_dict_as_jsonl(
        train_data(conversations, rewards, **options), directory / f"train_data_step{step}.jsonl"
    )


def write_val_step(directory: Path, step: int, rewards: Sequence[float]) -> Path:
    logs = [
        [
            {"role": "system", "content": "Answer with a number."},
            {"role": "user", "content": f"What is {i} * 2?"},
            {"role": "assistant", "content": str(2 * i)},
            {"role": "environment", "content": "correct" if rewards[i] else "wrong"},
        ]
        for i in range(len(rewards))
    ]
    return log_batched_dict_as_jsonl(
        val_data(logs, rewards), directory / f"val_data_step{step}.jsonl"
    )
