"""A run a Trackio client logs reads ``unknown`` on its page, and the badge says why: no
Trackio release tells its server that a run ended."""

from __future__ import annotations

import re
import uuid

import httpx
from playwright.sync_api import Page, expect

from tests.dashboard.seed import Seeded


def test_a_trackio_run_reads_unknown_and_says_why(page: Page, seeded: Seeded) -> None:
    project = f"tk-{uuid.uuid4().hex[:8]}"
    entry = {"project": project, "run": "r", "step": 0, "metrics": {"loss": 1.0}, "log_id": "a"}
    answer = httpx.post(
        f"{seeded.base}/api/bulk_log",
        json={"args": [], "kwargs": {"logs": [entry]}},
        headers={"x-trackio-write-token": seeded.admin_key},
    )
    assert answer.status_code == 200, answer.text
    page.goto(f"/projects/{project}/runs/r")
    badge = page.locator(".title-line .status")
    expect(badge).to_have_text("unknown")
    why = re.compile(r"^Logged by a Trackio client, which never says when a run ends")
    expect(badge).to_have_attribute("title", why)
    page.goto(f"/projects/{project}")
    expect(page.locator("table.runs tbody .status")).to_have_text("unknown")
