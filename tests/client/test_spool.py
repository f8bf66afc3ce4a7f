"""The durable spool against real ``tuneplane serve`` processes, on SQLite and PostgreSQL:
a training run whose server is down from start to end journals everything, ``tuneplane
sync`` then stores every point, event, alert and trajectory exactly once (and a second sync
adds nothing); a server back before training ends receives everything live; a torn last
record is ignored; the disk bound holds and says so once."""

from __future__ import annotations

import logging
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.client.runs import PROJECT, Server
from tests.client.world import dead_url, proxy
from tuneplane import Reporter
from tuneplane.client.settings import SpoolSettings
from tuneplane.client.spool import Journal, Target, find_journals, segments
from tuneplane.client.transport import RetryPolicy

FAST = RetryPolicy(attempts=2, first_delay=0.01, max_delay=0.05)
METRICS = ("train/loss", "train/reward", "eval/acc")
MESSAGES = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]


def value(name: str, step: int) -> float:
    if name == "train/reward" and step % 97 == 13:
        return math.nan
    return {"train/loss": 1.0 / (step + 1), "train/reward": step * 0.5}.get(name, step % 7)


def train(reporter: Reporter, steps: int, *, events: int = 20, trajectories: int = 6) -> None:
    """A training loop's telemetry: three metrics a step (some NaN), events, alerts and
    training rollouts."""
    for step in range(steps):
        reporter.report({name: value(name, step) for name in METRICS}, step=step)
        if step < events:
            assert reporter.event("rollout/done", {"tokens": step}, step=step)
        if step < 5:
            assert reporter.alert(f"alert {step}", "text", level="info", step=step)
        if step < trajectories:
            assert reporter.trajectory(
                scope="training", step=step, trajectory_id=f"r{step}", messages=MESSAGES
            )


def spooling(url: str, token: str, spool: Path, max_mb: int = 1024) -> Reporter:
    return Reporter(
        url,
        f"{PROJECT}/{spool.name}",
        token,
        attempt=1,
        flush_interval=0.02,
        retry=FAST,
        status_retry=FAST,
        spool=SpoolSettings(str(spool), max_mb),
    )


