"""Launching from the dashboard in a real browser against one real server whose local engine
runs real jobs: the recipe list, the launch form made from a recipe's schema, Check
readiness with passing and failing checks and what is never checked, a check request that
fails (an engine that does not answer, a browser that is offline) shown as failed and never
as a pass, a changed parameter clearing the report, Submit (a double click starts one job)
ending on the run page with the engine's state of its job beside its attempt's, Cancel, and
Re-run from a run page and from a diagnosis, prefilled, with the parent recorded."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Route, expect

from tests.dashboard.members import (
    EDITOR,
    OWNER,
    VIEWER,
    MembersServer,
    close_all,
    open_as,
    serve_with_members,
)
from tests.launch.jobs import TINY, write_recipes
from tests.serving import free_port
from tuneplane.contract.launch import CHECK_NAMES, CHECK_RECORD_KEY, NEVER_CHECKED

PROJECT = "lab"
#: A job that fails as a GPU out of memory does: the diagnosis recognises it.
OOM_JOB = """
import sys
print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", flush=True)
sys.exit(1)
"""


def _recipes(where: Path) -> Path:
    """The launch tests' recipes, one on the Ray engine (whose cluster never answers here)
    and one whose job runs out of GPU memory."""
    directory = write_recipes(where / "recipes")
    (directory / "src" / "oom.py").write_text(OOM_JOB)
    (directory / "oom.toml").write_text(TINY.replace('"job.py"', '"oom.py"'))
    (directory / "on_ray.toml").write_text(TINY.replace('engine = "local"', 'engine = "ray"'))
    return directory


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MembersServer]:
    env = {
        "TUNEPLANE_RECIPES_DIR": str(_recipes(tmp_path_factory.mktemp("launch"))),
        "TUNEPLANE_RAY_ADDRESS": f"http://127.0.0.1:{free_port()}",  # nothing answers there
    }
    for base, key in serve_with_members(tmp_path_factory, "launch-pages", env):
        made = MembersServer(base, key)
        assert made.api("POST", f"/projects/{PROJECT}/runs", {"run": "seed"}).status_code == 201
        for login, role in ((OWNER, "owner"), (EDITOR, "editor"), (VIEWER, "viewer")):
            assert made.api(
                "PUT", f"/projects/{PROJECT}/members/{login}", {"role": role}
            ).is_success
        yield made


@pytest.fixture
def browsers(server: MembersServer) -> Iterator[list[BrowserContext]]:
    opened: list[BrowserContext] = []
    yield opened
    close_all(opened, server)


def _form(page: Page, recipe: str = "tiny", mode: str | None = "ok") -> None:
    """The recipe's launch form, with its ``mode`` parameter chosen."""
    page.goto(f"/projects/{PROJECT}/launch/recipes/{recipe}")
    expect(page.locator("form.launch-form")).to_be_visible()
    if mode is not None:
        page.locator('select[name="mode"]').select_option(mode)


#: How long a check or a submission may take the server on a busy machine (a submission
#: checks everything again and starts a process).
SERVER_WORK_MS = 30_000


def _check(page: Page) -> None:
    """Check readiness, and wait for what the page shows of the answer."""
    page.get_by_role("button", name="Check readiness").click()
    page.locator(".report").wait_for(timeout=SERVER_WORK_MS)


def _jobs(server: MembersServer) -> list[dict[str, Any]]:
    answer = server.api("GET", f"/projects/{PROJECT}/launch/jobs")
    assert answer.status_code == 200, answer.text
    jobs: list[dict[str, Any]] = answer.json()
    return jobs


def _submit(page: Page, server: MembersServer) -> str:
    """Submit the form with a double click; one job starts, and the page is its run's."""
    before = len(_jobs(server))
    page.get_by_role("button", name="Submit").dblclick()
    expect(page).to_have_url(
        re.compile(rf"/projects/{PROJECT}/runs/[^/?]+$"), timeout=SERVER_WORK_MS
    )
    run = page.url.rsplit("/", 1)[1]
    expect(page.locator(".launch-panel .job")).to_have_count(1)
    assert len(_jobs(server)) == before + 1
    return run


