"""Counts a page shows follow what is stored while the page is open, or say they are as of
its load: project run counts, a whole project's alerts (new runs included), the alert count of
a run without charts, and the matched view's outcomes."""

from __future__ import annotations

from playwright.sync_api import Locator, Page, expect

from tests.dashboard.seed import Seeded, post_ingest
from tests.helpers import alert, log

#: A little more than the projects and reports pages wait between two reads of their lists.
NEXT_READ_MS = 5_500


def one_point(seeded: Seeded, project: str, run: str) -> None:
    post_ingest(seeded.base, {"logs": [log("e0", 0, {"reward": 1.0}, project=project, run=run)]})


def run_count(page: Page, project: str) -> Locator:
    link = page.get_by_role("link", name=project, exact=True)
    return page.locator("table.projects tr", has=link).locator("td.num")


def test_the_projects_page_follows_run_counts(page: Page, seeded: Seeded) -> None:
    one_point(seeded, "counts-p", "first")
    page.clock.install()
    page.goto("/")
    runs = run_count(page, "counts-p")
    expect(runs).to_have_text("1")
    one_point(seeded, "counts-p", "second")
    page.clock.fast_forward(NEXT_READ_MS)
    expect(runs).to_have_text("2")
    # A project created since the page loaded appears too.
    one_point(seeded, "counts-q", "first")
    page.clock.fast_forward(NEXT_READ_MS)
    expect(run_count(page, "counts-q")).to_have_text("1")


def test_a_projects_alerts_follow_every_run_new_ones_too(page: Page, seeded: Seeded) -> None:
    project = "counts-r"
    post_ingest(seeded.base, {"alerts": [alert("a1", "First", project=project, run="r1")]})
    one_point(seeded, project, "r2")  # no alert yet
    page.clock.install()
    page.goto(f"/reports?project={project}")
    all_levels = page.locator(".level-filter.all .count")
    expect(page.locator(".alert")).to_have_count(1)
    post_ingest(seeded.base, {"alerts": [alert("a2", "Second", project=project, run="r2")]})
    page.clock.fast_forward(NEXT_READ_MS)
    expect(page.locator(".alert")).to_have_count(2)
    expect(all_levels).to_have_text("2")
    post_ingest(seeded.base, {"alerts": [alert("a3", "Third", project=project, run="r3")]})
    page.clock.fast_forward(NEXT_READ_MS)
    expect(page.locator(".alert")).to_have_count(3)
    expect(all_levels).to_have_text("3")
    expect(page.locator("#alert-a3 footer")).to_contain_text("run r3")


def test_a_run_without_charts_follows_its_alert_count(page: Page, seeded: Seeded) -> None:
    project = "counts-e"
    post_ingest(seeded.base, {"alerts": [alert("b1", "First", project=project, run="quiet")]})
    page.goto(f"/projects/{project}/runs/quiet")
    expect(page.locator(".live-state").first).to_have_text("live")
    expect(page.locator(".empty")).to_contain_text("This run has 1 alert:")
    post_ingest(seeded.base, {"alerts": [alert("b2", "Second", project=project, run="quiet")]})
    expect(page.locator(".empty")).to_contain_text("This run has 2 alerts:")


def test_the_matched_view_says_its_outcomes_are_as_of_the_page_load(page: Page) -> None:
    page.goto("/matched?left=lab/eval-base/val-1&right=lab/eval-tuned/val-1")
    expect(page.locator(".matched-result .as-of")).to_contain_text(
        "when this page loaded: reload to include any reported since"
    )
