"""Managing runs in a real browser against a real server: the runs table searched, sorted
and with chosen columns by the server (all of it in the address); an editor renames, tags,
groups and annotates a run (the note shown as text, the ID and links unchanged) and sees
an attempt's own config beside the run's; an owner deletes a run and a project after
typing its name; a viewer is offered none of it."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, expect

from tests.dashboard.members import EDITOR, OWNER, VIEWER, open_as, serve_with_members
from tests.dashboard.test_project_access import Server
from tests.dashboard.test_project_access import browsers as browsers


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    for base, key in serve_with_members(tmp_path_factory, "run-management", {}):
        yield Server(base, key)


def _seed(server: Server, project: str) -> None:
    """Three runs with configs and summary metrics; OWNER owns the project, EDITOR edits
    it, VIEWER reads it."""
    runs = [("r1", 3e-5, [0.2, 0.9]), ("r2", 1e-3, [0.5, 0.4]), ("r3", 1e-4, [0.7])]
    for name, lr, rewards in runs:
        body = {
            "run": name,
            "config": {"lr": lr, "model": "qwen"},
            "tags": ["base"] if name != "r2" else [],
        }
        assert server.api("POST", f"/projects/{project}/runs", body).status_code == 201
        config = {"lr": lr, "resumed_from": "ckpt-1"} if name == "r1" else None
        token = server.api("POST", f"/projects/{project}/runs/{name}/attempts",
                           {"config": config} if config else None).json()["token"]  # fmt: skip
        series = {
            "series": [{"name": "reward", "steps": list(range(len(rewards))), "values": rewards}]
        }
        sent = httpx.post(f"{server.base}/api/v1/ingest/scalars", json=series,
                          headers={"Authorization": f"Bearer {token}"})  # fmt: skip
        assert sent.status_code == 200, sent.text
    for login, role in ((OWNER, "owner"), (EDITOR, "editor"), (VIEWER, "viewer")):
        member = server.api("PUT", f"/projects/{project}/members/{login}", {"role": role})
        assert member.is_success, member.text


def test_the_runs_table_is_searched_sorted_and_given_columns_by_the_server(
    browser: Browser,
    server: Server,
    browsers: list[BrowserContext],
) -> None:
    _seed(server, "search")
    page = open_as(browser, server, browsers, VIEWER)
    page.goto("/projects/search")
    rows = page.locator("table.runs tbody tr")
    expect(rows).to_have_count(3)
    page.get_by_label("filter runs").fill("config.lr < 5e-4 and reward.last > 0.6")
    expect(rows).to_have_count(2)
    page.get_by_label("columns").fill("config.lr, reward.last")
    page.get_by_label("columns").press("Enter")
    expect(page.locator("table.runs thead")).to_contain_text("reward.last")
    sort = page.locator('button.sort[data-sort="reward.last"]')
    header = page.locator("table.runs thead th").filter(has=sort)
    sort.click()
    # r3 is first before the sort too (the newest): wait for the sorted table itself.
    expect(header).to_have_attribute("aria-sort", "ascending")
    expect(rows.first).to_have_attribute("data-run", "r3")
    sort.click()  # descending
    expect(header).to_have_attribute("aria-sort", "descending")
    expect(rows.first).to_have_attribute("data-run", "r1")
    expect(rows.first.locator("td").nth(6)).to_have_text("3.00e-5")  # config.lr
    query = parse_qs(urlsplit(page.url).query)
    assert query == {
        "q": ["config.lr < 5e-4 and reward.last > 0.6"],
        "sort": ["-reward.last"],
        "columns": ["config.lr,reward.last"],
    }
    # The address alone brings all of it back.
    page.goto(page.url)
    expect(rows).to_have_count(2)
    expect(rows.first).to_have_attribute("data-run", "r1")
    # A query the server does not understand says which part.
    page.get_by_label("filter runs").fill("loss.median < 3")
    expect(page.locator(".query-error")).to_contain_text("loss.median")
    # Viewers are offered no deletion.
    expect(page.locator(".delete-project")).to_have_count(0)


def test_an_editor_edits_a_run_and_an_owner_deletes_runs_and_the_project(
    browser: Browser,
    server: Server,
    browsers: list[BrowserContext],
) -> None:
    _seed(server, "manage")
    editor = open_as(browser, server, browsers, EDITOR)
    editor.goto("/projects/manage/runs/r1")
    expect(editor.locator(".attempt-config")).to_contain_text("resumed_from")
    expect(editor.locator(".delete-button")).to_have_count(0)  # editors do not delete
    editor.locator(".edit-button").click()
    form = editor.locator("form.edit-run")
    form.locator('[name="display_name"]').fill("baseline, seed 1")
    form.locator('[name="group"]').fill("sweep-3")
    form.locator('[name="tags"]').fill("base, keep")
    form.locator('[name="note"]').fill("<img src=x onerror=alert(1)>\nlr looks high")
    form.get_by_role("button", name="Save").click()
    expect(editor.locator("h1")).to_have_text("baseline, seed 1")
    expect(editor.locator(".run-meta .tag")).to_have_text(["base", "keep"])
    expect(editor.locator(".run-meta .note")).to_have_text(
        "<img src=x onerror=alert(1)>\nlr looks high"
    )
    expect(editor.locator(".run-meta img")).to_have_count(0)
    expect(editor).to_have_url(f"{server.base}/projects/manage/runs/r1")  # the ID stays
    stored = server.api("GET", "/projects/manage/runs/r1").json()
    assert (stored["display_name"], stored["group"], stored["tags"]) == (
        "baseline, seed 1", "sweep-3", ["base", "keep"],
    )  # fmt: skip
    editor.goto("/projects/manage")
    expect(editor.locator('tr[data-run="r1"] .run-link')).to_have_text("baseline, seed 1")
    expect(editor.locator('tr[data-run="r1"] .group-cell')).to_contain_text("sweep-3")

    owner = open_as(browser, server, browsers, OWNER)
    owner.goto("/projects/manage/runs/r2")
    owner.locator(".delete-button").click()
    confirm = owner.locator(".delete-confirm")
    delete = confirm.get_by_role("button", name="Delete")
    expect(delete).to_be_disabled()
    confirm.locator("input").fill("r")
    expect(delete).to_be_disabled()
    confirm.locator("input").fill("r2")
    delete.click()
    expect(owner).to_have_url(f"{server.base}/projects/manage")
    expect(owner.locator("table.runs tbody tr")).to_have_count(2)
    assert server.api("GET", "/projects/manage/runs/r2").status_code == 404

    owner.locator(".delete-project").click()
    owner.locator(".delete-confirm input").fill("manage")
    owner.locator(".delete-confirm").get_by_role("button", name="Delete").click()
    expect(owner).to_have_url(f"{server.base}/")
    assert server.api("GET", "/projects/manage/runs").status_code == 404
