"""A project's alert rules page in a real browser against a real server (docs/alerts.md): the
default rules of a new project are listed; an editor adds, changes, disables and deletes
rules through the page, and the server's 422 is shown beside the form with nothing stored;
a webhook's secret is shown once and its delivery log read; a viewer reads the rules with
no control to change them and no webhooks."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Locator, Page, expect

from tests.dashboard.members import (
    EDITOR,
    OWNER,
    VIEWER,
    MembersServer,
    close_all,
    open_as,
    serve_with_members,
)

XSS = "<img src=x onerror=alert(1)>"


class Server(MembersServer):
    def project(self, name: str) -> None:
        """A private project with run ``r1``: OLGA owns it, EDDIE edits, VIC views."""
        assert self.api("POST", f"/projects/{name}/runs", {"run": "r1"}).status_code == 201
        assert self.api("PATCH", f"/projects/{name}/access", {"visibility": "private"}).is_success
        for login, role in ((OWNER, "owner"), (EDITOR, "editor"), (VIEWER, "viewer")):
            answer = self.api("PUT", f"/projects/{name}/members/{login}", {"role": role})
            assert answer.is_success, answer.text

    def rules(self, project: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.api("GET", f"/projects/{project}/alert-rules").json()[
            "rules"
        ]
        return found

    def nan_loss(self, project: str) -> None:
        """A finite, then a NaN ``train/loss`` on ``r1``, sent with an attempt's ingest token."""
        made = self.api("POST", f"/projects/{project}/runs/r1/attempts", {})
        assert made.status_code == 201, made.text
        body = {
            "series": [{"name": "train/loss", "steps": [1], "values": [0.5]}],
            "invalid": [{"name": "train/loss", "steps": [2], "kinds": ["nan"]}],
        }
        auth = {"Authorization": f"Bearer {made.json()['token']}"}
        sent = httpx.post(f"{self.base}/api/v1/ingest/scalars", json=body, headers=auth)
        assert sent.status_code == 200, sent.text


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    env = {
        "TUNEPLANE_WEBHOOK_RETRY_SECONDS": "0.2",
        "TUNEPLANE_ALERT_CHECK_INTERVAL": "0.5",
        # The webhook below is on loopback, which outbound calls reach only when listed.
        "TUNEPLANE_OUTBOUND_ALLOW": "127.0.0.1",
    }
    for base, key in serve_with_members(tmp_path_factory, "alert-rules", env):
        yield Server(base, key)


@pytest.fixture
def browsers(browser: Browser, server: Server) -> Iterator[list[BrowserContext]]:
    """The contexts a test opens; closed after it, which then fails on any script error."""
    opened: list[BrowserContext] = []
    yield opened
    close_all(opened, server)


def _open(browser: Browser, server: Server, opened: list[BrowserContext], login: str) -> Page:
    """A browser of its own, signed in as ``login``; a dialog is a fault (the page confirms
    in place)."""
    page = open_as(browser, server, opened, login, viewport={"width": 1400, "height": 1000})
    page.on("dialog", lambda dialog: server.errors.append(f"dialog: {dialog.message}"))
    return page


def _row(page: Page, name: str) -> Locator:
    return page.locator("tr.rule").filter(
        has=page.locator(".rule-name", has_text=re.compile(f"^{re.escape(name)}$"))
    )


def test_the_default_rules_of_a_new_project_are_listed(
    browser: Browser, server: Server, browsers: list[BrowserContext]
) -> None:
    server.project("fresh")
    owner = _open(browser, server, browsers, OWNER)
    owner.goto("/projects/fresh")
    owner.get_by_role("link", name="Alerts", exact=True).click()
    expect(owner).to_have_url(f"{server.base}/projects/fresh/alerts")
    expect(owner.locator("h1")).to_have_text("Alerts of fresh")
    expect(owner.locator("tr.rule")).to_have_count(2)
    nan = _row(owner, "loss is NaN or infinite")
    expect(nan.locator(".rule-condition")).to_have_text("*loss* is NaN or infinite")
    expect(nan.locator(".level")).to_have_text("error")
    expect(nan.locator(".rule-run")).to_have_text("all runs")
    expect(nan.locator(".rule-enabled")).to_have_text("enabled")
    heartbeat = _row(owner, "heartbeat stale")
    expect(heartbeat.locator(".rule-condition")).to_have_text("no heartbeat for 30 s")
    expect(heartbeat.get_by_label("enabled: heartbeat stale")).to_be_checked()
    # Its episodes, read from GET …/alert-rules/<id>: none yet.
    heartbeat.get_by_role("button", name="episodes of heartbeat stale").click()
    expect(owner.locator("tr.rule-detail:visible")).to_contain_text("No episode yet.")


