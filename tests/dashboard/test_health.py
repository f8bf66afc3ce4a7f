"""A finished run's transport health is that of its last heartbeat, however old: it sends no
more. A running run whose heartbeats stopped is unknown, never ok and never "stopped"."""

from __future__ import annotations

import time

import httpx
from playwright.sync_api import Page, expect

from tests.dashboard.seed import SDK_PROJECT, Seeded, start_sdk_run
from tests.dashboard.seed_hf import HEARTBEAT, seed_hf_run

#: Seconds between heartbeats: three of them without one make a running run's health stale.
INTERVAL = 0.5


def test_a_finished_run_keeps_its_last_health(page: Page, seeded: Seeded) -> None:
    finished = seed_hf_run(
        seeded.base, seeded.admin_key, "grpo-finished", heartbeat_interval=INTERVAL
    )
    token = start_sdk_run(seeded.base, seeded.admin_key, "grpo-stalled")
    auth = {"Authorization": f"Bearer {token}"}
    for path, payload in (
        ("heartbeat", {**HEARTBEAT, "queued": 12, "sent": 9, "dropped": 3, "interval": INTERVAL}),
        ("status", {"status": "running"}),
    ):
        answer = httpx.post(f"{seeded.base}/api/v1/ingest/{path}", json=payload, headers=auth)
        assert answer.status_code == 200, answer.text
    time.sleep(4 * INTERVAL)

    run = httpx.get(f"{seeded.base}/api/v1{finished}").json()
    assert (run["status"], run["transport"]["state"]) == ("succeeded", "ok")
    stalled = httpx.get(f"{seeded.base}/api/v1/projects/{SDK_PROJECT}/runs/grpo-stalled").json()
    assert stalled["transport"]["state"] == "unknown"
    assert "last heartbeat" in stalled["transport"]["reason"]

    page.goto(finished)
    health = page.locator(".run-head .health")
    expect(health).to_have_text("ok")
    expect(health).to_have_attribute(
        "title", "at the run's end: sent 5,142, dropped 0, failed sends 0, queued 0 of 100,000"
    )
    page.goto(f"/projects/{SDK_PROJECT}")
    expect(page.locator('tr[data-run="grpo-finished"] .health')).to_have_text("ok")
    expect(page.locator('tr[data-run="grpo-stalled"] .health')).to_have_text("unknown")

    # Ended with points lost, it stays lossy.
    answer = httpx.post(
        f"{seeded.base}/api/v1/ingest/status",
        json={"status": "failed", "exit_code": 1},
        headers=auth,
    )
    assert answer.status_code == 200, answer.text
    page.goto(f"/projects/{SDK_PROJECT}/runs/grpo-stalled")
    expect(page.locator(".run-head .health")).to_have_text("lossy")
