"""Who sees what, in a real browser against a real server with no account yet: the first
administrator's one-time link, a private project seen signed in and hidden signed out, a
share link that opens one run, and personal API keys made on the account page."""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx
from playwright.sync_api import Browser, Page, expect

from tests.dashboard.seed import post_scalars
from tests.serving import running_server

LOGIN, PASSWORD = "ada", "correct horse battery"


def _welcome_link(log: Path) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = re.search(r"(http://\S+/welcome#\S+)", log.read_text())
        if found:
            return found.group(1)
        time.sleep(0.1)
    raise AssertionError(f"no first-administrator link in the server's output:\n{log.read_text()}")


def _private_run(base: str, admin_key: str) -> None:
    """A private project's run with a point, made with the admin key."""
    key = {"Authorization": f"Bearer {admin_key}"}
    runs = f"{base}/api/v1/projects/private-lab/runs"
    assert httpx.post(runs, json={"run": "r1"}, headers=key).status_code == 201
    token = httpx.post(f"{runs}/r1/attempts", json={}, headers=key).json()["token"]
    post_scalars(base, token, {"series": [{"name": "loss", "steps": [1, 2], "values": [0.9, 0.5]}]})


def _sign_out(page: Page) -> None:
    page.goto("/account")
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(r"/$"))


def test_a_private_project_signed_in_signed_out_and_shared(
    browser: Browser, tmp_path: Path
) -> None:
    log = tmp_path / "server.log"
    data = tmp_path / "data"
    with running_server("--data-dir", str(data), output=log) as base:
        link = _welcome_link(log)
        admin_key = (data / "admin.key").read_text().strip()
        _private_run(base, admin_key)
        context = browser.new_context(base_url=base)
        page = context.new_page()

        # The one-time link: create the first administrator, signed in at once.
        page.goto(link)
        expect(page).to_have_url(f"{base}/welcome")  # the token left the address bar
        page.get_by_label("Login").fill(LOGIN)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Create and sign in").click()
        expect(page.locator(".top-links .session")).to_have_text(LOGIN)
        expect(page.locator("main")).to_contain_text("private-lab")
        page.goto("/projects/private-lab/runs/r1")
        expect(page.locator("h1")).to_have_text("r1")

        # The link is spent: a second use creates nothing.
        page.goto(link)
        expect(page.locator(".empty-title")).to_have_text("This link has been used.")

        # Signed out: the project is gone from the list and its pages answer 404.
        _sign_out(page)
        expect(page.locator(".top-links .session")).to_have_text("sign in")
        expect(page.locator("main")).not_to_contain_text("private-lab")
        answer = page.goto("/projects/private-lab/runs/r1")
        assert answer is not None
        assert answer.status == 404
        expect(page.locator("main")).to_contain_text("No run named")
        expect(page.locator("main")).to_contain_text("A private project shows only to its members")
        page.goto("/projects/private-lab")
        expect(page.locator(".empty a", has_text="sign in")).to_have_attribute(
            "href", "/sign-in?next=%2Fprojects%2Fprivate-lab"
        )

        # Signing in again (the form, with a wrong password first) brings it back.
        page.goto("/sign-in?next=/projects/private-lab/runs/r1")
        page.get_by_label("Login").fill(LOGIN)
        page.get_by_label("Password").fill("not the password")
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator(".form-error")).to_contain_text("wrong login or password")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        expect(page).to_have_url(f"{base}/projects/private-lab/runs/r1")
        expect(page.locator("h1")).to_have_text("r1")

        # A personal key, shown once, that the API takes as the admin key's equal.
        page.goto("/account")
        page.get_by_label("Name").fill("laptop")
        page.get_by_role("button", name="Create key").click()
        key = page.locator(".key-value").inner_text()
        assert key.startswith("tpk_")
        expect(page.locator("table.keys tbody tr")).to_have_count(1)
        # The form's default is the key training code needs: read and write.
        expect(page.locator("table.keys tbody")).to_contain_text("read and write")
        listed = httpx.get(f"{base}/api/v1/projects", headers={"Authorization": f"Bearer {key}"})
        assert [p["project"] for p in listed.json()] == ["private-lab"]
        page.get_by_role("button", name="revoke").click()
        expect(page.locator("table.keys tbody")).to_contain_text("revoked")
        refused = httpx.get(f"{base}/api/v1/projects", headers={"Authorization": f"Bearer {key}"})
        assert refused.status_code == 401

        # A share link opens the run, read-only, to someone who never signed in.
        share = httpx.post(
            f"{base}/api/v1/projects/private-lab/runs/r1/shares",
            json={"expires_in_days": 1},
            headers={"Authorization": f"Bearer {admin_key}"},
        ).json()
        stranger = browser.new_context(base_url=base).new_page()
        stranger.goto(share["url"])
        expect(stranger).to_have_url(f"{base}/projects/private-lab/runs/r1")
        expect(stranger.locator("h1")).to_have_text("r1")
        expect(stranger.locator(".top-links .session")).to_have_text("sign in")
        stranger.get_by_role("tab", name="Logs").click()
        expect(stranger.locator(".log-empty")).to_contain_text("members only")
        # Nothing else of the project: its run list is hidden.
        other = httpx.get(f"{base}/api/v1/projects/private-lab/runs")
        assert other.status_code == 404
        context.close()
        stranger.context.close()
