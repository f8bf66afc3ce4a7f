"""A real server with three local accounts, and browsers signed in as one of them, for the
pages whose controls depend on the caller's role (access, alert rules)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page

from tests.serving import running_server
from tuneplane.server import admin
from tuneplane.server.settings import Settings

PASSWORD = "correct horse battery"
OWNER, EDITOR, VIEWER = "olga", "eddie", "vic"


@dataclass
class MembersServer:
    base: str
    admin_key: str
    #: script errors of every page opened through :func:`open_as`
    errors: list[str] = field(default_factory=list)

    def api(self, method: str, path: str, body: object = None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.admin_key}"}
        return httpx.request(method, f"{self.base}/api/v1{path}", json=body, headers=headers)


def serve_with_members(
    tmp_path_factory: pytest.TempPathFactory, name: str, env: dict[str, str]
) -> Iterator[tuple[str, str]]:
    """A real server whose data directory holds OWNER, EDITOR and VIEWER (no project
    roles yet): its base URL and the admin key."""
    data = tmp_path_factory.mktemp(name)
    settings = Settings.from_env({}, data_dir=str(data))
    for login in (OWNER, EDITOR, VIEWER):
        admin.add_user(settings, login, PASSWORD, admin=False)
    with running_server("--data-dir", str(data), env=env) as base:
        yield base, (data / "admin.key").read_text().strip()


class Watched(Protocol):
    """A test server whose pages' script errors are collected in ``errors``."""

    base: str
    errors: list[str]


def close_all(opened: list[BrowserContext], server: MembersServer) -> None:
    """Close the contexts a test opened; then fail on any script error they saw."""
    for context in opened:
        context.close()
    errors = list(server.errors)
    server.errors.clear()
    assert errors == []


def open_as(
    browser: Browser,
    server: Watched,
    opened: list[BrowserContext],
    login: str | None,
    **context_options: Any,
) -> Page:
    """A browser of its own, signed in as ``login`` (or nobody), whose script errors and
    console errors go to ``server.errors``. Refusals the pages expect (403, 404, 409, 422)
    are logged by Chromium as failed loads: not faults."""
    context = browser.new_context(base_url=server.base, **context_options)
    context.set_default_timeout(10_000)
    opened.append(context)
    if login is not None:
        answer = context.request.post(
            "/api/v1/session", data={"login": login, "password": PASSWORD}
        )
        assert answer.ok, answer.text()
    page = context.new_page()
    page.on("pageerror", lambda error: server.errors.append(str(error)))
    page.on(
        "console",
        lambda m: (
            server.errors.append(m.text)
            if m.type == "error" and "Failed to load resource" not in m.text
            else None
        ),
    )
    return page
