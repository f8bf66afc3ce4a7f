"""Several server processes on one PostgreSQL: a point ingested through one process reaches
a live stream opened on another at once (LISTEN/NOTIFY, not the streams' timer), and
``tuneplane serve --workers N`` starts N processes there while SQLite refuses it
(docs/deploy.md, "Several server processes")."""

from __future__ import annotations

import contextlib
import queue
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.serving import running_server, serve_command
from tuneplane.server.live import LISTENING_POLL_SECONDS
from tuneplane.store.live_channel import CHANNEL

PROJECT = "workers"
#: A point must reach the other process's stream within this (on a quiet machine it takes
#: tens of milliseconds; a loaded one has taken a second): a listening process's streams
#: re-read on their own only every LISTENING_POLL_SECONDS.
ARRIVAL_MAX_SECONDS = LISTENING_POLL_SECONDS / 2
POINTS = 5


def _key(data: Path) -> dict[str, str]:
    return {"Authorization": f"Bearer {(data / 'admin.key').read_text().strip()}"}


def _follow(url: str, headers: dict[str, str], seen: queue.Queue[tuple[float, str]]) -> None:
    """Put each ``event: run`` data line of the stream, with its arrival time, in ``seen``,
    until the server stops."""
    timeout = httpx.Timeout(60, read=None)
    with (
        contextlib.suppress(httpx.TransportError),
        httpx.stream("GET", url, headers=headers, timeout=timeout) as sse,
    ):
        event = ""
        for line in sse.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "run":
                seen.put((time.monotonic(), line[6:]))


@pytest.fixture(scope="module")
def two_servers(
    pg_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str, Path]]:
    data = tmp_path_factory.mktemp("workers") / "data"
    args = ("--data-dir", str(data), "--database-url", pg_database_url)
    with running_server(*args) as first, running_server(*args) as second:
        yield first, second, data


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def _listeners(url: str) -> int:
    with psycopg.connect(_libpq(url)) as connection:
        row = connection.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND query = %s",
            (f"LISTEN {CHANNEL}",),
        ).fetchone()
    return int(row[0]) if row else 0


def _run_id(url: str) -> int:
    with psycopg.connect(_libpq(url)) as connection:
        row = connection.execute(
            "SELECT runs.id FROM runs JOIN projects ON projects.id = runs.project_id"
            " WHERE projects.name = %s AND runs.name = 'r'",
            (PROJECT,),
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_point_reaches_a_stream_on_another_process_at_once(
    two_servers: tuple[str, str, Path], pg_database_url: str
) -> None:
    first, second, data = two_servers
    key = _key(data)
    made = httpx.post(f"{first}/api/v1/projects/{PROJECT}/runs", json={"run": "r"}, headers=key)
    assert made.status_code == 201, made.text
    run = f"/api/v1/projects/{PROJECT}/runs/r"
    token = httpx.post(f"{first}{run}/attempts", headers=key).json()["token"]
    seen: queue.Queue[tuple[float, str]] = queue.Queue()
    follower = threading.Thread(
        target=_follow, args=(f"{second}{run}/stream", key, seen), daemon=True
    )
    follower.start()
    seen.get(timeout=30)  # the run as it was: the stream is open
    # Both processes listen, so their streams' timers re-read only every few seconds.
    deadline = time.monotonic() + 30
    while _listeners(pg_database_url) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _listeners(pg_database_url) == 2
    delays = []
    with psycopg.connect(_libpq(pg_database_url), autocommit=True) as listener:
        listener.execute(f"LISTEN {CHANNEL}")
        for step in range(POINTS):
            time.sleep(0.3)
            while not seen.empty():
                seen.get_nowait()
            sent = time.monotonic()
            body = {"series": [{"name": "loss", "steps": [step], "values": [0.5]}]}
            written = httpx.post(
                f"{first}/api/v1/ingest/scalars",
                json=body,
                headers={"Authorization": f"Bearer {token}"},
            )
            assert written.status_code == 200, written.text
            while True:
                arrived, data_line = seen.get(timeout=10)
                if f'"point_count":{step + 1}' in data_line:
                    delays.append(arrived - sent)
                    break
        # What the first process announced: the run, each time it was written to.
        run_id = _run_id(pg_database_url)
        announced = [n.payload for n in listener.notifies(timeout=1, stop_after=POINTS)]
    assert len(announced) == POINTS, announced
    assert all(p.partition(":")[2].split(",") == [str(run_id)] for p in announced), announced
    assert max(delays) < ARRIVAL_MAX_SECONDS, delays


def test_workers_start_that_many_processes_on_postgresql(
    pg_database_url: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    args = ("--data-dir", str(data), "--database-url", pg_database_url, "--workers", "2")
    output = tmp_path / "serve.log"
    with running_server(*args, output=output) as base:
        for _ in range(8):
            assert httpx.get(f"{base}/api/v1/projects", headers=_key(data)).status_code == 200
        time.sleep(0.5)
    log = output.read_text()
    assert "2 server processes" in log, log
    assert log.count("Started server process") == 2, log


def test_sqlite_refuses_workers(tmp_path: Path) -> None:
    done = subprocess.run(
        serve_command("--data-dir", str(tmp_path / "data"), "--workers", "2"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "--workers 2 needs PostgreSQL" in done.stderr
    assert not (tmp_path / "data" / "tuneplane.db").exists()