def tuneplane_sync(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUNEPLANE_")}
    return subprocess.run(
        [sys.executable, "-m", "tuneplane.cli", "sync", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def stored(server: Server, run: str) -> dict[str, Any]:
    """What the server holds for ``run``, counted through the API."""
    base = f"/api/v1/projects/{PROJECT}/runs/{run}"
    summaries = {m["metric"]: m for m in server.get(base + "/metrics")}
    points = {
        name: [
            (p["step"], p["value"])
            for p in server.get(f"{base}/points/{name}", limit=10_000)["points"]
        ]
        for name in summaries
    }
    return {
        "summaries": summaries,
        "points": points,
        "invalid": [(p["step"], p["kind"]) for p in server.get(f"{base}/invalid/train/reward")],
        "events": server.get(f"{base}/observations", limit=100),
        "alerts": server.get(f"{base}/alerts"),
        "trajectories": server.get(f"{base}/trajectories", limit=100)["items"],
    }


def assert_stored_once(found: dict[str, Any], steps: int, events: int, trajectories: int) -> None:
    nans = [step for step in range(steps) if math.isnan(value("train/reward", step))]
    assert found["summaries"]["train/loss"]["count"] == steps
    assert found["summaries"]["eval/acc"]["count"] == steps
    assert found["summaries"]["train/reward"]["count"] == steps - len(nans)
    assert found["summaries"]["train/reward"]["invalid_count"] == len(nans)
    for name in METRICS:
        expected = [
            (step, value(name, step)) for step in range(steps) if not math.isnan(value(name, step))
        ]
        assert found["points"][name] == expected, name
    assert found["invalid"] == [(step, "nan") for step in nans]
    assert len(found["events"]) == events
    assert len({e["event_id"] for e in found["events"]}) == events
    assert sorted(a["title"] for a in found["alerts"]) == [f"alert {i}" for i in range(5)]
    assert sorted(t["trajectory_id"] for t in found["trajectories"]) == sorted(
        f"r{i}" for i in range(trajectories)
    )


def test_server_down_for_the_whole_run_then_sync_stores_everything_once(
    server: Server, tmp_path: Path
) -> None:
    run = f"spool-down-{server.base.rsplit(':', 1)[1]}"
    spool = tmp_path / run
    token = server.start_attempt(run)
    reporter = spooling(dead_url(), token, spool)
    train(reporter, 3000)
    health = reporter.close(timeout=3)
    assert (health.sent, health.dropped, health.spooled) == (0, 0, 9000)
    assert (health.events_sent, health.events_spooled) == (0, 25)
    assert (health.trajectories_sent, health.trajectories_spooled) == (0, 6)
    assert "9000 kept in the spool" in (health.loss_summary() or "")
    assert len(find_journals(spool)) == 1

    done = tuneplane_sync(str(spool), "--server", server.base)
    assert done.returncode == 0, done.stderr
    assert "9000 points" in done.stderr, done.stderr
    assert "25 events" in done.stderr
    assert_stored_once(stored(server, run), 3000, 20, 6)
    assert find_journals(spool) == []  # delivered, so deleted

    again = tuneplane_sync(str(spool), "--server", server.base)
    assert again.returncode == 0, again.stderr
    assert "nothing to deliver" in again.stderr
    assert_stored_once(stored(server, run), 3000, 20, 6)


def test_sync_into_a_dead_server_keeps_the_journal_and_says_so(
    sqlite_server: Server, tmp_path: Path
) -> None:
    spool = tmp_path / "spool-retry"
    token = sqlite_server.start_attempt(spool.name)
    with spooling(dead_url(), token, spool) as reporter:
        train(reporter, 100, events=3, trajectories=1)
    failed = tuneplane_sync(str(spool), "--server", dead_url())
    assert failed.returncode == 1
    assert "8 events, 300 points, 1 trajectories not delivered" in failed.stderr, failed.stderr
    assert "server unreachable" in failed.stderr
    done = tuneplane_sync(str(spool), "--server", sqlite_server.base)
    assert done.returncode == 0, done.stderr
    assert_stored_once(stored(sqlite_server, spool.name), 100, 3, 1)


def test_a_server_back_before_training_ends_receives_everything_live(
    sqlite_server: Server, tmp_path: Path
) -> None:
    spool = tmp_path / "spool-outage"
    token = sqlite_server.start_attempt(spool.name)
    outage = {"on": True}
    with proxy(sqlite_server.base, lambda _: "cut" if outage["on"] else "pass") as url:
        reporter = spooling(url, token, spool)
        train(reporter, 1000)
        reporter.flush(0.5)
        assert reporter.health().spooled > 0
        outage["on"] = False
        assert reporter.flush(30)
        health = reporter.close()
    assert (health.sent, health.spooled, health.dropped) == (3000, 0, 0)
    assert find_journals(spool) == []  # nothing left for sync
    assert_stored_once(stored(sqlite_server, spool.name), 1000, 20, 6)


def test_a_torn_last_record_is_ignored(sqlite_server: Server, tmp_path: Path) -> None:
    spool = tmp_path / "spool-torn"
    token = sqlite_server.start_attempt(spool.name)
    with spooling(dead_url(), token, spool) as reporter:
        for step in range(5000):
            reporter.report({"x": float(step)}, step=step)
    [journal] = find_journals(spool)
    [segment] = segments(journal)
    lines = segment.read_bytes().splitlines(keepends=True)
    # A writer that died mid-line: the last record cut short.
    segment.write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    last = lines[-1].split(b'"count":', 1)[1].split(b",", 1)[0]
    kept = 5000 - int(last)
    done = tuneplane_sync(str(spool), "--server", sqlite_server.base)
    assert done.returncode == 0, done.stderr
    assert f"{kept} points delivered" in done.stderr, done.stderr
    base = f"/api/v1/projects/{PROJECT}/runs/{spool.name}"
    points = sqlite_server.get(f"{base}/points/x", limit=10_000)["points"]
    assert [(p["step"], p["value"]) for p in points] == [(s, float(s)) for s in range(kept)]


def test_the_disk_bound_holds_says_so_once_and_sync_delivers_what_it_kept(
    sqlite_server: Server, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spool = tmp_path / "spool-full"
    token = sqlite_server.start_attempt(spool.name)
    with (
        caplog.at_level(logging.WARNING, logger="tuneplane"),
        spooling(dead_url(), token, spool, max_mb=1) as reporter,
    ):
        for step in range(100_000):
            reporter.report({"a": step * 0.1, "b": step * 0.2}, step=step)
        health = reporter.close(timeout=3)
    [journal] = find_journals(spool)
    assert sum(path.stat().st_size for path in segments(journal)) <= 2**20
    assert health.not_journaled["points"] > 0
    assert health.spooled + health.dropped == 200_000
    assert health.spooled > 10_000
    warnings = [r.getMessage() for r in caplog.records if "is full" in r.getMessage()]
    assert len(warnings) == 1, warnings
    done = tuneplane_sync(str(spool), "--server", sqlite_server.base)
    assert done.returncode == 0, done.stderr
    summaries = sqlite_server.get(f"/api/v1/projects/{PROJECT}/runs/{spool.name}/metrics")
    assert sum(m["count"] for m in summaries) == health.spooled


def test_the_full_spool_is_said_again_only_after_deletions_made_room(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A smaller batch that fits into what a full spool has left is not room made: only
    acknowledged segments deleted start a new episode, which is said again."""
    target = Target("http://127.0.0.1:9", PROJECT, "full-twice", 1, "secret")
    journal = Journal(tmp_path, target, max_bytes=4096)
    try:
        big, small = b'"' + b"x" * 900 + b'"', b'"y"'
        with caplog.at_level(logging.WARNING, logger="tuneplane"):
            written = [journal.append("/p", "points", 1, big) for _ in range(4)]
            assert all(written)
            assert journal.append("/p", "points", 1, big) is None
            assert journal.append("/p", "points", 1, small) is not None
            assert journal.append("/p", "points", 1, big) is None
            said = [r.getMessage() for r in caplog.records if "is full" in r.getMessage()]
            assert len(said) == 1, said
            for location in written:
                assert location is not None
                journal.ack(location.seq)
            assert journal.append("/p", "points", 1, big) is not None  # a new segment, room made
            while journal.append("/p", "points", 1, big) is not None:
                pass
            said = [r.getMessage() for r in caplog.records if "is full" in r.getMessage()]
            assert len(said) == 2, said
    finally:
        journal.close()
    assert journal.not_journaled["points"] == 3
