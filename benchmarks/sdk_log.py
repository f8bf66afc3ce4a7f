"""The cost of ``tuneplane.log()`` on the training thread as W&B and Trackio users call it:
after ``tuneplane.init()`` with a display name that is not an ID (``qwen2.5-sft lr=1e-5``,
mapped once at ``init()``), with the console captured (``console="wrap"``, the default) and
without (``console="off"``), the training loop printing a progress line every 100 steps.

Targets (issue 21): median <= 3 us, p99 <= 20 us, first call <= 1 ms, with capture on.

Each round starts a run of each kind in turn (alternating, so that both see the same
machine) and times every ``log()`` of 8 metrics with ``time.perf_counter_ns``, paced by
``--pace-us`` of busy work (a training step that never sleeps), against a real ``tuneplane
serve`` process on SQLite; the points are checked as stored.

    python benchmarks/sdk_log.py                      # about a minute here
    python benchmarks/sdk_log.py --rounds 5 --calls 50000
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time
from array import array
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sdk_report import HEADER, METRICS, GcWatch, Row, RunQueueClock, Server, machine, row

import tuneplane

NAME: Final = "qwen2.5-sft lr=1e-5"
PRINT_EVERY: Final = 100


def one_run(
    server: Server, console: str, calls: int, pace_ns: int, index: int
) -> tuple[Row, float]:
    """A run of ``calls`` logs: its timings, and its first call in µs."""
    name = f"{NAME} {console} {index}"
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink):
        run = tuneplane.init(project="bench-log", name=name, console=console)  # type: ignore[arg-type]
        started = time.perf_counter_ns()
        tuneplane.log(METRICS)
        first_us = (time.perf_counter_ns() - started) / 1000

        with GcWatch() as watch:
            timings = _logs(calls, pace_ns)
        run.finish()
    metrics = server.api.get(f"/api/v1/projects/bench-log/runs/{tuneplane_id(name)}/metrics")
    stored = sum(int(m["count"]) for m in metrics.json() if m["metric"] in METRICS)
    label = f"log(), console={console}"
    offered = (calls + 1) * len(METRICS)
    return row(label, timings, watch.longest_ns, offered, stored=stored), first_us


def _logs(calls: int, pace_ns: int) -> tuple[array[int], array[int]]:
    """Each ``log()``'s duration (the progress line printed every 100 steps is the loop's,
    not the call's), and the part of it spent waiting for a CPU."""
    clock = time.perf_counter_ns
    waited = RunQueueClock()
    latencies, descheduled = array("q", bytes(8 * calls)), array("q", bytes(8 * calls))
    for step in range(calls):
        queued, started = waited(), clock()
        tuneplane.log(METRICS)
        latencies[step] = clock() - started
        descheduled[step] = waited() - queued
        if step % PRINT_EVERY == 0:
            print(f"step {step}: loss 0.5")
        until = clock() + pace_ns
        while clock() < until:
            pass
    waited.close()
    return latencies, descheduled


def tuneplane_id(name: str) -> str:
    from tuneplane.contract.ids import id_for_name

    return id_for_name(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000, help="log() calls per run")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each kind")
    parser.add_argument("--pace-us", type=int, default=200, help="busy work between calls")
    parser.add_argument("--json", type=Path, help="write the rows here too")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp) / "data")
        key = (server.data_dir / "admin.key").read_text().strip()
        os.environ.update(TUNEPLANE_URL=server.base, TUNEPLANE_API_KEY=key)
        try:
            results: dict[str, list[tuple[Row, float]]] = {"wrap": [], "off": []}
            for index in range(args.rounds):
                for console in results:
                    results[console].append(
                        one_run(server, console, args.calls, args.pace_us * 1000, index)
                    )
        finally:
            server.stop()
    print(json.dumps({**machine(), "load": os.getloadavg()[0]}))
    print(HEADER)
    for rows in results.values():
        for found, _ in rows:
            print(found.markdown())
    print("\n| console | runs | first call median µs | first call max µs |\n|---|---|---|---|")
    for console, rows in results.items():
        firsts = [first for _, first in rows]
        print(
            f"| {console} | {len(rows)} | {statistics.median(firsts):,.0f} | {max(firsts):,.0f} |"
        )
    if args.json:
        args.json.write_text(
            json.dumps({k: [r.__dict__ for r, _ in v] for k, v in results.items()})
        )
    lost = [r for rows in results.values() for r, _ in rows if r.stored != r.points_offered]
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
