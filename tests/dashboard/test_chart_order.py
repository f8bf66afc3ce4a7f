"""A Hugging Face / TRL run opens on its training loss and reward: train/ before eval/, and
in each group the loss, the reward and the reward's parts before the rest."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from tests.dashboard.pages import chart_order, open_ready
from tests.dashboard.seed import Seeded
from tests.dashboard.seed_hf import seed_hf_run

TRAIN = [
    "train/loss",
    "train/reward",
    "train/reward_std",
    "train/rewards/accuracy_reward/mean",
    "train/rewards/accuracy_reward/std",
    "train/rewards/format_reward/mean",
    "train/rewards/format_reward/std",
    "train/clip_ratio/region_mean",
    "train/completions/clipped_ratio",
    "train/completions/max_length",
    "train/completions/mean_length",
    "train/entropy",
    "train/epoch",
    "train/grad_norm",
    "train/kl",
    "train/learning_rate",
    "train/num_tokens",
]
EVAL = [
    "eval/loss",
    "eval/reward",
    "eval/rewards/accuracy_reward/mean",
    "eval/completions/mean_length",
    "eval/runtime",
    "eval/samples_per_second",
    "eval/steps_per_second",
]


@pytest.fixture(scope="module")
def hf_run(seeded: Seeded) -> str:
    return seed_hf_run(seeded.base, seeded.admin_key, "grpo-order")


def test_a_trl_run_opens_on_its_training_loss_and_reward(page: Page, hf_run: str) -> None:
    open_ready(page, hf_run)
    groups = page.eval_on_selector_all("details.group", "gs => gs.map(g => g.dataset.prefix)")
    assert groups == ["train", "eval"]
    assert chart_order(page) == TRAIN + EVAL
    # The loss and the reward are on the first screen, side by side.
    height = page.evaluate("innerHeight")
    for metric in ("train/loss", "train/reward"):
        box = page.locator(f'.chart-slot[data-metric="{metric}"]').bounding_box()
        assert box is not None
        assert box["y"] + box["height"] <= height, (metric, box, height)
    # The metric picker lists them in the same order.
    page.locator(".picker summary").click()
    listed = page.locator(".picker-list label span").all_text_contents()
    assert listed == TRAIN + EVAL


def test_top_level_loss_and_reward_lead_an_arena_run(page: Page) -> None:
    open_ready(page, "/projects/burtenshaw/runs/grpo-qwen-7")
    order = chart_order(page)
    assert order[:2] == ["loss", "reward"]
    assert order[2:] == ["train/entropy", "train/kl", "arena/step_seconds", "eval/accuracy"]
