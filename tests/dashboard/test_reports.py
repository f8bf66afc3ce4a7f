"""The reports page: alerts newest first, a level= filter in the address, #alert-<id>
anchors that scroll to the alert, and user text shown as text."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.dashboard.seed import PROJECT, XSS, Seeded, post_ingest
from tests.helpers import alert

REPORTS = f"/reports?project={PROJECT}&runs=grpo-qwen-7"
NEWEST_FIRST = ["xss-title", "sandbox-cleanup-239", "slow-step-180", "reward-plateau-120"]


def alert_ids(page: Page) -> list[str]:
    ids: list[str] = page.eval_on_selector_all(".alert", "els => els.map(e => e.id.slice(6))")
    return ids


def test_alerts_are_listed_newest_first_and_filtered_by_level(page: Page) -> None:
    page.goto(REPORTS)
    expect(page.locator(".alert")).to_have_count(4)
    assert alert_ids(page) == NEWEST_FIRST

    page.goto(REPORTS + "&level=warn")
    expect(page.locator(".alert")).to_have_count(2)
    assert alert_ids(page) == ["xss-title", "slow-step-180"]
    expect(page.locator('.level-filter[aria-current="page"]')).to_contain_text("warn")
    page.locator(".level-filter.error").click()
    expect(page).to_have_url(REPORTS + "&level=error")
    expect(page.locator(".alert")).to_have_count(1)
    expect(page.locator(".alert .alert-title")).to_have_text("Sandbox cleanup timed out")
    expect(page.locator(".alert .alert-text")).to_have_text(
        "Training ended after 239 updates. Evaluation will use the last checkpoint."
    )


def test_an_anchor_scrolls_to_its_alert(page: Page) -> None:
    page.set_viewport_size({"width": 1000, "height": 360})
    page.goto(REPORTS + "#alert-reward-plateau-120")
    target = page.locator("#alert-reward-plateau-120")
    expect(target).to_have_class("alert level-info targeted")
    expect(target).to_be_in_viewport()
    assert page.evaluate("window.scrollY") > 0
    # The anchor of each alert is its own link.
    assert target.locator("a.anchor").get_attribute("href") == "#alert-reward-plateau-120"


def test_an_anchor_hidden_by_the_level_filter_says_so(page: Page) -> None:
    page.goto(REPORTS + "&level=error#alert-slow-step-180")
    expect(page.locator(".notice")).to_contain_text("the level filter hides it")
    page.get_by_role("link", name="show all levels").click()
    expect(page.locator("#alert-slow-step-180")).to_be_in_viewport()


def test_user_text_is_shown_as_text_never_as_html(page: Page) -> None:
    page.goto(REPORTS)
    title = page.locator("#alert-xss-title .alert-title")
    expect(title).to_have_text(XSS)
    expect(page.locator("#alert-xss-title .alert-text")).to_have_text(
        '<script>alert("text")</script> stays text'
    )
    assert page.locator("main img, main script").count() == 0
    # The run page's alert strip and a config value: text as well.
    page.goto(f"/projects/{PROJECT}/runs/grpo-qwen-7")
    expect(page.locator(".alert-strip")).to_contain_text(XSS)
    page.goto("/projects/lab/runs/sdk-run")
    expect(page.locator(".run-head .chip-value").last).to_have_text(XSS)
    assert page.locator("main img").count() == 0
    # The page fixture fails the test if a dialog opened or a script error happened.


def test_several_runs_and_live_alerts(page: Page, seeded: Seeded) -> None:
    page.goto(f"/reports?project={PROJECT}&runs=grpo-qwen-7,alert-only")
    expect(page.locator(".alert")).to_have_count(5)
    expect(page.locator("#alert-setup-failed footer")).to_contain_text("run alert-only")
    post_ingest(
        seeded.base,
        {"alerts": [alert("late-alert", "Evaluation finished", level="info", run="alert-only")]},
    )
    expect(page.locator(".alert")).to_have_count(6)
    assert alert_ids(page)[0] == "late-alert"
