"""Regressions first, in Chromium: on the matched view each transition count opens its
trials (the regressions are open at first), a page at a time, and a trial opens both its
trajectories side by side, aligned by message, with the first divergence and the first
failed tool call marked; producers' text stays text, and nothing is cut off at 1280 px.
A real server with a private project whose owner may read trajectory text."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.dashboard.members import OWNER, VIEWER, MembersServer, close_all, open_as
from tests.dashboard.members import serve_with_members as serve
from tests.dashboard.seed_eval import new_attempt, population, post_observations, trial
from tests.dashboard.seed_trajectories import evaluation, post_trajectories
from tests.server.test_matched_trials import conversations as api_conversations

DASH = "\N{EN DASH}"
PROJECT = "evals"
ROUND = "val-m"
REGRESSIONS = 52
MATCHED = f"/matched?left={PROJECT}/base/{ROUND}&right={PROJECT}/tuned/{ROUND}"
#: A token that no browser breaks by itself: the layout must wrap it.
UNBROKEN = "x" * 400


def conversations() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The API tests' two trajectories of the regressing trial (alike for three messages,
    then the right runs another command, whose result is a traceback), with text that
    looks like markup and a token too long for a column."""
    left, right = api_conversations()
    for side in (left, right):
        side[0] = {**side[0], "content": f"Fix the bug <b>now</b> {UNBROKEN}"}
    right[4] = {**right[4], "content": f"{right[4]['content']}\n<script>alert(1)</script>"}
    return left, right


def seed(base: str, admin_key: str) -> None:
    left, right = conversations()
    statuses = {
        "fix-bug-r0": ("success", "failure"),
        "fix-bug-r1": ("failure", "success"),
        **{f"reg-{i:03d}-r0": ("success", "failure") for i in range(REGRESSIONS - 1)},
    }
    for side, (run, text) in enumerate((("base", left), ("tuned", right))):
        token = new_attempt(base, admin_key, run, PROJECT)
        outcomes = [trial(ROUND, t, pair[side]) for t, pair in statuses.items()]
        post_observations(base, token, [population(ROUND, len(statuses)), *outcomes])
        post_trajectories(base, token, [evaluation(ROUND, "fix-bug-r0", 0, text)])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MembersServer]:
    for base, admin_key in serve(tmp_path_factory, "matched-trials", {}):
        world = MembersServer(base, admin_key)
        key = {"Authorization": f"Bearer {admin_key}"}
        for run in ("base", "tuned"):
            made = httpx.post(
                f"{base}/api/v1/projects/{PROJECT}/runs", json={"run": run}, headers=key
            )
            assert made.status_code == 201, made.text
        for login, role, content in ((OWNER, "owner", True), (VIEWER, "viewer", False)):
            put = world.api(
                "PUT", f"/projects/{PROJECT}/members/{login}", {"role": role, "content": content}
            )
            assert put.is_success, put.text
        private = world.api("PATCH", f"/projects/{PROJECT}/access", {"visibility": "private"})
        assert private.is_success, private.text
        seed(base, admin_key)
        yield world


@pytest.fixture
def opened(server: MembersServer) -> Iterator[list[BrowserContext]]:
    contexts: list[BrowserContext] = []
    yield contexts
    close_all(contexts, server)


def owner_page(
    browser: Browser, server: MembersServer, opened: list[BrowserContext], width: int = 1400
) -> Page:
    return open_as(browser, server, opened, OWNER, viewport={"width": width, "height": 900})


def listed(page: Page) -> list[str]:
    shown: list[str] = page.locator(".matched-trials tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.trial)"
    )
    return shown


def test_each_count_opens_its_trials_regressions_first(
    browser: Browser, server: MembersServer, opened: list[BrowserContext]
) -> None:
    page = owner_page(browser, server, opened)
    page.goto(MATCHED)
    expect(page.locator(".transition-trials h2")).to_have_text("Trials: success → failure")
    expect(page.locator(".transition-trials .page-where")).to_have_text(
        f"trials 1{DASH}50 of {REGRESSIONS}"
    )
    first = listed(page)
    assert first[0] == "fix-bug-r0"
    assert len(first) == 50
    row = page.locator('.matched-trials tr[data-trial="fix-bug-r0"]')
    expect(row.locator("td.task")).to_have_text("fix-bug")
    expect(row.locator(".side-outcome.left")).to_have_text("success")
    expect(row.locator(".side-outcome.right")).to_have_text("model failure")
    expect(row.locator("a.trajectory-open")).to_have_count(2)
    page.locator(".transition-trials .page-next").click()
    expect(page.locator(".transition-trials .page-where")).to_have_text(
        f"trials 51{DASH}{REGRESSIONS} of {REGRESSIONS}"
    )
    assert listed(page) == [f"reg-{i:03d}-r0" for i in range(49, REGRESSIONS - 1)]

    page.locator('tr[data-transition="failure_to_success"] button.transition-open').click()
    expect(page.locator(".transition-trials h2")).to_have_text("Trials: failure → success")
    expect(page).to_have_url(re.compile(r"transition=failure_to_success"))
    assert listed(page) == ["fix-bug-r1"]
    # A count of 0 has nothing to open.
    expect(page.locator('tr[data-transition="success_to_success"] button')).to_have_count(0)


