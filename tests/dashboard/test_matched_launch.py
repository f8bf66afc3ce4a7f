"""Start matched benchmark evaluations in a real browser against a real server whose local
engine runs the real lm-eval: two runs ticked on the runs page, their exports listed on
their run pages and chosen, one benchmark and a sample limit; Check both shows both
reports and the same protocol digest, a change clears them, a check request that fails is
shown as failed, each side starts alone, and once both have finished the page links the
matched view, which opens."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, expect

from tests.dashboard.members import EDITOR, MembersServer, open_as, serve_with_members
from tests.dashboard.test_launch import browsers  # noqa: F401 (closes this module's browsers too)
from tests.launch.benchmark import OFFLINE, TASK, tiny_model, write_benchmark
from tests.launch.jobs import write_recipes
from tuneplane import Reporter
from tuneplane.client.exports import register_export

PROJECT = "bench"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MembersServer]:
    tmp = tmp_path_factory.mktemp("matched-launch")
    recipes = write_recipes(tmp / "recipes")
    write_benchmark(recipes)
    env = {"TUNEPLANE_RECIPES_DIR": str(recipes), "HF_HOME": str(tmp / "hf"), **OFFLINE}
    for base, key in serve_with_members(tmp_path_factory, "matched-launch-pages", env):
        made = MembersServer(base, key)
        for run, seed in (("train-a", 1), ("train-b", 2)):
            assert made.api("POST", f"/projects/{PROJECT}/runs", {"run": run}).status_code == 201
            token = made.api("POST", f"/projects/{PROJECT}/runs/{run}/attempts").json()["token"]
            model = tiny_model(tmp / run, seed)
            with Reporter(base, f"{PROJECT}/{run}", token, attempt=1) as reporter:
                assert register_export(reporter, model, step=100)
                assert reporter.flush(10)
        answer = made.api("PUT", f"/projects/{PROJECT}/members/{EDITOR}", {"role": "editor"})
        assert answer.is_success
        yield made


def _bench_jobs(server: MembersServer) -> list[dict[str, Any]]:
    jobs: list[dict[str, Any]] = server.api("GET", f"/projects/{PROJECT}/launch/jobs").json()
    return [job for job in jobs if job["recipe"] == "bench"]


def test_start_matched_benchmark_evaluations_ends_in_the_matched_view(
    browser: Browser,
    server: MembersServer,
    browsers: list[BrowserContext],  # noqa: F811 (test_launch's fixture)
) -> None:
    page = open_as(browser, server, browsers, EDITOR)
    # A run's page lists its export with the digest.
    page.goto(f"/projects/{PROJECT}/runs/train-a")
    exports = server.api("GET", f"/projects/{PROJECT}/runs/train-a/exports").json()
    expect(page.locator(".exports-panel .export-digest")).to_have_text(exports[0]["digest"])

    page.goto(f"/projects/{PROJECT}")
    start = page.get_by_role("link", name="Start matched benchmark evaluations")
    expect(start).to_have_attribute("aria-disabled", "")
    for run in ("train-a", "train-b"):
        page.locator(f'tr:has(a:text-is("{run}")) input[type="checkbox"]').check()
    start.click()
    expect(page.get_by_role("heading", name="Start matched benchmark evaluations")).to_be_visible()
    expect(page.locator('select[name="left-export"] option')).to_contain_text(["step 100 · hf"])
    expect(page.locator('select[name="benchmark"]')).to_have_value("bench")
    page.locator('input[name="tasks"]').fill(TASK)
    page.get_by_label("sample limit").fill("4")

    # A request that never reaches the server is a failed check request, never a pass.
    page.route("**/launch/matched/preview", lambda route: route.abort())
    page.get_by_role("button", name="Check both").click()
    expect(page.locator(".request-failed")).to_contain_text("Check request failed")
    expect(page.locator(".side-preview")).to_have_count(0)
    page.unroute("**/launch/matched/preview")

    page.get_by_role("button", name="Check both").click()
    previews = page.locator(".side-preview")
    expect(previews).to_have_count(2)
    for side in ("left", "right"):
        report = page.locator(f'.side-preview[data-side="{side}"] .report')
        expect(report).to_have_attribute("data-ready", "true")
    expect(page.locator(".protocol")).to_have_attribute("data-same", "true")
    digests = page.locator(".protocol-digest").all_text_contents()
    assert len(digests) == 2
    assert digests[0] == digests[1]
    assert len(digests[0]) == 64
    # A change clears both reports.
    page.get_by_label("sample limit").fill("3")
    expect(page.locator(".report-cleared")).to_be_visible()
    expect(previews).to_have_count(0)
    page.get_by_role("button", name="Check both").click()
    expect(previews).to_have_count(2)

    # Starting the left side starts it alone.
    page.get_by_role("button", name="Start left").click()
    expect(page.locator('.pair-states [data-side="right"]')).to_have_attribute(
        "data-state", "not_started"
    )
    assert len(_bench_jobs(server)) == 1
    page.get_by_role("button", name="Start right").click()
    link = page.locator(".matched-link")
    expect(link).to_have_text(f"Open the matched view: {TASK}", timeout=600_000)
    assert sorted(job["state"] for job in _bench_jobs(server)) == ["succeeded", "succeeded"]
    link.click()
    expect(page).to_have_url(re.compile(r"/matched\?left="))
    expect(page.locator(".side-cards")).to_be_visible()
