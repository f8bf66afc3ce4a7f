"""A reporter whose execution attempt a newer one superseded says so once on stderr and
stops sending, instead of retrying what the server will never accept."""

from __future__ import annotations

import threading

import pytest

from tests.client.runs import PROJECT, Server
from tests.client.world import Fate, proxy
from tuneplane.client.reporter import Reporter


def test_a_superseded_reporter_says_so_once_and_stops_sending(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    run = "superseded"
    token = server.start_attempt(run)
    ingest_requests: list[bytes] = []
    lock = threading.Lock()

    def count(request: bytes) -> Fate:
        if request.startswith(b"POST /api/v1/ingest/"):
            with lock:
                ingest_requests.append(request.split(b" ", 2)[1])
        return "pass"

    with proxy(server.base, count) as url:
        reporter = Reporter(url, f"{PROJECT}/{run}", token, flush_interval=0.02)
        reporter.report({"loss": 1.0}, step=0)
        assert reporter.flush(timeout=10)
        server.start_attempt(run)  # a restart of the job: attempt 2
        with lock:
            before = len(ingest_requests)
        for step in range(1, 40):
            reporter.report({"loss": 2.0}, step=step)
            reporter.event("tick", {"step": step})
            reporter.flush(timeout=10)
        health = reporter.close(timeout=5)

    err = capsys.readouterr().err
    assert err.count("attempt superseded by attempt 2") == 1, err
    assert "tuneplane: stopped sending" in err
    # One request met the refusal; nothing was sent after it, not even a heartbeat.
    assert len(ingest_requests) == before + 1, ingest_requests[before:]
    assert health.sent == 1
    assert health.dropped == 39
    assert health.events_dropped == 39
    stored = server.get(f"/api/v1/projects/{PROJECT}/runs/{run}/metrics/loss")
    assert (stored["count"], stored["last"]) == (1, 1.0)
