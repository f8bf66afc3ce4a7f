"""Reading a long transcript in a real browser against a real server: Markdown and code
rendered as safe nodes (hostile HTML stays text, links only to http(s)), long texts
collapsed with their size said, a server-side search highlighted and visited across
pages, a jump to the first failing tool call, and each message's time and model with the
trajectory's totals in its header. On SQLite only: what is tested here is the page and
the body, which both engines store alike (tests/server/test_trajectory_search.py runs the
routes on both)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.dashboard.members import OWNER, PASSWORD, open_as
from tests.dashboard.seed_eval import XSS, new_attempt, population, post_observations, trial
from tests.dashboard.seed_trajectories import evaluation, post_trajectories
from tests.serving import running_server
from tuneplane.server import admin
from tuneplane.server.settings import Settings

PROJECT = "readers"
DASH = "\N{EN DASH}"
MARKDOWN = f"""# Task

Fix **the bug** in `parse()` and _say why_:

- one
- two

```python
print("<b>not bold</b>")
```

See [the docs](https://example.com/docs) and [this](javascript:alert(1)).

{XSS}"""
LONG_OUTPUT = "\n".join(f"line {n}" + (" needle" if n == 150 else "") for n in range(200))
TRACEBACK = 'Traceback (most recent call last):\n  File "t.py", line 1\nValueError: no'
METRICS = {"input": 1114893, "output": 14550, "cached": 1109340, "cost_usd": 0.42}


def stamp(second: int) -> str:
    return f"2025-11-19T22:{54 + second // 60:02d}:{second % 60:02d}.000Z"


def transcript() -> list[dict[str, Any]]:
    """60 messages: Markdown first, then a model's turns (odd indexes, stamped) and tool
    outputs; "needle" deep in a long output (index 4) and in 5, 39 and 40; the first
    failing tool result at index 34."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": MARKDOWN, "timestamp": stamp(0)}]
    for k in range(1, 60):
        if k % 2 == 1:
            messages.append(
                {
                    "role": "assistant",
                    "content": "Look for the Needle." if k in (5, 39) else f"step {k}",
                    "model": "claude-haiku-4-5" if k < 30 else "claude-sonnet-4-5",
                    "timestamp": stamp(2 * k + 9),
                    "tokens": {"input": 100, "output": 10},
                    "tool_calls": [{"id": f"c{k}", "name": "bash", "arguments": {"cmd": "ls"}}],
                }
            )
            continue
        output = {4: LONG_OUTPUT, 34: TRACEBACK, 40: "a Needle in the output"}.get(k, f"ok {k}")
        messages.append(
            {"role": "tool", "tool_call_id": f"c{k - 1}", "tool_name": "bash", "content": output}
        )
    return messages


@dataclass
class Reader:
    base: str
    errors: list[str] = field(default_factory=list)
    contexts: list[BrowserContext] = field(default_factory=list)


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reader]:
    data = tmp_path_factory.mktemp("transcript")
    admin.add_user(Settings.from_env({}, data_dir=str(data)), OWNER, PASSWORD, admin=False)
    with running_server("--data-dir", str(data)) as base:
        key = {"Authorization": f"Bearer {(data / 'admin.key').read_text().strip()}"}
        made = httpx.post(f"{base}/api/v1/projects/{PROJECT}/runs", json={"run": "r"}, headers=key)
        assert made.status_code == 201, made.text
        member = httpx.put(
            f"{base}/api/v1/projects/{PROJECT}/members/{OWNER}",
            json={"role": "owner", "content": True},
            headers=key,
        )
        assert member.is_success, member.text
        token = new_attempt(base, key["Authorization"].split()[1], "r", PROJECT)
        post_observations(base, token, [population("val", 1), trial("val", "long", "failure")])
        document = evaluation("val", "long", 0, transcript(), metrics=METRICS)
        post_trajectories(base, token, [document])
        yield Reader(base)


@pytest.fixture
def page(browser: Browser, reader: Reader) -> Iterator[Page]:
    opened = open_as(
        browser, reader, reader.contexts, OWNER, viewport={"width": 1400, "height": 900}
    )
    dialogs: list[str] = []
    opened.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    opened.goto(
        f"/projects/{PROJECT}/runs/r/trajectory?attempt=1&round_id=val&trial_id=long&trial_attempt=0"
    )
    expect(opened.locator(".message")).to_have_count(25)
    yield opened
    for context in reader.contexts:
        context.close()
    reader.contexts.clear()
    errors, reader.errors[:] = list(reader.errors), []
    assert errors == []
    assert dialogs == []  # nothing the producer wrote ever ran


def test_markdown_and_code_become_safe_nodes(page: Page) -> None:
    first = page.locator('.message[data-index="0"] .markdown')
    expect(first.locator("h3")).to_have_text("Task")
    expect(first.locator("strong")).to_have_text("the bug")
    expect(first.locator("em")).to_have_text("say why")
    expect(first.locator("code.md-code-inline")).to_have_text("parse()")
    expect(first.locator("ul > li")).to_have_text(["one", "two"])
    code = first.locator("pre.md-code code")
    expect(code).to_have_text('print("<b>not bold</b>")')
    assert code.get_attribute("data-lang") == "python"
    expect(first.locator("b")).to_have_count(0)
    link = first.locator("a")
    expect(link).to_have_count(1)  # javascript: stays the text it was written as
    assert link.get_attribute("href") == "https://example.com/docs"
    assert "noopener" in (link.get_attribute("rel") or "")
    expect(first).to_contain_text("[this](javascript:alert(1))")
    expect(first).to_contain_text(XSS)
    assert page.locator(".trajectory img, .trajectory script").count() == 0
    # A tool's output is shown as written, not read as Markdown.
    expect(page.locator('.message[data-index="2"] pre.tool-result')).to_have_text("ok 2")


