"""The SDK workload of the SDK issue: one run, 8 series (names with a slash) x 25,000 steps
reported through ``Reporter.report()`` into a real ``tuneplane serve`` process on SQLite.

It reports, with every point verified stored:
- the time ``report()`` takes on the calling thread (median, p99, max µs per call of 8 metrics);
- end-to-end points/s from the first call until the server has committed the last point;
- the time to read one series back (all 25,000 raw points in pages, and one
  ``max_points=1000`` downsampled read);
- peak memory of the reporting process and of the server.

    python benchmarks/sdk_workload.py
    python benchmarks/sdk_workload.py --spool   # the same with the durable spool on
"""

from __future__ import annotations

import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from ingest_arena import Server, machine

from tuneplane import Reporter
from tuneplane.client.settings import SpoolSettings

SERIES = [f"train/{name}" for name in ("loss", "reward", "kl", "entropy")] + [
    f"perf/{name}" for name in ("step_seconds", "tokens_per_s", "gpu_util", "mem_gb")
]
STEPS = 25_000


def peak_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def main() -> int:
    print("machine: " + ", ".join(f"{k} {v}" for k, v in machine().items()))
    with tempfile.TemporaryDirectory(prefix="tuneplane-sdk-") as tmp:
        data = Path(tmp) / "data"
        server = Server(["--data-dir", str(data)], Path(tmp) / "server.log", secret="x")  # noqa: S106
        try:
            key = (data / "admin.key").read_text().strip()
            admin = {"Authorization": f"Bearer {key}"}
            httpx.post(server.base + "/api/v1/projects/bench/runs", json={"run": "sdk"},
                       headers=admin).raise_for_status()  # fmt: skip
            # Public, so the checks below read it as the dashboard would, without a key.
            public = {"visibility": "public"}
            access = server.base + "/api/v1/projects/bench/access"
            httpx.patch(access, json=public, headers=admin).raise_for_status()
            token = httpx.post(server.base + "/api/v1/projects/bench/runs/sdk/attempts",
                               headers=admin).json()["token"]  # fmt: skip
            # The loop reports 200,000 points in well under a second, faster than any
            # network drains them; a queue that holds the whole workload makes the run
            # measure delivery instead of the (designed) drops of a full 100,000 queue.
            spool = SpoolSettings(str(Path(tmp) / "spool")) if "--spool" in sys.argv else None
            reporter = Reporter(
                server.base,
                "bench/sdk",
                token,
                attempt=1,
                queue_capacity=STEPS * len(SERIES),
                spool=spool,
            )
            durations = []
            values = {name: 0.0 for name in SERIES}
            clock = time.perf_counter_ns
            started = time.perf_counter()
            for step in range(STEPS):
                for index, name in enumerate(SERIES):
                    values[name] = step * 0.001 + index
                before = clock()
                reporter.report(values, step=step)
                durations.append(clock() - before)
            reported = time.perf_counter()
            flushed = reporter.flush(timeout=300)
            health = reporter.close(timeout=30)
            run = server.get_json("/api/v1/projects/bench/runs/sdk")
            durable = time.perf_counter()
            stored = run["point_count"]
            read_started = time.perf_counter()
            cursor, read = None, 0
            while True:
                params = "limit=10000" + (f"&cursor={cursor}" if cursor else "")
                page = server.get_json(
                    f"/api/v1/projects/bench/runs/sdk/points/train/loss?{params}"
                )
                read += len(page["points"])
                cursor = page["next_cursor"]
                if cursor is None:
                    break
            raw_seconds = time.perf_counter() - read_started
            down_started = time.perf_counter()
            server.get_json("/api/v1/projects/bench/runs/sdk/points/train/loss?max_points=1000")
            down_seconds = time.perf_counter() - down_started
            server_peak = peak_kib(server.process.pid)
        finally:
            server.stop()
    micro = sorted(d / 1000 for d in durations)
    total = STEPS * len(SERIES)
    print(f"| report() median | {statistics.median(micro):.2f} µs | target ≤ 3 µs |")
    print(f"| report() p99 | {micro[int(0.99 * len(micro))]:.2f} µs | target ≤ 20 µs |")
    print(f"| report() max | {micro[-1]:,.0f} µs | target ≤ 2,000 µs |")
    print(f"| reporting loop | {reported - started:.2f} s for {STEPS:,} calls | |")
    print(f"| end-to-end until durable | {total / (durable - started):,.0f} points/s | "
          "target ≥ 500,000 |")  # fmt: skip
    print(f"| stored / sent / dropped | {stored:,} / {health.sent:,} / {health.dropped:,} | "
          f"flushed: {flushed} |")  # fmt: skip
    print(f"| read one series raw ({read:,} points) | {raw_seconds * 1000:.0f} ms | |")
    print(f"| read one series, max_points=1000 | {down_seconds * 1000:.0f} ms | |")
    client_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"| peak memory | reporter process {client_peak / 1024:.0f} MiB, "
          f"server {server_peak / 1024:.0f} MiB | |")  # fmt: skip
    return 0 if stored == total else 1


if __name__ == "__main__":
    sys.exit(main())
