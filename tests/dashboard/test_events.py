"""The Events tab: the latest 100 events, the newest health snapshot however old, one
distribution's buckets drawn on their own and a heatmap of it over steps; names as text."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.dashboard.seed_eval import HISTOGRAMS, XSS

BASE = "/projects/lab/runs/eval-base"
BUCKETS = ["(-inf, 0]", "(0, 1]", "(1, 2]", "(2, 4]", "(4, 8]", "(8, +inf)"]


def test_the_events_panel_lists_events_and_draws_buckets(page: Page) -> None:
    page.goto(BASE)
    page.get_by_role("tab", name="Events").click()
    rows = page.locator(".events-table tbody tr")
    expect(rows).to_have_count(100)
    expect(page.locator(".events-count")).to_have_text("the latest 100 events, newest first")
    expect(rows.nth(0)).to_have_attribute("data-event", "done-32")
    expect(rows.nth(1).locator(".event-name")).to_have_text(XSS)
    expect(rows.nth(0).locator(".event-details")).to_contain_text("tokens512")
    assert page.locator(".events img").count() == 0

    # The health snapshot is older than the latest 100 events, and still found.
    assert page.locator('.events-table tr[data-event="health-5"]').count() == 0
    expect(page.locator(".health-line")).to_contain_text("step 5")
    expect(page.locator(".health-line")).to_contain_text("gpu_mem_gb61.5")

    newest = HISTOGRAMS[30]
    buckets = page.locator(".buckets-table tbody tr")
    expect(buckets.locator(".bucket")).to_have_text(BUCKETS)
    expect(buckets.locator(".num")).to_have_text([str(c) for c in newest])
    drawn = page.evaluate("window.__tuneplane.events")
    assert drawn["histogram"]["counts"] == newest
    assert drawn["heatmap"] == {"name": "rollout/reward", "columns": 3, "rows": 6}
    painted = page.eval_on_selector_all(
        ".dist-figure canvas",
        """canvases => canvases.map(c => {
            const data = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
            let inked = 0;
            for (let i = 3; i < data.length; i += 4) if (data[i] > 0) inked += 1;
            return inked;
        })""",
    )
    assert len(painted) == 2
    assert all(count > 1000 for count in painted)

    page.locator('select[name="event-type"]').select_option("health")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-event", "health-5")
