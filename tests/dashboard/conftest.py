"""The dashboard in a real browser: Debian's Chromium driven by Playwright against a real
``tuneplane serve`` process on SQLite, seeded through the public API."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Dialog, Page, sync_playwright

from tests.dashboard.seed import ENV, Seeded, seed
from tests.serving import running_server

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


# Package scope: Playwright's sync API keeps an event loop running in the main thread while
# it is open, which would break later tests that start their own with asyncio.run().
@pytest.fixture(scope="package")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeded]:
    data_dir = tmp_path_factory.mktemp("dashboard")
    with running_server("--data-dir", str(data_dir), env=ENV) as base:
        yield seed(base, data_dir)


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (scripts/test does it)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@dataclass
class Watched:
    """What the page did that a test must see: script errors and dialogs."""

    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)


@pytest.fixture
def watched() -> Watched:
    return Watched()


@pytest.fixture
def page(browser: Browser, seeded: Seeded, watched: Watched) -> Iterator[Page]:
    """A fresh browser context per test, at the seeded server; fails on any script error."""
    context = browser.new_context(
        base_url=seeded.base, viewport={"width": 1400, "height": 1000}, accept_downloads=True
    )
    context.set_default_timeout(10_000)
    tab = context.new_page()
    tab.on("pageerror", lambda error: watched.errors.append(str(error)))
    tab.on(
        "console",
        lambda message: watched.errors.append(message.text) if message.type == "error" else None,
    )

    def on_dialog(dialog: Dialog) -> None:
        watched.dialogs.append(dialog.message)
        dialog.dismiss()

    tab.on("dialog", on_dialog)
    yield tab
    context.close()
    assert watched.errors == [], watched.errors
    assert watched.dialogs == [], watched.dialogs
