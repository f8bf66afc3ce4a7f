"""What a round records beside its outcomes, on the pages: the runs table's checkpoint
column, the planned trials never reported on the Validation tab, and the settings keys that
differ on the matched view. Each test writes its own runs into a project of its own, so the
seeded project's counts stay as the other tests expect them."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.dashboard.seed import Seeded
from tests.dashboard.seed_eval import new_attempt, population, post_observations, trial
from tuneplane.contract.declared import canonical_digest

PROJECT = "evidence"


def checkpoint(round_id: str, name: str) -> dict[str, object]:
    return {
        "event_id": f"ckpt-{round_id}",
        "type": "event",
        "name": "evaluation/checkpoint",
        "fields": {"round_id": round_id, "checkpoint": name, "checkpoint_digest": "sha256:ab"},
    }


def test_the_runs_table_shows_the_latest_evaluated_checkpoint(page: Page, seeded: Seeded) -> None:
    token = new_attempt(seeded.base, seeded.admin_key, "evaluated", PROJECT)
    events = [
        population("val-a", 1),
        checkpoint("val-a", "step-100 <i>"),
        trial("val-a", "q", "success"),
    ]
    events += [
        population("val-b", 1),
        checkpoint("val-b", "step-200 <b>"),
        trial("val-b", "q", "failure"),
    ]
    post_observations(seeded.base, token, events)
    new_attempt(seeded.base, seeded.admin_key, "untouched", PROJECT)
    page.goto(f"/projects/{PROJECT}")
    link = page.locator('tr[data-run="evaluated"] .checkpoint a')
    # The producer's text, as text; the latest round's, opening that round.
    expect(link).to_have_text("step-200 <b>")
    expect(page.locator('tr[data-run="untouched"] td.checkpoint')).to_have_text("—")
    link.click()
    expect(page).to_have_url(
        f"{seeded.base}/projects/{PROJECT}/runs/evaluated?tab=validation&attempt=1&round=val-b"
    )
    # val-b's trial is its model failure (val-a's succeeded).
    expect(page.locator(".inspector .trials-table tbody tr")).to_contain_text("model failure")


def declared(round_id: str, expected: int, **recorded: object) -> dict[str, object]:
    return {**population(round_id, expected), **recorded}


def test_the_round_inspector_names_planned_trials_never_reported(
    page: Page, seeded: Seeded
) -> None:
    token = new_attempt(seeded.base, seeded.admin_key, "planned", PROJECT)
    planned = ["q1-r0", "q2-r0", "q3-r0", "q4-r0"]
    events = [declared("val-p", 4, planned_trials=planned), trial("val-p", "q1-r0", "success")]
    post_observations(seeded.base, token, [*events, trial("val-p", "q3-r0", "failure")])
    page.goto(f"/projects/{PROJECT}/runs/planned?tab=validation&round=val-p")
    not_run = page.locator(".inspector .not-run")
    expect(not_run.locator(".not-run-id")).to_have_text(["q2-r0", "q4-r0"])
    expect(not_run).to_contain_text("Planned, never reported (2)")
    # One of them reports (live, through the run's stream): it leaves the list.
    post_observations(seeded.base, token, [trial("val-p", "q4-r0", "unscored")])
    expect(not_run.locator(".not-run-id")).to_have_text(["q2-r0"])


def test_the_matched_view_names_the_settings_keys_that_differ(page: Page, seeded: Seeded) -> None:
    protocols = {
        "keys-base": {"agent": {"name": "terminus-2", "note": "<b>bold</b>"}, "timeout": 60},
        "keys-tuned": {"agent": {"name": "oracle", "note": "<b>bold</b>"}, "retries": 1},
    }
    for run, protocol in protocols.items():
        token = new_attempt(seeded.base, seeded.admin_key, run, PROJECT)
        event = declared("val-s", 1, protocol=protocol)
        digests = {**event["digests"], "settings": canonical_digest(protocol)}  # type: ignore[dict-item]
        post_observations(
            seeded.base, token, [{**event, "digests": digests}, trial("val-s", "q", "success")]
        )
    page.goto(f"/matched?left={PROJECT}/keys-base/val-s&right={PROJECT}/keys-tuned/val-s")
    rows = page.locator(".settings-table tbody tr")
    expect(rows).to_have_count(3)
    paths = rows.evaluate_all("rows => rows.map(r => [r.dataset.path, r.dataset.change])")
    assert paths == [["agent.name", "changed"], ["retries", "added"], ["timeout", "removed"]]
    expect(rows.first.locator("td")).to_have_text(
        ["agent.name", "changed", '"terminus-2"', '"oracle"']
    )
    reason = page.locator('.reasons li[data-code="settings_digest_mismatch"]')
    expect(reason).to_have_text("settings digests differ: agent.name, retries, timeout")
    # A side that recorded no settings is said, not guessed.
    token = new_attempt(seeded.base, seeded.admin_key, "keys-older", PROJECT)
    older = {
        **population("val-s", 1),
        "digests": {**population("val-s", 1)["digests"], "settings": "e" * 64},
    }  # type: ignore[dict-item]
    post_observations(seeded.base, token, [older, trial("val-s", "q", "success")])
    page.goto(f"/matched?left={PROJECT}/keys-older/val-s&right={PROJECT}/keys-tuned/val-s")
    expect(page.locator(".settings-note")).to_contain_text(
        "The left round recorded no protocol settings"
    )
    expect(page.locator(".settings-table")).to_have_count(0)
