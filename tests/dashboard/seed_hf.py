"""A TRL GRPO run as the transformers callback reports it, through the public API: the
trainer's arguments and the model's configuration as the run's config (``grpo_config.json``
is ``GRPOConfig(...).to_dict()`` and ``Qwen2Config(...).to_dict()`` of a 0.5B model), the
metrics a ``GRPOTrainer`` logs at every step as ``train/*``, an evaluation every 50 steps as
``eval/*``, heartbeats and the end of training."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import httpx

from tests.dashboard.seed import post_scalars, start_sdk_run

RUN = "grpo-gsm8k"
STEPS = 300
EVAL_EVERY = 50
CONFIG: dict[str, Any] = json.loads((Path(__file__).parent / "grpo_config.json").read_text())

HEARTBEAT = {
    "queued": 0,
    "sent": 0,
    "dropped": 0,
    "failed_sends": 0,
    "queue_size": 0,
    "queue_capacity": 100_000,
    "interval": 10.0,
}


def wobble(step: int, seed: float) -> float:
    """Noise in [-0.5, 0.5), the same at every call."""
    return (math.sin(step * 12.9898 + seed * 78.233) * 43758.5453) % 1 - 0.5


def train_metrics(step: int) -> dict[str, float]:
    """What GRPOTrainer logs at a step: accuracy rising, completions shortening."""
    accuracy = 0.25 + 0.5 * (1 - math.exp(-step / 90)) + 0.06 * wobble(step, 1)
    formatted = min(1.0, 0.6 + 0.4 * (1 - math.exp(-step / 30)) + 0.03 * wobble(step, 2))
    length = 380 - 140 * (1 - math.exp(-step / 120)) + 25 * wobble(step, 3)
    return {
        "loss": 0.02 * wobble(step, 4) + 0.004 * math.log1p(step),
        "grad_norm": 0.4 + 0.25 * abs(wobble(step, 5)) + 0.3 * math.exp(-step / 40),
        "learning_rate": 1e-6 * (1 - step / STEPS),
        "epoch": round(3 * step / STEPS, 4),
        "num_tokens": float(step * 8 * 8 * (180 + length)),
        "reward": accuracy + 0.5 * formatted,
        "reward_std": 0.35 + 0.1 * wobble(step, 6),
        "rewards/accuracy_reward/mean": accuracy,
        "rewards/accuracy_reward/std": 0.42 + 0.05 * wobble(step, 7),
        "rewards/format_reward/mean": formatted,
        "rewards/format_reward/std": 0.3 * (1 - formatted) + 0.02,
        "completions/mean_length": length,
        "completions/max_length": min(512.0, length * 1.6),
        "completions/clipped_ratio": max(0.0, 0.12 - step / 3000),
        "kl": 0.0,
        "entropy": 0.62 - 0.15 * (1 - math.exp(-step / 150)) + 0.02 * wobble(step, 8),
        "clip_ratio/region_mean": 0.0,
    }


def eval_metrics(step: int) -> dict[str, float]:
    accuracy = 0.27 + 0.45 * (1 - math.exp(-step / 100))
    return {
        "loss": 0.01 + 0.002 * math.log1p(step),
        "reward": accuracy + 0.48,
        "rewards/accuracy_reward/mean": accuracy,
        "completions/mean_length": 370 - 130 * (1 - math.exp(-step / 120)),
        "runtime": 41.8 + 2 * wobble(step, 9),
        "samples_per_second": 31.9 + wobble(step, 10),
        "steps_per_second": 1.99 + 0.05 * wobble(step, 11),
    }


def series_of(prefix: str, rows: dict[int, dict[str, float]]) -> list[dict[str, Any]]:
    names = next(iter(rows.values())).keys()
    return [
        {
            "name": f"{prefix}/{name}",
            "steps": list(rows),
            "values": [round(row[name], 9) for row in rows.values()],
        }
        for name in names
    ]


def seed_hf_run(
    base: str, admin_key: str, run: str = RUN, *, heartbeat_interval: float = 10.0
) -> str:
    """``lab/<run>``: a finished GRPO run. Answers its page's path."""
    token = start_sdk_run(base, admin_key, run, CONFIG)
    train = {step: train_metrics(step) for step in range(1, STEPS + 1)}
    evals = {step: eval_metrics(step) for step in range(EVAL_EVERY, STEPS + 1, EVAL_EVERY)}
    # As the SDK sends them: batches of at most 2,048 points.
    for first in range(1, STEPS + 1, 100):
        part = {step: train[step] for step in range(first, min(first + 100, STEPS + 1))}
        post_scalars(base, token, {"series": series_of("train", part)})
    post_scalars(base, token, {"series": series_of("eval", evals)})
    auth = {"Authorization": f"Bearer {token}"}
    sent = STEPS * len(train[1]) + len(evals) * len(evals[EVAL_EVERY])
    beat = {**HEARTBEAT, "queued": sent, "sent": sent, "interval": heartbeat_interval}
    for path, payload in (
        ("heartbeat", beat),
        ("status", {"status": "succeeded", "exit_code": 0}),
    ):
        answer = httpx.post(f"{base}/api/v1/ingest/{path}", json=payload, headers=auth)
        assert answer.status_code == 200, answer.text
    return f"/projects/lab/runs/{run}"
