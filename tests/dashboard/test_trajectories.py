"""Trajectories in a real browser against real servers, on SQLite and PostgreSQL: a trial
attempt's messages a page at a time from the server, tool calls and hostile text as text, a
link that reopens the same execution, each state of missing text in its own words and never
as a failure, the content permission, and the training rollouts filtered and paged by the
server as biased samples. Everything is seeded through the public ingest API."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.conftest import scratch_postgres
from tests.dashboard.members import OWNER, PASSWORD, VIEWER, open_as
from tests.dashboard.seed_eval import XSS, post_observations, trial
from tests.dashboard.seed_trajectories import (
    LONG_MESSAGES,
    PER_STEP,
    PROJECT,
    conversation,
    evaluation,
    post_trajectories,
    rollout,
    seed_eval_run,
    seed_expiring,
    seed_train_run,
)
from tests.serving import running_server
from tuneplane.server import admin
from tuneplane.server.settings import Settings

DASH = "\N{EN DASH}"
EVAL = f"/projects/{PROJECT}/runs/eval-run"
TRAIN = f"/projects/{PROJECT}/runs/train-run"


def trajectory(run: str, trial_id: str, attempt: int = 0, round_id: str = "val-t") -> str:
    return (
        f"/projects/{PROJECT}/runs/{run}/trajectory"
        f"?attempt=1&round_id={round_id}&trial_id={trial_id}&trial_attempt={attempt}"
    )


@dataclass
class World:
    base: str
    admin_key: str
    eval_token: str
    train_token: str
    errors: list[str] = field(default_factory=list)
    contexts: list[BrowserContext] = field(default_factory=list)

    def open(self, browser: Browser, login: str = OWNER) -> Page:
        """A browser of its own, signed in as ``login``."""
        viewport = {"width": 1400, "height": 1000}
        return open_as(browser, self, self.contexts, login, viewport=viewport)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    data = tmp_path_factory.mktemp(f"trajectories-{request.param}")
    with ExitStack() as stack:
        url = stack.enter_context(scratch_postgres()) if request.param == "postgresql" else None
        settings = Settings.from_env({}, data_dir=str(data), database_url=url)
        for login in (OWNER, VIEWER):
            admin.add_user(settings, login, PASSWORD, admin=False)
        args = ["--data-dir", str(data), *(["--database-url", url] if url else [])]
        admin_key = ""
        # Bodies sent to this server expire in under a second: eval-old's text is expired.
        with running_server(*args, env={"TUNEPLANE_TRAJECTORY_DAYS": "0.00001"}) as short:
            admin_key = (data / "admin.key").read_text().strip()
            key = {"Authorization": f"Bearer {admin_key}"}
            for run in ("eval-old", "eval-run", "train-run"):
                made = httpx.post(
                    f"{short}/api/v1/projects/{PROJECT}/runs", json={"run": run}, headers=key
                )
                assert made.status_code == 201, made.text
            members = f"{short}/api/v1/projects/{PROJECT}/members"
            for login, role, content in ((OWNER, "owner", True), (VIEWER, "viewer", False)):
                put = httpx.put(
                    f"{members}/{login}", json={"role": role, "content": content}, headers=key
                )
                assert put.is_success, put.text
            access = httpx.patch(
                f"{short}/api/v1/projects/{PROJECT}/access",
                json={"visibility": "private"},
                headers=key,
            )
            assert access.is_success, access.text
            seed_expiring(short, admin_key)
        base = stack.enter_context(running_server(*args))
        yield World(
            base, admin_key, seed_eval_run(base, admin_key), seed_train_run(base, admin_key)
        )


@pytest.fixture
def opened(world: World) -> Iterator[World]:
    """The world; the browsers a test opened are closed after it, which then fails on any
    script error they met."""
    yield world
    for context in world.contexts:
        context.close()
    world.contexts.clear()
    errors, world.errors[:] = list(world.errors), []
    assert errors == []


@pytest.fixture
def owner(browser: Browser, opened: World) -> Page:
    return opened.open(browser)


def numbers(page: Page) -> list[str]:
    shown: list[str] = page.eval_on_selector_all(
        ".message .message-number", "n => n.map(e => e.textContent)"
    )
    return shown


def test_a_trial_attempt_is_read_a_page_at_a_time_with_its_tool_calls(owner: Page) -> None:
    bodies: list[str] = []
    owner.on(
        "request",
        lambda r: bodies.append(r.url) if re.search(r"/trajectories/\d+", r.url) else None,
    )
    owner.goto(EVAL + "?tab=validation&round=val-t&trial=long")
    history = owner.locator(".history tbody tr")
    expect(history).to_have_count(2)
    # Attempt 0 (an execution error) sent no text: that is said, and it is not its outcome.
    expect(history.nth(1).locator(".trajectory-link-cell")).to_have_text("no text retained")
    history.first.get_by_role("link", name=re.compile("trajectory of trial attempt 1")).click()
    expect(owner).to_have_url(
        re.compile(r"/trajectory\?attempt=1&round_id=val-t&trial_id=long&trial_attempt=1")
    )
    expect(owner.locator("h1")).to_have_text("Trial long, trial attempt 1")
    expect(owner.locator(".trajectory-head .outcome")).to_have_text("success")
    where = owner.locator(".trajectory-messages .page-where")
    expect(where).to_have_text(f"messages 1{DASH}25 of {LONG_MESSAGES} kept")
    assert numbers(owner) == [f"#{n}" for n in range(1, 26)]

    call = owner.locator('.tool-call[data-call="c0"]')
    expect(call.locator(".tool-name")).to_have_text("python")
    expect(call.locator(".tool-arguments")).to_contain_text('"code": "print(0)"')
    expect(call.locator(".tool-arguments")).to_contain_text(XSS)
    result = owner.locator(".message.role-tool").first
    expect(result.locator(".message-role")).to_have_text("tool result")
    expect(result.locator(".tool-call-id")).to_have_text("for call c0")
    expect(result.locator(".message-text")).to_have_text(f"out-0 {XSS}")
    expect(owner.locator('.message[data-index="1"] .message-tokens')).to_have_text(
        "tokens: 100 input, 10 output"
    )
    expect(owner.locator('.message[data-index="1"] .message-ms')).to_have_text("250 ms")
    expect(owner.locator(".message").first.locator(".message-text")).to_have_text(f"Question {XSS}")
    assert owner.locator(".trajectory img").count() == 0

    owner.get_by_role("button", name="next →").click()
    expect(where).to_have_text(f"messages 26{DASH}50 of {LONG_MESSAGES} kept")
    assert numbers(owner)[0] == "#26"
    expect(owner).to_have_url(re.compile(r"offset=25"))
    assert any("offset=25" in url and "limit=25" in url for url in bodies)
    owner.get_by_role("button", name="next →").click()
    expect(where).to_have_text(f"messages 51{DASH}60 of {LONG_MESSAGES} kept")
    expect(owner.locator(".message").last.locator(".message-text")).to_have_text(
        "The answer is 51."
    )
    expect(owner.get_by_role("button", name="next →")).to_be_disabled()
    # The page is in the address: a reload shows it again.
    owner.reload()
    expect(where).to_have_text(f"messages 51{DASH}60 of {LONG_MESSAGES} kept")


def test_the_copied_link_reopens_the_same_execution(
    owner: Page, browser: Browser, world: World
) -> None:
    owner.context.grant_permissions(["clipboard-read", "clipboard-write"])
    owner.goto(trajectory("eval-run", "long", 1) + "&offset=25")
    expect(owner.locator(".message")).to_have_count(25)
    owner.get_by_role("button", name="Copy link").click()
    expect(owner.locator(".copy-note")).to_have_text("copied")
    copied = owner.evaluate("navigator.clipboard.readText()")
    assert copied == world.base + trajectory("eval-run", "long", 1)
    other = world.open(browser)
    other.goto(copied)
    expect(other.locator("h1")).to_have_text("Trial long, trial attempt 1")
    expect(other.locator(".trajectory-head")).to_contain_text("val-t")
    expect(other.locator(".trajectory-messages .page-where")).to_have_text(
        f"messages 1{DASH}25 of {LONG_MESSAGES} kept"
    )


@pytest.mark.parametrize(
    ("run", "trial_id", "round_id", "kind", "words"),
    [
        ("eval-run", "cut", "val-t", "truncated", "Truncated (kept 5 of 40 messages)"),
        ("eval-run", "samp", "val-t", "sampled", "Sampled:"),
        ("eval-run", "gone", "val-t", "not-retained", "No text retained"),
        ("eval-run", "hidden", "val-none", "not-retained", "No text retained"),
        ("eval-old", "old", "val-o", "expired", "Text expired on 20"),
        ("eval-run", "del", "val-t", "deleted", "Text deleted on 20"),
    ],
)
def test_each_state_of_missing_text_reads_distinctly_and_not_as_a_failure(
    owner: Page, run: str, trial_id: str, round_id: str, kind: str, words: str
) -> None:
    owner.goto(trajectory(run, trial_id, round_id=round_id))
    expect(owner.locator(".trajectory-head .outcome")).to_have_text("success")
    notes = owner.locator(".text-state")
    expect(notes.first).to_be_visible()
    expect(owner.locator(f".text-state.{kind}")).to_contain_text(words)
    others = {"truncated", "sampled", "not-retained", "expired", "deleted"} - {kind}
    for other in others:
        expect(owner.locator(f".text-state.{other}")).to_have_count(0)
    assert "fail" not in owner.locator(".trajectory").inner_text().lower()
    if kind in ("truncated", "sampled"):
        expect(owner.locator(".message").first).to_be_visible()  # what was kept is readable
    else:
        expect(owner.locator(".messages")).to_have_count(0)


def test_the_validation_history_names_each_attempts_text(owner: Page) -> None:
    owner.goto(EVAL + "?tab=validation&round=val-t&trial=del")
    expect(owner.locator(".history .trajectory-link-cell")).to_have_text(
        re.compile(r"^deleted on \d{4}-")
    )
    owner.goto(EVAL + "?tab=validation&round=val-t&trial=cut")
    expect(owner.locator(".history .trajectory-link-cell")).to_have_text("messages")


def test_a_viewer_without_content_reads_why_and_no_error(browser: Browser, opened: World) -> None:
    world = opened
    viewer = world.open(browser, VIEWER)
    viewer.goto(trajectory("eval-run", "long", 1))
    expect(viewer.locator(".no-permission")).to_contain_text("needs the content permission")
    expect(viewer.locator("h1")).to_have_text("Trial long, trial attempt 1")
    expect(viewer.locator(".trajectory-head")).to_contain_text(
        f"{LONG_MESSAGES} of {LONG_MESSAGES}"
    )
    expect(viewer.locator(".message")).to_have_count(0)
    # The API refuses the body itself, whatever the page does.
    cookies = {c["name"]: c["value"] for c in viewer.context.cookies()}
    rows = httpx.get(f"{world.base}/api/v1{EVAL}/trajectories", cookies=cookies).json()["items"]
    refused = httpx.get(f"{world.base}/api/v1{EVAL}/trajectories/{rows[0]['id']}", cookies=cookies)
    assert refused.status_code == 403


def test_a_trajectory_that_arrives_is_shown_live(owner: Page, world: World) -> None:
    owner.goto(trajectory("eval-run", "late"))
    expect(owner.locator(".live-state")).to_have_text("live")
    expect(owner.locator(".text-state.not-retained")).to_contain_text("No text retained")
    post_trajectories(
        world.base, world.eval_token, [evaluation("val-t", "late", 0, conversation(4))]
    )
    post_observations(world.base, world.eval_token, [trial("val-t", "late", "success")])
    expect(owner.locator(".message")).to_have_count(4)
    expect(owner.locator(".text-state")).to_have_count(0)
    expect(owner.locator(".trajectory-head .outcome")).to_have_text("success")


def rollout_ids(page: Page) -> list[str]:
    ids: list[str] = page.eval_on_selector_all(
        ".rollouts-table tbody tr[data-rollout]", "r => r.map(e => e.dataset.rollout)"
    )
    return ids


def test_training_rollouts_are_filtered_and_paged_by_the_server(owner: Page) -> None:
    lists: list[str] = []
    owner.on("request", lambda r: lists.append(r.url) if "/trajectories?" in r.url else None)
    owner.goto(TRAIN)
    owner.get_by_role("tab", name="Training rollouts").click()
    panel = owner.locator(".rollouts")
    expect(panel.locator(".biased-samples")).to_contain_text("biased samples")
    where = panel.locator(".page-where")
    total = PER_STEP * 3
    expect(where).to_have_text(f"rollouts 1{DASH}50 of {total} kept")
    owner.get_by_role("button", name="next →").click()
    expect(where).to_have_text(f"rollouts 51{DASH}{total} of {total} kept")
    assert any("scope=training" in u and "after=" in u and "limit=50" in u for u in lists)

    panel.locator('.category-filter[data-category="low_reward"]').click()
    expect(where).to_have_text(f"rollouts 1{DASH}12 of 12 kept (low reward)")
    expect(panel.locator("tbody .category")).to_have_text(["low reward"] * 12)
    panel.locator('select[name="rollout-step"]').select_option("20")
    expect(where).to_have_text(f"rollouts 1{DASH}4 of 4 kept (low reward, step 20)")
    assert rollout_ids(owner) == ["s20-r02", "s20-r08", "s20-r14", "s20-r20"]
    assert any("category=low_reward" in u and "step=20" in u for u in lists)
    assert "category=low_reward" in owner.url
    assert "step=20" in owner.url
    # A reward that some reward functions did not give says which.
    partial = "0.05 (none from format)"
    expect(panel.locator("tbody .reward")).to_have_text(["0.05", partial, "0.05", partial])

    panel.locator('.category-filter[data-category="invalid_reward"]').click()
    expect(where).to_have_text(f"rollouts 1{DASH}4 of 4 kept (invalid or missing reward, step 20)")
    expect(panel.locator("tbody .reward")).to_have_text(
        ["invalid", "missing", "invalid", "missing"]
    )
    failures = panel.locator('.category-filter[data-category="failure"]')
    failures.click()
    row = panel.locator('tr[data-rollout="s20-r00"]')
    expect(row.locator(".policy")).to_have_text(["v18", "20"])
    expect(panel.locator('tr[data-rollout="s20-r06"] .policy')).to_have_text(["v18", "20"])
    panel.locator('.category-filter[data-category="anomaly"]').click()
    expect(panel.locator('tr[data-rollout="s20-r01"] .policy')).to_have_text(["unknown", "unknown"])
    # A sample of chosen rollouts yields no rate: none is shown, and the tab says why.
    assert "%" not in panel.inner_text()
    expect(panel.locator(".figure")).to_have_count(0)
    expect(panel.locator(".biased-samples")).to_contain_text("no success rate")

    # The address holds the view: a reload shows it, and a rollout opens on its own page.
    owner.reload()
    expect(where).to_have_text(f"rollouts 1{DASH}4 of 4 kept (anomaly, step 20)")
    owner.get_by_role("link", name="s20-r07").click()
    expect(owner).to_have_url(re.compile(r"/trajectory\?attempt=1&step=20&trajectory_id=s20-r07"))
    expect(owner.locator("h1")).to_have_text("Rollout s20-r07 at step 20")
    expect(owner.locator(".trajectory-head .category")).to_have_text("anomaly")
    expect(owner.locator(".trajectory-head .policy")).to_have_text(["unknown", "unknown"])
    expect(owner.locator(".message").first.locator(".message-text")).to_have_text(
        f"rollout 7 {XSS}"
    )
    expect(owner.locator(".text-state.sampled")).to_be_visible()
    assert owner.locator(".trajectory img").count() == 0


def test_a_low_reward_is_not_called_a_failure(owner: Page) -> None:
    owner.goto(TRAIN + "?tab=rollouts&category=low_reward")
    rows = owner.locator(".rollouts-table tbody tr[data-rollout]")
    expect(rows).to_have_count(12)
    assert "fail" not in owner.locator(".rollouts-table tbody").inner_text().lower()
    owner.goto(
        f"/projects/{PROJECT}/runs/train-run/trajectory?attempt=1&step=10&trajectory_id=s10-r02"
    )
    expect(owner.locator(".trajectory-head .category")).to_have_text("low reward")
    assert "fail" not in owner.locator(".trajectory").inner_text().lower()


def test_new_rollouts_appear_live(owner: Page, world: World) -> None:
    owner.goto(TRAIN + "?tab=rollouts&category=failure")
    expect(owner.locator(".live-state")).to_have_text("live")
    expect(owner.locator(".rollouts .page-where")).to_have_text(
        f"rollouts 1{DASH}12 of 12 kept (failure)"
    )
    post_trajectories(world.base, world.train_token, [rollout(40, 0), rollout(40, 1)])
    # Rollouts come with a training step's points; those move the run and the tab fetches.
    points = {"series": [{"name": "loss", "steps": [40], "values": [0.5]}]}
    sent = httpx.post(
        f"{world.base}/api/v1/ingest/scalars",
        json=points,
        headers={"Authorization": f"Bearer {world.train_token}"},
    )
    assert sent.status_code == 200, sent.text
    expect(owner.locator(".rollouts .page-where")).to_have_text(
        f"rollouts 1{DASH}13 of 13 kept (failure)"
    )
    expect(owner.locator('select[name="rollout-step"] option').nth(1)).to_have_text("40")