def _add(page: Page, kind: str, fields: dict[str, str]) -> None:
    form = page.locator("form.rule-add")
    form.get_by_label("kind").select_option(kind)
    for name, value in fields.items():
        control = form.get_by_label(name, exact=True)
        if control.evaluate("el => el.tagName") == "SELECT":
            control.select_option(value)
        else:
            control.fill(value)
    form.get_by_role("button", name="Add rule").click()


def test_an_editor_adds_and_changes_rules_and_a_refusal_stores_nothing(
    browser: Browser, server: Server, browsers: list[BrowserContext]
) -> None:
    server.project("grpo")
    editor = _open(browser, server, browsers, EDITOR)
    editor.goto("/projects/grpo/alerts")
    form = editor.locator("form.rule-add")
    # Only the chosen kind's fields are shown.
    form.get_by_label("kind").select_option("heartbeat")
    expect(form.get_by_label("seconds")).to_be_visible()
    expect(form.get_by_label("metric", exact=True)).to_be_hidden()
    expect(form.get_by_label("level")).to_have_value("error")
    form.get_by_label("kind").select_option("threshold")
    expect(form.get_by_label("metric", exact=True)).to_be_visible()
    expect(form.get_by_label("percent")).to_be_hidden()
    expect(form.get_by_label("level")).to_have_value("warn")

    _add(editor, "threshold", {"metric": "reward", "op": "below", "value": "0.1", "name": XSS})
    row = _row(editor, XSS)
    expect(row.locator(".rule-condition")).to_have_text("reward below 0.1")
    expect(row.locator(".level")).to_have_text("warn")
    expect(editor.locator("img")).to_have_count(0)  # the name is text, not markup
    made = [r for r in server.rules("grpo") if r["name"] == XSS]
    assert [(r["kind"], r["metric"], r["op"], r["value"], r["run"]) for r in made] == [
        ("threshold", "reward", "below", 0.1, None)
    ]
    expect(form.get_by_label("metric", exact=True)).to_have_value("")  # the form was reset

    # A bad value: the server's message, naming the field, beside the form; nothing stored.
    _add(editor, "threshold", {"metric": "", "op": "above", "value": "1"})
    error = editor.locator(".rule-create .form-error")
    expect(error).to_be_visible()
    expect(error).to_contain_text("metric: must be a glob pattern")
    assert len(server.rules("grpo")) == 3
    expect(editor.locator("tr.rule")).to_have_count(3)

    _add(
        editor,
        "change",
        {"metric": "loss", "percent": "50", "window": "100", "direction": "up", "run": "r1"},
    )
    expect(error).to_be_hidden()
    change = _row(editor, "change loss")
    expect(change.locator(".rule-condition")).to_have_text(
        "loss changes by more than 50% over 100 steps (up)"
    )
    expect(change.locator(".rule-run")).to_have_text("r1")
    assert [r["run"] for r in server.rules("grpo") if r["kind"] == "change"] == ["r1"]

    # Changing a rule's fields in place (PATCH); a refusal there is shown beside its form.
    row.get_by_role("button", name="edit").click()
    edit = editor.locator("form.rule-edit")
    expect(edit.get_by_label("kind")).to_be_disabled()
    edit.get_by_label("value").fill("")
    edit.get_by_role("button", name="Save").click()
    expect(editor.locator(".rule-form-box .form-error").first).to_contain_text("value: required")
    edit.get_by_label("value").fill("0.25")
    edit.get_by_role("button", name="Save").click()
    expect(row.locator(".rule-condition")).to_have_text("reward below 0.25")
    assert [r["value"] for r in server.rules("grpo") if r["name"] == XSS] == [0.25]


def test_an_editor_disables_and_deletes_a_rule(
    browser: Browser, server: Server, browsers: list[BrowserContext]
) -> None:
    server.project("pause")
    editor = _open(browser, server, browsers, EDITOR)
    editor.goto("/projects/pause/alerts")
    heartbeat = _row(editor, "heartbeat stale")
    heartbeat.get_by_label("enabled: heartbeat stale").uncheck()
    expect(heartbeat.locator(".rule-enabled")).to_have_text("disabled")
    assert [r["enabled"] for r in server.rules("pause") if r["kind"] == "heartbeat"] == [False]
    editor.reload()
    expect(
        _row(editor, "heartbeat stale").get_by_label("enabled: heartbeat stale")
    ).not_to_be_checked()

    nan = _row(editor, "loss is NaN or infinite")
    nan.get_by_role("button", name="delete loss is NaN or infinite").click()
    confirm = editor.locator(".confirm:visible")
    expect(confirm).to_contain_text("Delete the rule “loss is NaN or infinite”")
    confirm.get_by_role("button", name="Cancel").click()
    expect(nan).to_have_count(1)
    assert len(server.rules("pause")) == 2
    nan.get_by_role("button", name="delete loss is NaN or infinite").click()
    editor.locator(".confirm:visible").get_by_role("button", name="Delete").click()
    expect(editor.locator("tr.rule")).to_have_count(1)
    assert [r["kind"] for r in server.rules("pause")] == ["heartbeat"]


