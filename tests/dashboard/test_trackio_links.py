"""Trackio's dashboard addresses (what the Arena's submissions page links to) open the run,
or the comparison of the runs, they name."""

from __future__ import annotations

import httpx
from playwright.sync_api import Page, expect

from tests.dashboard.seed import PROJECT, Seeded
from tuneplane.contract.ids import id_for_name


def test_a_trackio_run_address_opens_the_run_page(page: Page) -> None:
    page.goto(f"/?project={PROJECT}&runs=grpo-qwen-7")
    expect(page).to_have_url(f"/projects/{PROJECT}/runs/grpo-qwen-7")
    expect(page.locator("h1")).to_contain_text("grpo-qwen-7")


def test_a_trackio_address_of_several_runs_opens_their_comparison(page: Page) -> None:
    page.goto(f"/?project={PROJECT}&run_ids=grpo-qwen-7,grpo-qwen-8")
    expect(page).to_have_url(f"/compare?project={PROJECT}&runs=grpo-qwen-7,grpo-qwen-8")
    expect(page.locator("main")).to_contain_text("grpo-qwen-8")


def test_a_trackio_project_address_opens_its_runs_and_the_plain_root_stays(page: Page) -> None:
    page.goto(f"/?selected_project={PROJECT}")
    expect(page).to_have_url(f"/projects/{PROJECT}")
    # The seeded runs are there (other tests of this package may have added more).
    for run in ("grpo-qwen-7", "grpo-qwen-8", "alert-only"):
        expect(page.locator("table.runs tbody")).to_contain_text(run)
    # The plain root is still the list of projects.
    page.goto("/")
    expect(page.get_by_role("heading", name="Projects")).to_be_visible()


def test_a_trackio_address_naming_a_run_as_people_name_runs_opens_it(seeded: Seeded) -> None:
    """Trackio names runs freely (``qwen2.5-sft lr=1e-5``); the address maps the name to the
    run's ID as the Trackio protocol did when the run was logged."""
    name = "grpo qwen-7 (seed 2)"
    answer = httpx.get(seeded.base + "/", params={"project": PROJECT, "runs": name})
    assert answer.status_code == 302
    assert answer.headers["location"] == f"/projects/{PROJECT}/runs/{id_for_name(name)}"
