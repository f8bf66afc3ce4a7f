"""What a round records beside its outcomes, on the pages: the runs table's checkpoint
column. Each test writes its own runs into a project of its own, so the seeded project's
counts stay as the other tests expect them."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.dashboard.seed import Seeded
from tests.dashboard.seed_eval import new_attempt, population, post_observations, trial

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