def test_a_webhook_shows_its_secret_once_and_its_delivery_log(
    browser: Browser, server: Server, browsers: list[BrowserContext]
) -> None:
    server.project("hooks")
    owner = _open(browser, server, browsers, OWNER)
    owner.goto("/projects/hooks/alerts")
    hooks = owner.locator("section.webhooks")
    expect(hooks.locator("tr.webhook")).to_have_count(0)
    hooks.get_by_label("webhook URL").fill("ftp://example.com/hook")
    hooks.get_by_role("button", name="Add webhook").click()
    refusal = hooks.locator(".webhook-create .form-error")
    expect(refusal).to_contain_text("url: must be an http:// or https://")
    assert server.api("GET", "/projects/hooks/webhooks").json()["webhooks"] == []

    # Port 9 (discard) refuses at once: each try fails and the log says so.
    hooks.get_by_label("webhook URL").fill("http://127.0.0.1:9/hook")
    hooks.get_by_label("format").select_option("slack")
    hooks.get_by_label("webhook name").fill("ops")
    hooks.get_by_role("button", name="Add webhook").click()
    secret = hooks.get_by_label("webhook secret")
    expect(secret).to_have_value(re.compile(r"^whsec_\S+$"))
    expect(hooks.locator(".secret-shown")).to_contain_text("shown once")
    expect(refusal).to_be_hidden()
    row = hooks.locator("tr.webhook")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("http://127.0.0.1:9/hook")
    expect(row).to_contain_text("slack")
    listed = server.api("GET", "/projects/hooks/webhooks").json()["webhooks"]
    assert [(w["name"], w["format"]) for w in listed] == [("ops", "slack")]
    assert "secret" not in listed[0]
    owner.reload()
    expect(owner.locator("tr.webhook")).to_have_count(1)
    expect(owner.locator(".webhook-secret")).to_have_count(0)  # never shown again

    # A NaN loss fires the default rule: the rule shows as firing, and a delivery is logged.
    server.nan_loss("hooks")
    nan = _row(owner, "loss is NaN or infinite")
    for _ in range(50):
        owner.reload()
        if nan.locator(".rule-firing").count():
            break
        owner.wait_for_timeout(200)
    expect(nan.locator(".rule-firing")).to_have_text("firing")
    owner.get_by_role("button", name="deliveries of ops").click()
    deliveries = owner.locator("table.deliveries")
    expect(deliveries.locator("tbody tr")).to_have_count(1)
    expect(deliveries).to_contain_text("alert.opened")
    expect(deliveries).to_contain_text("rule-")

    owner.get_by_role("button", name="delete webhook ops").click()
    owner.locator(".confirm:visible").get_by_role("button", name="Delete").click()
    expect(owner.locator("tr.webhook")).to_have_count(0)
    assert server.api("GET", "/projects/hooks/webhooks").json()["webhooks"] == []


def test_a_viewer_reads_the_rules_without_controls_or_webhooks(
    browser: Browser, server: Server, browsers: list[BrowserContext]
) -> None:
    server.project("seen")
    viewer = _open(browser, server, browsers, VIEWER)
    viewer.goto("/projects/seen")
    viewer.get_by_role("link", name="Alerts", exact=True).click()
    expect(viewer).to_have_url(f"{server.base}/projects/seen/alerts")
    expect(viewer.locator("tr.rule")).to_have_count(2)
    expect(_row(viewer, "heartbeat stale").locator(".rule-condition")).to_have_text(
        "no heartbeat for 30 s"
    )
    expect(viewer.locator(".read-only-note")).to_contain_text("Only the project's editors")
    expect(
        viewer.locator("#main form, section.webhooks, #main input[type=checkbox]")
    ).to_have_count(0)
    expect(viewer.get_by_role("button", name=re.compile("^(edit|delete)"))).to_have_count(0)
    # The same page for an editor has them: the checks above are not vacuous.
    editor = _open(browser, server, browsers, EDITOR)
    editor.goto("/projects/seen/alerts")
    expect(editor.locator("section.webhooks")).to_be_visible()
    expect(editor.locator("form.rule-add")).to_be_visible()
    expect(editor.locator("tr.rule input[type=checkbox]")).to_have_count(2)
