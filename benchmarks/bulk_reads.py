"""Whole series through the API: the bulk read (``GET …/runs/{run}/columns``) against a
real ``tuneplane serve``, as JSON and as an Arrow stream, on SQLite and PostgreSQL.

Two runs are written through the SDK's scalar route (``POST /api/v1/ingest/scalars``, 2,048
points a request, in step order): ``p25k`` holding one series of 25,000 points and ``p1m``
one of 1,000,000. Each is then read whole, one request at a time on one keep-alive
connection, ``--repeat`` times after two untimed reads, three ways:

* ``json``: ``Accept: application/json``, the answer received whole and decoded by orjson;
* ``arrow``: ``Accept: application/vnd.apache.arrow.stream``, received and read by pyarrow
  into a table;
* ``sdk``: ``tuneplane.Api(...).points(..., format="numpy")``, what a script calls (Arrow
  when pyarrow is installed, as here), with its own connection.

Every answer is checked (point count, first and last step and value). Times are wall clock
from the request to the decoded answer, median, fastest and 90th percentile; the machine's
load average is recorded beside them, since the machine may be shared, and so is the CPU a
read costs the server (with PostgreSQL's backends) and this client, which a crowded machine
inflates far less than wall time. Targets (issue 24):
25,000 points in at most 15 ms, 1,000,000 in at most 300 ms, end to end.

Run it from the repository root (``pip install -e '.[test]'`` first)::

    python benchmarks/bulk_reads.py                     # both engines
    python benchmarks/bulk_reads.py --engine sqlite --repeat 50 --json results.json
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import httpx
import orjson
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))
from ingest_arena import DEFAULT_PG_URL, Server, machine, postgres_version, served_code
from sdk_ingest import database_cpu_seconds, engine_store

import tuneplane

PROJECT: Final = "bench"
METRIC: Final = "train/loss"
SIZES: Final = {"p25k": 25_000, "p1m": 1_000_000}
TARGET_MS: Final = {"p25k": 15.0, "p1m": 300.0}
BATCH: Final = 2048
ARROW: Final = "application/vnd.apache.arrow.stream"


def value(step: int) -> float:
    return 1.0 / (1 + step) + (step % 97) * 1e-3


def seed(server: Server, key: str) -> None:
    """Both runs through the SDK's scalar route, in step order."""
    admin = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=server.base, timeout=120) as client:
        for run, points in SIZES.items():
            began = time.perf_counter()
            client.post(f"/api/v1/projects/{PROJECT}/runs", json={"run": run}, headers=admin)
            attempt = client.post(f"/api/v1/projects/{PROJECT}/runs/{run}/attempts", headers=admin)
            token = {"Authorization": f"Bearer {attempt.json()['token']}"}
            for first in range(0, points, BATCH):
                steps = list(range(first, min(points, first + BATCH)))
                body = {"series": [{"name": METRIC, "steps": steps,
                                    "values": [value(s) for s in steps]}]}  # fmt: skip
                stored = client.post("/api/v1/ingest/scalars", json=body, headers=token)
                if stored.status_code != 200:
                    raise SystemExit(f"seeding {run}: HTTP {stored.status_code} {stored.text}")
            print(f"  seeded {run}: {points:,} points in {time.perf_counter() - began:.1f} s")


def _check(points: int, steps: Any, values: Any) -> None:
    last = points - 1
    if len(steps) != points or steps[0] != 0 or steps[-1] != last or values[-1] != value(last):
        raise SystemExit(f"wrong answer: {len(steps)} points, steps {steps[0]}..{steps[-1]}")


def read_json(client: httpx.Client, path: str, points: int) -> None:
    answer = client.get(path, headers={"Accept": "application/json"})
    series = orjson.loads(answer.content)["series"][0]
    _check(points, series["steps"], series["values"])


def read_arrow(client: httpx.Client, path: str, points: int) -> None:
    answer = client.get(path, headers={"Accept": ARROW})
    table = pa.ipc.open_stream(answer.content).read_all()
    _check(points, table.column("step").to_numpy(), table.column("value").to_numpy())