def test_a_trial_opens_both_trajectories_side_by_side(
    browser: Browser, server: MembersServer, opened: list[BrowserContext]
) -> None:
    page = owner_page(browser, server, opened)
    page.goto(MATCHED)
    page.locator('.matched-trials tr[data-trial="fix-bug-r0"] button.trial-open').click()
    pair = page.locator(".side-by-side")
    expect(pair).to_have_attribute("data-trial", "fix-bug-r0")
    expect(page).to_have_url(re.compile(r"trial=fix-bug-r0"))
    expect(pair.locator(".pair-row")).to_have_count(7)
    expect(pair.locator(".pair-row.first-divergence")).to_have_attribute("data-index", "3")
    expect(pair.locator(".divergence-note a")).to_have_text("First divergence at message #4")
    expect(pair.locator(".pair-row.diverged")).to_have_count(4)
    failed = pair.locator(".message.first-failed-tool-call")
    expect(failed).to_have_count(1)
    # In the right column of row 4, and the call it answers is marked in row 3.
    row4_cells = pair.locator('.pair-row[data-index="4"] > .pair-cell')
    expect(row4_cells.nth(1).locator(".first-failed-tool-call")).to_have_count(1)
    expect(row4_cells.nth(0).locator(".first-failed-tool-call")).to_have_count(0)
    expect(pair.locator('.pair-row[data-index="3"] .tool-call.failed-call')).to_have_count(1)
    expect(pair.locator(".pair-side-head.left .failed-call-note")).to_have_text(
        "No tool result reads as failed."
    )
    expect(pair.locator(".pair-side-head.right .failed-call-note")).to_contain_text(
        "First failed tool call: bash (call y1), result #5"
    )
    # The producers' text is text: nothing of it became an element.
    expect(pair.locator(".pair-row").first).to_contain_text("Fix the bug <b>now</b>")
    expect(pair.locator("b, script")).to_have_count(0)
    expect(pair.locator(".first-failed-tool-call")).to_contain_text("<script>alert(1)</script>")

    page.reload()
    expect(page.locator(".side-by-side")).to_have_attribute("data-trial", "fix-bug-r0")
    hrefs = page.locator(".pair-side-head a.trajectory-open").evaluate_all(
        "links => links.map(a => a.getAttribute('href'))"
    )
    assert hrefs == [
        f"/projects/{PROJECT}/runs/base/trajectory?attempt=1&round_id={ROUND}&trial_id=fix-bug-r0&trial_attempt=0",
        f"/projects/{PROJECT}/runs/tuned/trajectory?attempt=1&round_id={ROUND}&trial_id=fix-bug-r0&trial_attempt=0",
    ]


def test_nothing_is_cut_off_at_1280_pixels(
    browser: Browser, server: MembersServer, opened: list[BrowserContext]
) -> None:
    page = owner_page(browser, server, opened, width=1280)
    page.goto(MATCHED + "&transition=success_to_failure&trial=fix-bug-r0")
    expect(page.locator(".pair-row")).to_have_count(7)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 1280
    edges = page.locator(
        ".matched-trials a.trajectory-open, .pair-side-head a.trajectory-open, .pair-cell, "
        ".matched-trials td"
    ).evaluate_all("els => els.map(e => e.getBoundingClientRect().right)")
    assert edges
    assert max(edges) <= 1280


def test_a_reader_without_the_content_permission_is_told_why(
    browser: Browser, server: MembersServer, opened: list[BrowserContext]
) -> None:
    page = open_as(browser, server, opened, VIEWER, viewport={"width": 1280, "height": 900})
    page.goto(MATCHED)
    expect(page.locator(".matched-trials tbody tr")).to_have_count(50)
    page.locator('.matched-trials tr[data-trial="fix-bug-r0"] button.trial-open').click()
    expect(page.locator(".pair-view .no-permission")).to_contain_text("content permission")
    expect(page.locator(".pair-row")).to_have_count(0)
