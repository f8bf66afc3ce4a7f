"""The matched view: transitions over trials present in both rounds, always; the observed
success-rate difference with the exact McNemar test only when the protocol matches and both
rounds are completely scored, otherwise the conditions that failed; rounds picked per side."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.dashboard.conftest import Watched
from tests.dashboard.seed import Seeded
from tests.dashboard.seed_restart import RESTART_RUN, seed_restart
from tuneplane.evaluation.matched import mcnemar_exact


def transition(page: Page, key: str) -> str:
    text: str = page.locator(f'tr[data-transition="{key}"] td').inner_text()
    return text


def test_incomplete_rounds_show_transitions_and_which_condition_failed(page: Page) -> None:
    page.goto("/matched?left=lab/eval-base/val-1&right=lab/eval-tuned/val-1")
    expect(page.locator(".transitions-table tr")).to_have_count(9)
    assert transition(page, "failure_to_success") == "24"
    assert transition(page, "success_to_failure") == "0"
    # The left's 24 trials without a verdict all have one on the right: counted by direction.
    assert transition(page, "unscored_to_scored") == "24"
    assert transition(page, "scored_to_unscored") == "0"
    assert transition(page, "unscored_both") == "0"
    # That direction's count opens its trials, apart from the pass/fail transitions.
    page.locator('tr[data-transition="unscored_to_scored"] .transition-open').click()
    expect(page).to_have_url(re.compile(r"transition=unscored_to_scored"))
    expect(page.locator(".transition-trials tbody tr[data-trial]")).to_have_count(24)
    assert transition(page, "missing_right") == "10"
    reasons = page.locator(".difference.withheld .reasons li")
    expect(reasons).to_have_text(
        [
            "left round is not completely scored (104 of 140 trials scored)",
            "right round is not completely scored (120 of 140 trials scored)",
        ]
    )
    codes = reasons.evaluate_all("items => items.map(i => [i.dataset.code, i.dataset.side])")
    assert codes == [["left_incomplete_coverage", "left"], ["right_incomplete_coverage", "right"]]
    expect(page.locator(".difference-value")).to_have_count(0)
    # Neither seeded round recorded a checkpoint: each side says so.
    expect(page.locator(".side-card .checkpoint dd")).to_have_text(["not recorded"] * 2)


def test_a_round_is_picked_on_each_side_and_the_difference_shown(page: Page) -> None:
    page.goto("/projects/lab/runs/eval-base?tab=validation")
    page.locator('tr[data-round="val-full"]').get_by_role("link", name="compare with…").click()
    expect(page).to_have_url(
        re.compile(r"/matched\?left=lab%2Feval-base%2Fval-full&left_attempt=1$")
    )
    expect(page.locator(".matched-result .empty-title")).to_have_text(
        "No round chosen on the right."
    )
    expect(page.locator('select[name="left-round"]')).to_have_value("val-full")
    page.locator('select[name="right-project"]').select_option("lab")
    page.locator('select[name="right-run"]').select_option("eval-tuned")
    page.locator('select[name="right-round"]').select_option("val-full")
    page.get_by_role("button", name="Compare these rounds").click()

    expect(page.locator(".difference-value")).to_have_text("+5.0 percentage points")
    expect(page.locator(".difference-exact")).to_have_text("1 / 20")
    expect(page.locator(".difference-label")).to_contain_text("observed difference")
    p_value = mcnemar_exact(4, 3)
    expect(page.locator(".mcnemar")).to_have_text(
        f"Exact McNemar test on discordant trial pairs (two-sided): p = {p_value:#.3g}"
    )
    assert transition(page, "failure_to_success") == "4"
    assert transition(page, "success_to_failure") == "3"


def test_a_round_that_does_not_exist_is_named(page: Page, watched: Watched) -> None:
    page.goto("/matched?left=lab/eval-base/val-9&right=lab/no-such-run/val-1")
    expect(page.locator(".matched-result .empty-title")).to_have_text(
        "These rounds cannot be compared."
    )
    expect(page.locator(".matched-result")).to_contain_text("round 'val-9' has no declaration")
    expect(page.locator(".side-picker.right .picker-note")).to_contain_text("no-such-run")
    expect(page.locator(".side-picker.left .picker-note")).to_have_text(
        "No round named “val-9” in execution attempt 1 of this run."
    )
    expect(page.locator('select[name="left-round"]')).to_have_value("")
    # The browser logs the API's 404 answer; the page said what is missing instead.
    watched.errors[:] = [e for e in watched.errors if "status of 404" not in e]


def test_an_execution_attempt_is_picked_on_each_side(page: Page, seeded: Seeded) -> None:
    run = seed_restart(seeded.base, seeded.admin_key, f"{RESTART_RUN}-matched")
    spec = f"lab/{run}/val-r"
    page.goto(f"/matched?left={spec}&left_attempt=1&right={spec}")
    expect(page.locator(".side-card.left h3")).to_contain_text("execution attempt 1")
    expect(page.locator(".side-card.right h3")).to_contain_text("execution attempt 2")
    expect(page.locator('select[name="left-attempt"]')).to_have_value("1")
    expect(page.locator('select[name="right-attempt"]')).to_have_value("2")
    assert transition(page, "success_to_failure") == "1"
    assert transition(page, "missing_right") == "3"
    codes = page.locator(".difference.withheld .reasons li").evaluate_all(
        "items => items.map(i => i.dataset.code)"
    )
    assert codes == ["right_incomplete_coverage"]

    page.locator('select[name="right-attempt"]').select_option("1")
    expect(page.locator('select[name="right-round"]')).to_have_value("val-r")
    page.get_by_role("button", name="Compare these rounds").click()
    expect(page).to_have_url(re.compile(r"left_attempt=1&right=.*&right_attempt=1$"))
    expect(page.locator(".side-card.right h3")).to_contain_text("execution attempt 1")
    expect(page.locator(".difference-value")).to_have_text("+0.0 percentage points")
    expect(page.locator(".difference-exact")).to_have_text("0 / 1")
    assert transition(page, "success_to_success") == "3"


def test_an_attempt_without_rounds_is_named_not_swapped(page: Page, watched: Watched) -> None:
    page.goto("/matched?left=lab/eval-base/val-full&left_attempt=7&right=lab/eval-tuned/val-full")
    expect(page.locator(".matched-result")).to_contain_text(
        "left_attempt: execution attempt 7 of lab/eval-base reported no evaluation outcome"
    )
    expect(page.locator(".difference-value")).to_have_count(0)
    watched.errors[:] = [e for e in watched.errors if "status of 404" not in e]
