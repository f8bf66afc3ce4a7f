"""Runs of a learning-rate sweep, three seeds of one setting in a group and a baseline
without one, as a fine-tuning job reports them: the group tests' runs and the README's
picture of a group charted as one."""

from __future__ import annotations

import math
import random

import httpx

from tests.dashboard.seed import SDK_PROJECT, post_scalars

GROUP = "qwen-lr3e-5"
SEEDS = ["grp-seed-1", "grp-seed-2", "grp-seed-3"]
BASELINE = "grp-lr1e-5"
#: Steps each run reached: the third seed stopped early.
STEPS = {"grp-seed-1": 400, "grp-seed-2": 400, "grp-seed-3": 320, BASELINE: 400}


def loss_curve(run: str, steps: int) -> list[float]:
    """A fine-tuning loss: a decay to a floor that depends on the learning rate, and noise."""
    noise = random.Random(run)
    floor, start = (0.55, 1.4) if run == BASELINE else (0.25 + 0.06 * SEEDS.index(run), 1.9)
    return [floor + start * math.exp(-s / 90) + noise.gauss(0, 0.03) for s in range(steps)]


def reward_curve(run: str, steps: int) -> list[float]:
    """A reward rising to a plateau that differs from seed to seed."""
    noise = random.Random(f"{run} reward")
    top = 0.62 if run == BASELINE else 0.7 + 0.08 * noise.random()
    return [top * (1 - math.exp(-s / 120)) + noise.gauss(0, 0.03) for s in range(steps)]


def seed_groups(base: str, admin_key: str) -> None:
    key = {"Authorization": f"Bearer {admin_key}"}
    api = f"{base}/api/v1/projects/{SDK_PROJECT}/runs"
    for run, steps in STEPS.items():
        group = None if run == BASELINE else GROUP
        created = httpx.post(api, json={"run": run, "group": group}, headers=key)
        assert created.status_code in (200, 201), created.text
        attempt = httpx.post(f"{api}/{run}/attempts", json={}, headers=key)
        assert attempt.status_code == 201, attempt.text
        every = list(range(steps))
        series = [
            {"name": "train/loss", "steps": every, "values": loss_curve(run, steps)},
            {"name": "train/reward", "steps": every, "values": reward_curve(run, steps)},
        ]
        post_scalars(base, attempt.json()["token"], {"series": series})
