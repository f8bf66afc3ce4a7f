"""Live-update delay across server processes on one PostgreSQL: how long a point ingested
through one ``tuneplane serve`` takes to reach a live stream (``GET …/runs/{run}/stream``)
opened on another.

Two real server processes share a scratch database (created through ``--pg-url`` and
dropped at the end). A run is made and given an ingest token through the first; the
second's stream is opened with the admin key; then ``--points`` points are posted one at a
time to ``POST /api/v1/ingest/scalars`` on the first, ``--gap`` seconds apart, and the delay
of each is the time from sending the point to the ``event: run`` of the stream that counts
it. The issue's target is a p99 of 250 ms. Run it from the repository root::

    python benchmarks/live_workers.py --points 40
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import secrets
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from ingest_arena import DEFAULT_PG_URL, Server, machine, percentile, served_code
from sdk_ingest import engine_store

RUN = "/api/v1/projects/live/runs/r"


def _follow(url: str, headers: dict[str, str], seen: queue.Queue[tuple[float, str]]) -> None:
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


def measure(first: Server, second: Server, key: str, points: int, gap: float) -> list[float]:
    admin = {"Authorization": f"Bearer {key}"}
    made = httpx.post(f"{first.base}/api/v1/projects/live/runs", json={"run": "r"}, headers=admin)
    made.raise_for_status()
    token = httpx.post(f"{first.base}{RUN}/attempts", headers=admin).json()["token"]
    seen: queue.Queue[tuple[float, str]] = queue.Queue()
    threading.Thread(
        target=_follow, args=(f"{second.base}{RUN}/stream", admin, seen), daemon=True
    ).start()
    seen.get(timeout=60)
    time.sleep(2.0)  # both processes listening
    delays = []
    with httpx.Client(headers={"Authorization": f"Bearer {token}"}) as client:
        for step in range(points):
            time.sleep(gap)
            while not seen.empty():
                seen.get_nowait()
            sent = time.monotonic()
            body = {"series": [{"name": "loss", "steps": [step], "values": [0.5]}]}
            client.post(f"{first.base}/api/v1/ingest/scalars", json=body).raise_for_status()
            while True:
                arrived, data = seen.get(timeout=30)
                if f'"point_count":{step + 1}' in data:
                    delays.append(arrived - sent)
                    break
    return delays


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--points", type=int, default=40)
    parser.add_argument("--gap", type=float, default=0.25, help="seconds between points")
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args()
    print("machine: " + ", ".join(f"{k} {v}" for k, v in machine().items()), flush=True)
    print("serving: " + ", ".join(f"{k} {v}" for k, v in served_code().items()), flush=True)
    print(f"load before: {os.getloadavg()}", flush=True)
    with (
        tempfile.TemporaryDirectory(prefix="tuneplane-live-") as tmp,
        engine_store("postgresql", Path(tmp), args.pg_url) as (store_args, data_dir),
    ):
        secret = secrets.token_urlsafe(24)
        first = Server(store_args, Path(tmp) / "first.log", secret)
        try:
            second = Server(store_args, Path(tmp) / "second.log", secret)
            try:
                key = (data_dir / "admin.key").read_text().strip()
                delays = sorted(measure(first, second, key, args.points, args.gap))
            finally:
                second.stop()
        finally:
            first.stop()
    ms = [1000 * d for d in delays]
    print(
        f"{len(ms)} points: median {statistics.median(ms):.1f} ms, "
        f"p90 {1000 * percentile(delays, 0.90):.1f} ms, p99 {1000 * percentile(delays, 0.99):.1f} "
        f"ms, max {ms[-1]:.1f} ms; load after: {os.getloadavg()}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