def test_the_recipe_list_is_reached_from_the_project(
    browser: Browser, server: MembersServer, browsers: list[BrowserContext]
) -> None:
    page = open_as(browser, server, browsers, EDITOR)
    page.goto(f"/projects/{PROJECT}")
    page.get_by_role("link", name="Launch").click()
    expect(page).to_have_url(f"{server.base}/projects/{PROJECT}/launch")
    tiny = page.locator('tr[data-recipe="tiny"]')
    expect(tiny.locator(".recipe-engine")).to_have_text("local")
    expect(tiny.locator(".recipe-resources")).to_have_text("0 GPUs, 1 CPU, 1 GB, no time limit")
    expect(tiny.locator(".recipe-params")).to_have_text(
        "4 parameters (1 required): mode, lr, batch, world_size"
    )
    expect(page.locator('tr[data-recipe="gpu"] .recipe-resources')).to_contain_text("1 GPU,")
    expect(page.locator('tr[data-recipe="on_ray"] .recipe-engine')).to_have_text("ray")
    tiny.get_by_role("link", name="tiny").click()
    expect(page).to_have_url(f"{server.base}/projects/{PROJECT}/launch/recipes/tiny")
    # The form is the schema's: a choice for the enum, numbers with their range.
    mode = page.locator('select[name="mode"]')
    expect(mode.locator("option")).to_have_text(["—", "ok", "fail", "wait"])
    expect(page.locator('[data-param="mode"] .param-rule')).to_contain_text("required")
    expect(page.locator('input[name="lr"]')).to_have_attribute("min", "0")
    expect(page.locator('input[name="lr"]')).to_have_attribute("placeholder", "default 0.001")
    page.locator('input[name="lr"]').fill("-1")
    expect(page.locator('[data-param="lr"] .field-problem')).to_have_text("must be at least 0")


def test_a_preview_shows_each_check_and_what_is_never_checked_and_a_change_clears_it(
    browser: Browser, server: MembersServer, browsers: list[BrowserContext]
) -> None:
    page = open_as(browser, server, browsers, EDITOR)
    _form(page)
    _check(page)
    report = page.locator(".report")
    expect(report).to_have_attribute("data-ready", "true")
    checks = report.locator(".check")
    expect(checks).to_have_count(len(CHECK_NAMES))
    expect(report.locator('.check[data-status="failed"]')).to_have_count(0)
    expect(report.locator('.check[data-check="source"]')).to_have_attribute("data-status", "passed")
    expect(report.locator('.check[data-check="fleet"] .check-reason')).to_contain_text("CPUs")
    never = report.locator(".not-checked li")
    expect(never).to_have_text([reason for _, reason in NEVER_CHECKED])
    expect(report.locator(".not-checked h3")).to_have_text("Not checked")
    expect(report.locator(".fingerprint code")).to_have_text(re.compile(r"^[0-9a-f]{64}$"))

    # A changed parameter clears the report: it was advice for other values.
    page.locator('input[name="batch"]').fill("7")
    expect(page.locator(".report")).to_have_count(0)
    expect(page.locator(".report-cleared")).to_be_visible()
    _check(page)
    failed = page.locator('.report .check[data-check="configuration"]')
    expect(failed).to_have_attribute("data-status", "failed")
    expect(failed.locator(".check-reason")).to_contain_text("whole batches per rank")
    expect(page.locator(".report")).to_have_attribute("data-ready", "false")
    expect(page.locator(".report-title")).to_have_text("Not ready: 1 check failed")
    expect(page.locator(".report .not-checked li")).to_have_count(len(NEVER_CHECKED))
    # A config key changes what the rules read too: it clears the report as well.
    page.get_by_label("config").fill('{"note": "x"}')
    expect(page.locator(".report")).to_have_count(0)

    # A source that is not there, and a runtime the engine cannot run.
    _form(page, "no_dir")
    _check(page)
    source = page.locator('.report .check[data-check="source"]')
    expect(source).to_have_attribute("data-status", "failed")
    _form(page, "image")
    _check(page)
    expect(page.locator('.report .check[data-check="recipe"]')).to_have_attribute(
        "data-status", "failed"
    )
    expect(page.locator('.report .check[data-check="runtime"]')).to_have_attribute(
        "data-status", "not_checked"
    )