def test_a_long_tool_output_is_collapsed_with_its_size_said(page: Page) -> None:
    wrap = page.locator('.message[data-index="4"] .collapsible')
    toggle = wrap.locator(".collapse-toggle")
    size = f"{len(LONG_OUTPUT):,} characters, 200 lines"
    expect(toggle).to_have_text(f"Show all of the tool output ({size})")
    expect(wrap).to_have_class(re.compile("collapsed"))
    collapsed = wrap.bounding_box()
    assert collapsed is not None
    assert collapsed["height"] < 400
    toggle.click()
    expect(toggle).to_have_text(f"Collapse the tool output ({size})")
    assert toggle.get_attribute("aria-expanded") == "true"
    opened = wrap.bounding_box()
    assert opened is not None
    assert opened["height"] > 2000
    toggle.click()
    expect(wrap).to_have_class(re.compile("collapsed"))
    # Short texts are never collapsed.
    expect(page.locator('.message[data-index="2"] .collapsible')).to_have_count(0)


def test_search_highlights_matches_and_goes_through_them_across_pages(page: Page) -> None:
    searches: list[str] = []
    page.on("request", lambda r: searches.append(r.url) if "/search?" in r.url else None)
    box = page.get_by_role("searchbox", name="search this trajectory")
    box.fill("needle")
    box.press("Enter")
    status = page.locator(".find-status")
    expect(status).to_have_text(re.compile(r"^message 1 of 4 with “needle” \(#5;"))
    assert any("q=needle" in url for url in searches)
    # The first match is deep in a collapsed output: it is opened, marked and current.
    current = page.locator(".message.current")
    expect(current).to_have_attribute("data-index", "4")
    expect(current.locator(".collapsible")).not_to_have_class(re.compile("collapsed"))
    expect(current.locator("mark.search-hit")).to_have_text(["needle"])
    expect(page.locator(".message.search-match")).to_have_count(2)  # on this page
    expect(page.locator('.message[data-index="5"] mark.search-hit')).to_have_text(["Needle"])
    page.get_by_role("button", name="↓ next").click()
    expect(current).to_have_attribute("data-index", "5")
    page.get_by_role("button", name="↓ next").click()
    # The next match is on the next page, which the reader loads.
    expect(current).to_have_attribute("data-index", "39")
    expect(page.locator(".page-where")).to_have_text(f"messages 26{DASH}50 of 60 kept")
    expect(page).to_have_url(re.compile(r"offset=25"))
    expect(page).to_have_url(re.compile(r"q=needle"))
    page.get_by_role("button", name="↓ next").click()
    expect(current).to_have_attribute("data-index", "40")
    expect(current.locator("mark.search-hit")).to_have_text(["Needle"])
    # The marks are text: the message reads as before.
    expect(current.locator(".message-text")).to_have_text("a Needle in the output")
    page.get_by_role("button", name="↑ previous").click()
    page.get_by_role("button", name="↑ previous").click()
    expect(current).to_have_attribute("data-index", "5")
    expect(page.locator(".page-where")).to_have_text(f"messages 1{DASH}25 of 60 kept")
    # The search is in the address: a reload finds it again.
    page.reload()
    expect(page.locator(".find-status")).to_have_text(re.compile(r"^message 1 of 4 with"))
    box.fill("nothing like it")
    box.press("Enter")
    expect(status).to_have_text("no message holds “nothing like it”")
    expect(page.locator("mark.search-hit")).to_have_count(0)


def test_a_jump_goes_to_the_first_failing_tool_call(page: Page) -> None:
    jump = page.get_by_role("button", name="Jump to the first failing tool call (#35)")
    expect(page.locator(".jump-failed-why")).to_have_text("its text holds a Python traceback")
    jump.click()
    current = page.locator(".message.current")
    expect(current).to_have_attribute("data-index", "34")
    expect(current).to_have_class(re.compile("first-failed-tool-call"))
    expect(current.locator(".tool-result")).to_contain_text("ValueError: no")
    expect(page.locator(".page-where")).to_have_text(f"messages 26{DASH}50 of 60 kept")


def test_each_message_has_its_time_and_model_and_the_header_its_totals(page: Page) -> None:
    totals = page.locator(".trajectory-totals")
    expect(totals.locator(".total-tokens .total-value")).to_have_text(
        "1,114,893 input, 14,550 output, 1,109,340 cached"
    )
    expect(totals.locator(".total-tokens")).to_contain_text("the producer's totals")
    expect(totals.locator(".total-cost .total-value")).to_have_text("$0.42")
    expect(totals.locator(".total-time .total-value")).to_have_text("2m 07s")
    expect(totals.locator(".total-time")).to_contain_text("31 messages stamped")
    second = page.locator('.message[data-index="1"]')
    expect(second.locator(".message-model")).to_have_text("claude-haiku-4-5")
    assert second.locator("time").get_attribute("datetime") == stamp(11)
    expect(second.locator("time")).to_contain_text("(+11s)")
    expect(page.locator('.message[data-index="2"] .message-model')).to_have_count(0)
    # Nothing was cut: no truncation is said.
    expect(page.locator(".text-state.truncated")).to_have_count(0)
