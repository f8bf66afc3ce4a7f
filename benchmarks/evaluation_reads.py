"""Evaluation reads at scale: 100,000 trial results in one round, then the time to serve the
round's counts (``GET …/evaluation``) and one filtered page of trials
(``GET …/evaluation/<round>/trials?status=failure&limit=100``, first page and a deep page).

The results are posted through the run protocol (an API key from the server's data
directory, an attempt's ingest token, ``POST /api/v1/ingest/observations`` with 32 results
per request, 8 concurrent senders), about a fifth of them as retries of earlier trials so
the current-outcome logic works. Each read is timed over 30 requests after 3 warm-ups, from
a keep-alive client on the same machine; the figure is the median, with p95 and max.

    python benchmarks/evaluation_reads.py                   # SQLite and PostgreSQL
    python benchmarks/evaluation_reads.py --engine sqlite --trials 20000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from ingest_arena import Server, machine, postgres_store, sqlite_store

STATUSES = ("success", "failure", "infra_error", "unscored")
TARGET_MS = 100.0


def results(trials: int) -> list[dict[str, Any]]:
    events = []
    for i in range(trials):
        status = STATUSES[i % 7 % 4]
        events.append(
            {
                "event_id": f"r{i}",
                "type": "trial",
                "round_id": "val",
                "trial_id": f"t{i:06d}",
                "trial_attempt": 0,
                "status": status,
                "eligible": False,
                "reward": 1.0 if status == "success" else 0.0,
            }
        )
    for i in range(0, trials, 5):  # retries: a later attempt of every fifth trial
        events.append(
            {
                "event_id": f"retry{i}",
                "type": "trial",
                "round_id": "val",
                "trial_id": f"t{i:06d}",
                "trial_attempt": 1,
                "status": "success",
                "eligible": False,
            }
        )
    return events


def load(base: str, api_key: str, trials: int) -> float:
    headers = {"Authorization": f"Bearer {api_key}"}
    with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
        client.post("/api/v1/projects/bench/runs", json={"run": "eval"}).raise_for_status()
        token = client.post("/api/v1/projects/bench/runs/eval/attempts").json()["token"]
    events = results(trials)
    declaration = {
        "event_id": "population",
        "type": "population",
        "round_id": "val",
        "expected": trials,
    }
    batches = [[declaration]] + [events[i : i + 32] for i in range(0, len(events), 32)]
    auth = {"Authorization": f"Bearer {token}"}
    started = time.perf_counter()

    local = threading.local()

    def send(chunk: list[dict[str, Any]]) -> None:
        if not hasattr(local, "client"):
            local.client = httpx.Client(base_url=base, headers=auth, timeout=60)
        response = local.client.post("/api/v1/ingest/observations", json={"events": chunk})
        response.raise_for_status()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(send, batches))
    return time.perf_counter() - started


def timed(client: httpx.Client, path: str, params: dict[str, Any]) -> dict[str, float]:
    for _ in range(3):
        client.get(path, params=params).raise_for_status()
    samples = []
    for _ in range(30):
        started = time.perf_counter()
        client.get(path, params=params).raise_for_status()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return {
        "median_ms": statistics.median(samples),
        "p95_ms": samples[int(0.95 * len(samples)) - 1],
        "max_ms": samples[-1],
    }


def measure(engine: str, store_args: list[str], trials: int, workdir: Path) -> list[str]:
    server = Server(store_args, workdir / f"{engine}.log", secret="not-used-here")  # noqa: S106
    try:
        key_file = Path(store_args[store_args.index("--data-dir") + 1]) / "admin.key"
        seconds = load(server.base, key_file.read_text().strip(), trials)
        run = "/api/v1/projects/bench/runs/eval"
        with httpx.Client(base_url=server.base, timeout=60) as client:
            rounds = client.get(run + "/evaluation").json()["rounds"][0]
            assert rounds["counts"]["reported"] == trials, rounds["counts"]
            first = client.get(
                run + "/evaluation/val/trials", params={"status": "failure", "limit": 100}
            ).json()
            assert len(first["trials"]) == 100
            deep_after = f"t{trials * 9 // 10:06d}"
            reads = {
                "round counts": timed(client, run + "/evaluation", {}),
                "failure page 1": timed(
                    client, run + "/evaluation/val/trials", {"status": "failure", "limit": 100}
                ),
                "failure page at 90%": timed(
                    client,
                    run + "/evaluation/val/trials",
                    {"status": "failure", "limit": 100, "after": deep_after},
                ),
            }
    finally:
        server.stop()
    rows = [f"| {engine} | load {trials:,} results + retries | {seconds:.1f} s | | |"]
    rows += [timing_row(engine, name, figures, TARGET_MS) for name, figures in reads.items()]
    return rows


def timing_row(engine: str, name: str, figures: dict[str, float], target_ms: float) -> str:
    """A table row: the median and p95 of a read, and whether the median met its target."""
    verdict = "met" if figures["median_ms"] <= target_ms else "missed"
    return (
        f"| {engine} | {name} | {figures['median_ms']:.1f} ms | {figures['p95_ms']:.1f} ms "
        f"| {verdict} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--trials", type=int, default=100_000)
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    info = machine()
    print("machine: " + ", ".join(f"{k} {v}" for k, v in info.items()))
    rows = ["| engine | read | median | p95 | ≤ 100 ms |", "|---|---|--:|--:|---|"]
    rows += on_engines(args.engine, args.pg_url, lambda *a: measure(*a[:2], args.trials, a[2]))
    print("\n".join(rows))
    return 0


def on_engines(
    engine: str, pg_url: str, measure: Callable[[str, list[str], Path], list[str]]
) -> list[str]:
    """``measure(engine, store arguments, work directory)`` on SQLite, PostgreSQL or both."""
    rows: list[str] = []
    with tempfile.TemporaryDirectory(prefix="tuneplane-eval-") as tmp:
        workdir = Path(tmp)
        if engine in ("sqlite", "both"):
            with sqlite_store(workdir) as store:
                rows += measure("sqlite", store, workdir)
        if engine in ("postgresql", "both"):
            with postgres_store(pg_url) as store:
                # The server keeps its admin key (and blobs) in a data directory.
                store = [*store, "--data-dir", str(workdir / "pg-data")]
                rows += measure("postgresql", store, workdir)
    return rows


if __name__ == "__main__":
    sys.exit(main())