def test_a_check_request_that_fails_is_never_shown_as_a_pass(
    browser: Browser, server: MembersServer, browsers: list[BrowserContext]
) -> None:
    page = open_as(browser, server, browsers, EDITOR)
    # The Ray engine's cluster does not answer: the server says 503, naming it.
    _form(page, "on_ray")
    _check(page)
    failed = page.locator(".report.request-failed")
    expect(failed.locator(".report-title")).to_have_text("Check request failed")
    expect(failed).to_contain_text("the server answered 503: engine: the ray engine did not answer")
    expect(page.locator(".check")).to_have_count(0)
    expect(page.get_by_text("Ready to submit")).to_have_count(0)

    # A report that passed, then the browser loses the server: the new request fails and
    # the passing report is gone.
    _form(page)
    _check(page)
    expect(page.locator(".report")).to_have_attribute("data-ready", "true")
    page.context.set_offline(True)
    _check(page)
    expect(page.locator(".report.request-failed")).to_contain_text(
        "the server could not be reached"
    )
    expect(page.locator(".check")).to_have_count(0)
    page.context.set_offline(False)

    # A viewer may read recipes but not preview: the refusal is a failed request too.
    viewer = open_as(browser, server, browsers, VIEWER)
    _form(viewer)
    _check(viewer)
    expect(viewer.locator(".report.request-failed")).to_contain_text("the server answered 403")


def test_submit_opens_the_run_with_its_jobs_state_and_cancel(
    browser: Browser, server: MembersServer, browsers: list[BrowserContext]
) -> None:
    page = open_as(browser, server, browsers, EDITOR)
    _form(page)
    page.get_by_label("new run ID").fill("first-ok")
    assert _submit(page, server) == "first-ok"
    job = page.locator(".launch-panel .job")
    expect(job.locator(".job-state")).to_have_text("succeeded", timeout=60_000)
    expect(job.locator(".attempt-status")).to_have_text("succeeded")
    expect(job.locator(".cancel-job")).to_have_count(0)  # an ended job is not cancelled
    expect(page.locator(".launch-recipe")).to_have_text("tiny")
    stored = server.api("GET", f"/projects/{PROJECT}/runs/first-ok").json()["config"]
    assert stored["parameters"]["mode"] == "ok"
    assert stored[CHECK_RECORD_KEY]["recipe"] == "tiny"
    assert "parent" not in stored[CHECK_RECORD_KEY]

    # A job that waits: running, then cancelled from the page.
    _form(page, "tiny", "wait")
    run = _submit(page, server)
    expect(job.locator(".job-state")).to_have_text("running", timeout=60_000)
    # A viewer sees the state, and no Cancel.
    viewer = open_as(browser, server, browsers, VIEWER)
    viewer.goto(f"/projects/{PROJECT}/runs/{run}")
    expect(viewer.locator(".launch-panel .job-state")).to_have_text("running")
    expect(viewer.locator(".cancel-job")).to_have_count(0)
    expect(viewer.locator(".rerun-button")).to_have_count(0)
    job.get_by_role("button", name="Cancel").click()
    expect(job.locator(".job-state")).to_have_text("cancelled", timeout=30_000)
    expect(job.locator(".attempt-status")).to_have_text("cancelled")
    expect(viewer.locator(".launch-panel .job-state")).to_have_text("cancelled", timeout=30_000)


def test_a_refused_submit_names_each_failed_check_and_a_lost_answer_is_retried_safely(
    browser: Browser, server: MembersServer, browsers: list[BrowserContext]
) -> None:
    page = open_as(browser, server, browsers, EDITOR)
    before = len(_jobs(server))
    # Submission checks again without a preview: two checks fail, both are said.
    _form(page, "no_dir")
    page.locator('input[name="batch"]').fill("7")
    page.get_by_role("button", name="Submit").click()
    refused = page.locator(".launch-error")
    expect(refused).to_contain_text("checks.source:", timeout=SERVER_WORK_MS)
    expect(refused).to_contain_text("checks.configuration: batch % world_size == 0")
    assert len(_jobs(server)) == before

    # The server takes a submission but its answer never reaches the browser; Submit again
    # sends the form's key again, and the server answers the job the first one started.
    _form(page)
    page.get_by_label("new run ID").fill("answer-lost")
    lost: list[str] = []

    def drop_answer(route: Route) -> None:
        route.fetch()  # the server receives it and starts the job
        lost.append(route.request.headers["idempotency-key"])
        route.abort("connectionreset")

    page.route(f"**/api/v1/projects/{PROJECT}/launch", drop_answer, times=1)
    page.get_by_role("button", name="Submit").click()
    expect(page.locator(".launch-error")).to_contain_text("Not submitted", timeout=SERVER_WORK_MS)
    assert [job["run"] for job in _jobs(server)][:1] == ["answer-lost"]
    with page.expect_request(f"**/api/v1/projects/{PROJECT}/launch") as again:
        page.get_by_role("button", name="Submit").click()
    assert again.value.headers["idempotency-key"] == lost[0]
    expect(page).to_have_url(
        f"{server.base}/projects/{PROJECT}/runs/answer-lost", timeout=SERVER_WORK_MS
    )
    assert len(_jobs(server)) == before + 1


