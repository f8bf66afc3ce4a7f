"""A project's access page in a real browser against a real server: an owner makes a project
private and adds a viewer, who sees the project but no way to manage it; a share link made
on a run page opens the run until the owner revokes it; an editor manages share links only;
the server's refusals (the last owner, an unknown login) are shown as its text."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, Response, expect

from tests.dashboard.members import (
    EDITOR,
    OWNER,
    VIEWER,
    MembersServer,
    close_all,
    open_as,
    serve_with_members,
)


class Server(MembersServer):
    def project(self, name: str, visibility: str, runs: tuple[str, ...] = ("r1",)) -> None:
        """A project of ``runs`` with OWNER as its owner (made with the admin key)."""
        for run in runs:
            assert self.api("POST", f"/projects/{name}/runs", {"run": run}).status_code == 201
        assert self.api("PATCH", f"/projects/{name}/access", {"visibility": visibility}).is_success
        owner = self.api("PUT", f"/projects/{name}/members/{OWNER}", {"role": "owner"})
        assert owner.is_success, owner.text


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    env = {"TUNEPLANE_DEFAULT_VISIBILITY": "public"}
    for base, key in serve_with_members(tmp_path_factory, "project-access", env):
        yield Server(base, key)


@pytest.fixture
def browsers(browser: Browser, server: Server) -> Iterator[list[BrowserContext]]:
    """The contexts a test opens; closed after it, which then fails on any script error."""
    opened: list[BrowserContext] = []
    yield opened
    close_all(opened, server)


def _status(answer: Response | None) -> int:
    assert answer is not None
    return answer.status


def test_an_owner_makes_a_project_private_and_adds_a_viewer_who_cannot_manage_it(
    browser: Browser, server: Server, browsers: list[BrowserContext]
) -> None:
    server.project("lab", "public")
    owner = open_as(browser, server, browsers, OWNER)
    owner.goto("/projects/lab")
    owner.get_by_role("link", name="Access").click()
    expect(owner).to_have_url(f"{server.base}/projects/lab/access")

    public = owner.get_by_label("public", exact=True)
    expect(public).to_be_checked()
    public.uncheck()
    expect(owner.locator(".access-state")).to_contain_text("Private")
    assert server.api("GET", "/projects/lab/access").json()["visibility"] == "private"
    # Making it public again asks first; cancelled, nothing changes.
    public.click()
    confirm = owner.locator(".confirm")
    expect(confirm).to_contain_text("Anyone who can reach this server will read its runs")
    confirm.get_by_role("button", name="Cancel").click()
    expect(public).not_to_be_checked()
    assert server.api("GET", "/projects/lab/access").json()["visibility"] == "private"

    members = owner.locator(".members")
    members.get_by_label("login").fill("nobody")
    members.get_by_role("button", name="Add member").click()
    expect(members.locator(".form-error")).to_have_text("login: no account named 'nobody'")
    members.get_by_label("login").fill(VIEWER)
    members.get_by_role("button", name="Add member").click()
    expect(members.locator(f'tr[data-login="{VIEWER}"]')).to_be_visible()
    expect(members.get_by_label(f"role of {VIEWER}")).to_have_value("viewer")
    expect(members.locator(".form-error")).to_be_hidden()
    members.get_by_label(f"content permission of {VIEWER}").check()
    owner.get_by_label("public logs").check()
    expect(members.get_by_label(f"content permission of {VIEWER}")).to_be_checked()
    listed = {m["login"]: m for m in server.api("GET", "/projects/lab/members").json()}
    assert listed[VIEWER] == {"login": VIEWER, "role": "viewer", "content": True}
    assert server.api("GET", "/projects/lab/access").json()["public_logs"] is True

    viewer = open_as(browser, server, browsers, VIEWER)
    viewer.goto("/projects/lab")
    expect(viewer.locator("table.runs tbody tr")).to_have_count(1)
    expect(viewer.get_by_role("link", name="Access")).to_have_count(0)
    assert _status(viewer.goto("/projects/lab/access")) == 403
    expect(viewer.locator("main")).to_contain_text("Only the project's owners and editors")
    expect(viewer.locator(".members, .shares")).to_have_count(0)
    viewer.goto("/projects/lab/runs/r1")
    expect(viewer.locator("h1")).to_have_text("r1")
    expect(viewer.get_by_role("button", name="Share")).to_have_count(0)

    # Outsiders are told nothing exists.
    stranger = open_as(browser, server, browsers, None)
    assert _status(stranger.goto("/projects/lab/access")) == 404
    expect(stranger.locator("main")).to_contain_text("No project named")


def test_a_share_link_opens_its_run_until_the_owner_revokes_it(
    browser: Browser, server: Server, browsers: list[BrowserContext]
) -> None:
    server.project("vault", "private", runs=("r1", "r2"))
    assert server.api("PUT", f"/projects/vault/members/{EDITOR}", {"role": "editor"}).is_success
    owner = open_as(browser, server, browsers, OWNER)
    owner.goto("/projects/vault/runs/r1")
    owner.get_by_role("button", name="Share").click()
    owner.get_by_label("expires in days").fill("2")
    owner.get_by_role("button", name="Create share link").click()
    url = owner.get_by_label("share link").input_value()
    assert re.fullmatch(re.escape(server.base) + r"/shared#tpl_\S+", url), url
    expect(owner.locator(".share-shown")).to_contain_text("shown once")

    stranger = open_as(browser, server, browsers, None)
    stranger.goto(url)
    expect(stranger).to_have_url(f"{server.base}/projects/vault/runs/r1")
    expect(stranger.locator("h1")).to_have_text("r1")

    # An editor manages share links, and sees no visibility or members.
    editor = open_as(browser, server, browsers, EDITOR)
    assert _status(editor.goto("/projects/vault/access")) == 200
    expect(editor.locator(".notice")).to_contain_text("Only owners change")
    expect(editor.locator(".members, .visibility")).to_have_count(0)
    row = editor.locator('.shares tr[data-run="r1"]')
    expect(row).to_contain_text(OWNER)
    expect(row.locator(".link-state")).to_have_text("active")

    owner.goto("/projects/vault/access")
    row = owner.locator('.shares tr[data-run="r1"]')
    row.get_by_role("button", name=re.compile("revoke")).click()
    expect(row.locator(".link-state")).to_have_text("revoked")
    expect(row.get_by_role("button")).to_have_count(0)

    # The open page's cookie opens nothing now, and neither does the link.
    assert _status(stranger.reload()) == 404
    stranger.goto(url)
    expect(stranger.locator(".empty-title")).to_have_text("This share link does not open anything.")


def test_the_last_owner_cannot_be_demoted_and_the_page_says_why(
    browser: Browser, server: Server, browsers: list[BrowserContext]
) -> None:
    server.project("solo", "private")
    owner = open_as(browser, server, browsers, OWNER)
    owner.goto("/projects/solo/access")
    members = owner.locator(".members")
    members.get_by_label(f"role of {OWNER}").select_option("viewer")
    error = members.locator(".form-error")
    expect(error).to_have_text("role: a project keeps at least one owner; add another owner first")
    expect(members.get_by_label(f"role of {OWNER}")).to_have_value("owner")  # as stored
    members.get_by_role("button", name=f"remove {OWNER}").click()
    expect(error).to_contain_text("a project keeps at least one owner")
    assert server.api("GET", "/projects/solo/members").json() == [
        {"login": OWNER, "role": "owner", "content": False}
    ]
    # Going public, confirmed (the box stays unticked until then).
    owner.get_by_label("public", exact=True).click()
    owner.locator(".confirm").get_by_role("button", name="Make public").click()
    expect(owner.locator(".access-state")).to_contain_text("Public")
    expect(owner.get_by_label("public", exact=True)).to_be_checked()
    assert server.api("GET", "/projects/solo/access").json()["visibility"] == "public"
