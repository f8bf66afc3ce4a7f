"""Numbers a chart shows: the legend's last value is the run's last reported value (a bucket's
mean only under the cursor, said to be one), and counts follow live points."""

from __future__ import annotations

import re

from playwright.sync_api import Locator, Page, expect

from tests.dashboard.pages import charts, open_ready
from tests.dashboard.seed import PROJECT, SDK_PROJECT, Seeded, post_ingest
from tests.helpers import log

#: Enough points that a chart of this page's width (under 1,002 pixels) buckets them; the last
#: two (3.00007 and 3.11117) share the last bucket, whose mean is 3.056.
STEPS = 1002
ENDING = {STEPS - 2: 3.00007, STEPS - 1: 3.11117}


def post_reward(seeded: Seeded, run: str, values: dict[int, float]) -> None:
    """Arena events of ``reward`` at the given steps, at most 100 a batch."""
    items = sorted(values.items())
    for first in range(0, len(items), 100):
        events = [log(f"e{s}", s, {"reward": v}, run=run) for s, v in items[first : first + 100]]
        post_ingest(seeded.base, {"logs": events})


def bucketed_run(seeded: Seeded, run: str) -> str:
    """A run whose 1,002 rewards rise from 1 to 2, then end 3.00007, 3.11117. Its page."""
    values = {s: 1 + s / STEPS for s in range(STEPS - 2)}
    post_reward(seeded, run, {**values, **ENDING})
    return f"/projects/{PROJECT}/runs/{run}"


def legend(page: Page, metric: str = "reward") -> Locator:
    return page.locator(f'.chart[data-metric="{metric}"] .legend')


def point_at(page: Page, fraction: float, metric: str = "reward") -> None:
    """The cursor over a chart, at a fraction of its plot's width."""
    box = page.locator(f'.chart[data-metric="{metric}"] .u-over').bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * fraction, box["y"] + box["height"] / 2)


def test_the_legend_gives_the_last_reported_value_not_the_last_buckets_mean(
    page: Page, seeded: Seeded
) -> None:
    open_ready(page, bucketed_run(seeded, "last-value-run"))
    assert charts(page)["reward"]["downsampled"] is True
    # With the cursor off the chart: the last point reported, 3.11117, not 3.056.
    expect(legend(page).locator(".legend-value")).to_have_text("3.111")
    expect(legend(page).locator(".legend-where")).to_have_text("last reported · step 1,001")

    # Under the cursor at the right end: the last bucket's mean, said to be a mean.
    point_at(page, 0.999)
    expect(legend(page).locator(".legend-where")).to_have_text("mean of steps 1,000\u20131,001")
    expect(legend(page).locator(".legend-value")).to_have_text("3.056")
    page.mouse.move(0, 0)
    expect(legend(page).locator(".legend-value")).to_have_text("3.111")


def test_the_point_count_and_last_value_follow_live_points(page: Page, seeded: Seeded) -> None:
    path = bucketed_run(seeded, "live-count-run")
    key = f"{PROJECT}/live-count-run"
    open_ready(page, path)
    expect(page.locator(".live-state").first).to_have_text("live")
    badge = page.locator('.chart[data-metric="reward"] .badge')
    buckets = charts(page)["reward"]["runs"][key]
    expect(badge).to_have_text(f"1,002 pts → {buckets}")

    # Twelve points more, without a reload: the count, the buckets and the last value follow.
    post_reward(seeded, "live-count-run", {s: 2.5 + s / 1e4 for s in range(STEPS, STEPS + 12)})
    page.wait_for_function(
        "([k, s]) => window.__tuneplane.charts.reward.lastStep[k] === s", arg=[key, STEPS + 11]
    )
    buckets = charts(page)["reward"]["runs"][key]
    expect(badge).to_have_text(f"1,014 pts → {buckets}")
    expect(legend(page).locator(".legend-value")).to_have_text("2.601")
    expect(legend(page).locator(".legend-where")).to_have_text("last reported · step 1,013")

    # A zoomed chart keeps its range, and its legend's last value still follows.
    over = page.locator('.chart[data-metric="reward"] .u-over')
    box = over.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * 0.2, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] / 2, steps=4)
    page.mouse.up()
    expect(page.locator(".zoom")).to_contain_text("zoomed to")
    page.mouse.move(0, 0)
    post_reward(seeded, "live-count-run", {STEPS + 12: -7.25})
    expect(legend(page).locator(".legend-value")).to_have_text("-7.25")
    expect(legend(page).locator(".legend-where")).to_have_text("last reported · step 1,014")


def test_a_last_report_that_was_not_a_number_is_said(page: Page) -> None:
    """sdk-run's loss ends with NaN, inf and -inf at steps 400-402: its last report is -inf,
    not the last finite value before it."""
    open_ready(page, f"/projects/{SDK_PROJECT}/runs/sdk-run")
    expect(legend(page, "train/loss").locator(".legend-value")).to_have_text("-inf")
    expect(legend(page, "train/loss").locator(".legend-where")).to_have_text(
        "last reported · step 402"
    )
    # Under the cursor, a finite point's own value: not a mean, at one step.
    point_at(page, 0.5, "train/loss")
    expect(legend(page, "train/loss").locator(".legend-where")).to_have_text(
        re.compile(r"^step \d{3}$")
    )