def test_rerun_is_prefilled_shows_its_changes_and_records_its_parent(
    browser: Browser, server: MembersServer, browsers: list[BrowserContext]
) -> None:
    page = open_as(browser, server, browsers, EDITOR)
    _form(page)
    page.locator('input[name="lr"]').fill("0.002")
    page.get_by_label("config").fill('{"model": {"layers": 2}}')
    page.get_by_label("new run ID").fill("original")
    _submit(page, server)

    page.get_by_role("link", name="Re-run").click()
    expect(page).to_have_url(f"{server.base}/projects/{PROJECT}/launch/recipes/tiny?from=original")
    expect(page.locator("h1")).to_have_text("Re-run original")
    expect(page.locator('select[name="mode"]')).to_have_value('"ok"')
    expect(page.locator('input[name="lr"]')).to_have_value("0.002")
    expect(page.locator('input[name="batch"]')).to_have_value("8")  # the run's, defaults included
    assert '"layers": 2' in page.get_by_label("config").input_value()
    changes = page.locator(".rerun-changes")
    expect(changes).to_contain_text("None yet")
    _check(page)
    expect(page.locator(".report")).to_have_attribute("data-ready", "true")
    page.locator('input[name="lr"]').fill("0.01")
    expect(page.locator(".report")).to_have_count(0)
    page.get_by_label("config").fill('{"model": {"layers": 4}}')
    expect(changes.locator("li")).to_have_text(
        ["parameters.lr: 0.002 → 0.01", "config.model.layers: 2 → 4"]
    )
    child = _submit(page, server)
    parent = page.locator(".launch-panel .parent-link a")
    expect(parent).to_have_text("original")
    record = server.api("GET", f"/projects/{PROJECT}/runs/{child}").json()["config"]
    assert record[CHECK_RECORD_KEY]["parent"] == "original"
    assert (record["parameters"]["lr"], record["config"]) == (0.01, {"model": {"layers": 4}})
    parent.click()
    expect(page).to_have_url(f"{server.base}/projects/{PROJECT}/runs/original")
    # The project's launch page lists its jobs, newest first, each linked to its run.
    page.goto(f"/projects/{PROJECT}/launch")
    jobs = page.locator("table.launched-jobs tbody tr")
    expect(jobs.first.get_by_role("link")).to_have_text(child)
    expect(jobs.filter(has_text="original").locator(".job-state")).to_have_text("succeeded")


def test_a_diagnosis_offers_the_rerun_form(
    browser: Browser, server: MembersServer, browsers: list[BrowserContext]
) -> None:
    page = open_as(browser, server, browsers, OWNER)
    _form(page, "oom")
    run = _submit(page, server)
    expect(page.locator(".launch-panel .job-state")).to_have_text("failed", timeout=60_000)
    oom = page.locator('.diagnosis .finding[data-code="cuda_oom"]')
    rerun = oom.locator(".finding-next").get_by_role("link", name="Re-run with changes…")
    expect(rerun).to_be_visible(timeout=30_000)
    rerun.click()
    expect(page).to_have_url(f"{server.base}/projects/{PROJECT}/launch/recipes/oom?from={run}")
    page.locator('input[name="batch"]').fill("4")
    expect(page.locator(".rerun-changes li")).to_have_text(["parameters.batch: 8 → 4"])
    child = _submit(page, server)
    expect(page.locator(".launch-panel .parent-link a")).to_have_text(run)
    config = server.api("GET", f"/projects/{PROJECT}/runs/{child}").json()["config"]
    assert config[CHECK_RECORD_KEY]["parent"] == run
