"""The machine's own series (system/…: CPU, memory, GPU) are charted after every training
metric, whatever their names, so they never push a training curve down the page."""

from __future__ import annotations

from playwright.sync_api import Page

from tests.dashboard.pages import chart_order, open_ready
from tests.dashboard.seed import SDK_PROJECT, Seeded, post_scalars, start_sdk_run

RUN = "with-system-metrics"
# "system" sorts before "train" and "zeta" by name, and system/…/power_w is no step time.
NAMES = [
    "system/cpu_percent",
    "system/gpu0/power_w",
    "system/loss_scale",
    "train/entropy",
    "zeta/grad_norm",
    "aardvark/lr",
    "reward",
]


def test_system_series_come_after_every_training_metric(page: Page, seeded: Seeded) -> None:
    token = start_sdk_run(seeded.base, seeded.admin_key, RUN)
    steps = list(range(20))
    series = [
        {"name": name, "steps": steps, "values": [i + s / 10 for s in steps]}
        for i, name in enumerate(NAMES)
    ]
    post_scalars(seeded.base, token, {"series": series})
    page.set_viewport_size({"width": 1400, "height": 3000})
    open_ready(page, f"/projects/{SDK_PROJECT}/runs/{RUN}")
    groups = page.eval_on_selector_all("details.group", "gs => gs.map(g => g.dataset.prefix)")
    assert groups == ["", "train", "aardvark", "zeta", "system"]
    order = chart_order(page)
    assert order[:4] == ["reward", "train/entropy", "aardvark/lr", "zeta/grad_norm"]
    # Within the group the usual order holds: a loss-like name first.
    assert order[4:] == ["system/loss_scale", "system/cpu_percent", "system/gpu0/power_w"]
