"""The logs tab: the run's stdout and stderr, live, labelled, searchable, as text."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.dashboard.seed import SDK_PROJECT, XSS, Seeded, post_logs, start_sdk_run


def test_the_logs_tab_tails_labels_and_searches(page: Page, seeded: Seeded) -> None:
    page.goto(f"/projects/{SDK_PROJECT}/runs/sdk-run")
    page.get_by_role("tab", name="Logs").click()
    expect(page).to_have_url(f"/projects/{SDK_PROJECT}/runs/sdk-run?tab=logs")
    lines = page.locator(".log-line")
    expect(lines).to_have_count(4)
    expect(lines.locator(".ln-stream")).to_have_text(["stdout", "stdout", "stdout", "stderr"])
    expect(lines.nth(2).locator(".ln-text")).to_have_text(XSS)
    assert page.locator(".logs img").count() == 0

    post_logs(seeded.base, seeded.token, 4, ["step 2 loss 1.900", "step 3 loss 1.850"])
    expect(lines).to_have_count(6)
    expect(lines.last.locator(".ln-text")).to_have_text("step 3 loss 1.850")
    expect(page.locator(".logs .live-state")).to_have_text("live")

    page.get_by_placeholder("search log lines").fill("cuda")
    expect(page.locator(".log-line:visible")).to_have_count(1)
    expect(page.locator(".log-line:visible mark")).to_have_text("CUDA")
    expect(page).to_have_url(f"/projects/{SDK_PROJECT}/runs/sdk-run?tab=logs&logq=cuda")

    page.get_by_placeholder("search log lines").fill("")
    page.locator('input[name="stderr"]').uncheck()
    expect(page.locator(".log-line:visible")).to_have_count(5)
    expect(page.locator(".log-line.stderr")).to_be_hidden()


def test_a_run_without_logs_says_so(page: Page, seeded: Seeded) -> None:
    start_sdk_run(seeded.base, seeded.admin_key, "no-output-yet")
    page.goto(f"/projects/{SDK_PROJECT}/runs/no-output-yet?tab=logs")
    expect(page.locator(".log-empty")).to_contain_text("No log lines yet.")


def test_logs_a_project_keeps_to_its_members_are_not_asked_for(page: Page) -> None:
    """The Arena project is public, its logs are not: the tab says so and offers to sign in
    instead of asking the server for what it would refuse."""
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.goto("/projects/burtenshaw/runs/grpo-qwen-7?tab=logs")
    expect(page.locator(".log-empty")).to_contain_text("shows its logs to its members only")
    link = page.locator(".log-empty a")
    expect(link).to_have_text("Sign in")
    expect(link).to_have_attribute(
        "href", "/sign-in?next=%2Fprojects%2Fburtenshaw%2Fruns%2Fgrpo-qwen-7%3Ftab%3Dlogs"
    )
    assert not [url for url in asked if "/api/v1/" in url and "/logs" in url]
