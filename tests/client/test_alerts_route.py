"""``POST /api/v1/ingest/alerts`` on a real server: what the SDK's ``alert()`` sends."""

from __future__ import annotations

import uuid

import httpx

from tests.client.runs import PROJECT, Server


def test_alerts_are_stored_once_and_bad_ones_named(server: Server) -> None:
    run = f"alerts-{uuid.uuid4().hex[:8]}"
    token = server.start_attempt(run)
    url = f"{server.base}/api/v1/ingest/alerts"
    headers = {"Authorization": f"Bearer {token}"}
    alert = {"alert_id": "a1", "title": "loss spiked", "text": "x10", "level": "warn", "step": 3}
    first = httpx.post(url, json={"alerts": [alert]}, headers=headers)
    assert first.status_code == 200, first.text
    assert first.json() == {"new": 1, "duplicate": 0}, first.text
    again = httpx.post(url, json={"alerts": [alert, {**alert, "alert_id": "a2"}]}, headers=headers)
    assert again.json() == {"new": 1, "duplicate": 1}

    bad = httpx.post(
        url, json={"alerts": [{**alert, "title": "", "level": "loud"}]}, headers=headers
    )
    assert bad.status_code == 422
    assert bad.json()["error"]["message"].startswith("alerts[0].title: must be a string of 1-200")
    empty = httpx.post(url, json={"alerts": []}, headers=headers)
    assert empty.status_code == 422
    assert "alerts: must be a list of 1-32" in empty.text
    stranger = httpx.post(url, json={"alerts": [alert]}, headers={"Authorization": "Bearer x"})
    assert stranger.status_code == 401

    stored = server.get(f"/api/v1/projects/{PROJECT}/runs/{run}/alerts")
    assert sorted(a["alert_id"] for a in stored) == ["a1", "a2"]
    assert server.run(run)["alert_count"] == 2