@dataclass(frozen=True, slots=True)
class Row:
    engine: str
    run: str
    points: int
    way: str
    repeat: int
    median_ms: float
    fastest_ms: float
    p90_ms: float
    target_ms: float
    met: bool
    load_before: float
    load_after: float
    #: CPU per read of the server (and PostgreSQL's backends) and of this client: on a shared
    #: machine, what a read would take alone is about their sum
    server_cpu_ms: float
    client_cpu_ms: float


def measure(engine: str, server: Server, store: list[str], key: str, repeat: int) -> list[Row]:
    rows = []
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=server.base, headers=headers, timeout=120) as client:
        api = tuneplane.Api(server.base, key)
        for run, points in SIZES.items():
            path = f"/api/v1/projects/{PROJECT}/runs/{run}/columns?metric={METRIC}"

            def sdk(run: str = run, points: int = points) -> None:
                found = api.points(PROJECT, run, METRIC, format="numpy")
                _check(points, found["step"], found["value"])

            ways: dict[str, Callable[[], None]] = {
                "json": lambda path=path, points=points: read_json(client, path, points),
                "arrow": lambda path=path, points=points: read_arrow(client, path, points),
                "sdk": sdk,
            }
            times = max(3, repeat // (1 if points < 100_000 else 6))
            for way, read in ways.items():
                rows.append(_timed(engine, run, points, way, read, times, server, store))
                print(f"  {engine} {run} {way}: median {rows[-1].median_ms:.1f} ms", flush=True)
        api.close()
    return rows


def _cpu(server: Server, store: list[str]) -> float:
    return server.cpu_seconds() + sum(database_cpu_seconds(store).values())


def _timed(
    engine: str,
    run: str,
    points: int,
    way: str,
    read: Callable[[], None],
    times: int,
    server: Server,
    store: list[str],
) -> Row:
    for _ in range(2):
        read()
    load = os.getloadavg()[0]
    spent = []
    server_cpu, client_cpu = _cpu(server, store), time.process_time()
    for _ in range(times):
        began = time.perf_counter()
        read()
        spent.append((time.perf_counter() - began) * 1000)
    client_cpu = (time.process_time() - client_cpu) * 1000 / times
    server_cpu = (_cpu(server, store) - server_cpu) * 1000 / times
    spent.sort()
    median = statistics.median(spent)
    p90 = spent[min(len(spent) - 1, int(len(spent) * 0.9))]
    target = TARGET_MS[run]
    return Row(engine, run, points, way, times, round(median, 2), round(spent[0], 2),
               round(p90, 2), target, median <= target, load, os.getloadavg()[0],
               round(server_cpu, 2), round(client_cpu, 2))  # fmt: skip


def markdown(rows: list[Row]) -> str:
    lines = [
        "| engine | points | way | median ms | fastest | p90 | target | met | server CPU ms "
        "| client CPU ms | load 1-min |",
        "|---|---:|---|---:|---:|---:|---:|---|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.engine} | {r.points:,} | {r.way} | {r.median_ms:.1f} | {r.fastest_ms:.1f} "
            f"| {r.p90_ms:.1f} | {r.target_ms:.0f} | {'yes' if r.met else 'MISS'} "
            f"| {r.server_cpu_ms:.1f} | {r.client_cpu_ms:.1f} "
            f"| {r.load_before:.1f}→{r.load_after:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--repeat", type=int, default=30, help="timed reads of 25k points")
    parser.add_argument("--pg-url", default=os.environ.get("TUNEPLANE_TEST_PG_URL", DEFAULT_PG_URL))
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    engines = ("sqlite", "postgresql") if args.engine == "both" else (args.engine,)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="tp-bulk-") as workdir:
        for engine in engines:
            with engine_store(engine, Path(workdir), args.pg_url) as (store, data_dir):
                server = Server(store, Path(workdir) / f"{engine}.log", secrets.token_hex(8))
                try:
                    key = (data_dir / "admin.key").read_text().strip()
                    seed(server, key)
                    rows += measure(engine, server, store, key, args.repeat)
                finally:
                    server.stop()
    print()
    print(markdown(rows))
    info = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "code": served_code(),
        "postgres": postgres_version(args.pg_url) if "postgresql" in engines else None,
    }
    print(json.dumps(info))
    if args.json is not None:
        args.json.write_text(json.dumps({**info, "rows": [asdict(r) for r in rows]}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
