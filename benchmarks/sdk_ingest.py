"""SDK ingest throughput: ``POST /api/v1/ingest/scalars`` against a real ``tuneplane serve``.

What it measures, for each engine (SQLite, PostgreSQL) and each scenario:

* ``small``: batches of 1 series x 4 points (``train/loss``, four consecutive steps), as an
  SDK that flushes often sends them: requests/s is the figure of merit.
* ``large``: the largest batch the protocol allows, 2,048 points (8 series x 256 steps):
  points/s is the figure of merit.

Every ingest write checks, inside its own transaction, that its token is still the
attempt's and that the attempt is still the run's latest (``credentials.write_as``); this
script measures what the SDK routes cost with that check, and, with ``--checkout``, against
a checkout without it.

Every scenario is sent by ``--workers`` concurrent clients (32 by default), each on its own
keep-alive HTTP/1.1 connection, its own run (``<scenario>-w00`` … in project ``bench``,
created with the admin key from the data directory's ``admin.key``) and its own execution
attempt's ingest token, so each run's steps arrive in order. Each worker sends its first
request before the clock starts (the server resolves a token once, then caches what it
names); the rest are timed. Request bodies are built before the clock starts and the client
is the lean raw-HTTP asyncio loop of ``ingest_arena.py``. Any non-200 answer or connection
error counts as an error.

After the load, every point is checked as stored: the ``points.new`` of the answers, each
run's ``point_count`` from ``GET /api/v1/projects/bench/runs``, and for the first and last
run of each scenario the summed counts of its metric summaries (``GET …/metrics``).

Each engine gets a fresh store: a temporary data directory for SQLite, a scratch database
``tuneplane_bench_<random>`` created through ``--pg-url`` (and dropped afterwards) for
PostgreSQL, whose admin key goes to a temporary ``--data-dir``.

Run it from the repository root (``pip install -e '.[test]'`` first)::

    python benchmarks/sdk_ingest.py                       # both engines, default sizes
    python benchmarks/sdk_ingest.py --engine sqlite --small-requests 5000 --large-requests 100
    python benchmarks/sdk_ingest.py --checkout /tmp/tp-before --checkout . --rounds 3

The server is started as ``python -m tuneplane.cli serve``, so it imports the ``tuneplane`` of
the current directory: run the script from another checkout's root to measure that checkout,
or name checkouts with ``--checkout`` (repeatable): the script then measures each in turn,
``--rounds`` times per engine, the order reversed every other round so a drifting machine
favours neither, and prints each checkout's median and range. The ``serving:`` line names the
package directory and git commit of each server. The exit status is 1 when any request
failed or any point was not found stored.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import secrets
import statistics
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import orjson

sys.path.insert(0, str(Path(__file__).parent))
from ingest_arena import (
    DEFAULT_PG_URL,
    REQUEST_TIMEOUT_S,
    Connection,
    LoadResult,
    Server,
    _read_response,
    machine,
    percentile,
    postgres_store,
    postgres_version,
    process_cpu_seconds,
    served_code,
    sqlite_store,
    summarize_log,
)

from tuneplane.contract.limits import INGEST_BODY_MAX_BYTES, SCALAR_BATCH_MAX_POINTS

PROJECT: Final = "bench"
INGEST_PATH: Final = "/api/v1/ingest/scalars"
LARGE_SERIES: Final = 8


# --------------------------------------------------------------------------- workload


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    requests: int
    series: int
    steps_per_series: int

    @property
    def points_per_request(self) -> int:
        return self.series * self.steps_per_series


def scenarios(small: int, large: int) -> list[Scenario]:
    return [
        Scenario("small", small, 1, 4),
        Scenario("large", large, LARGE_SERIES, SCALAR_BATCH_MAX_POINTS // LARGE_SERIES),
    ]


@dataclass(frozen=True, slots=True)
class Workload:
    """Every request of one scenario, pre-encoded, one list per worker (and run)."""

    scenario: Scenario
    runs: list[str]
    requests: list[list[bytes]]
    points_per_run: dict[str, int]
    max_body_bytes: int

    @property
    def points(self) -> int:
        return sum(self.points_per_run.values())


def _series_names(scenario: Scenario) -> list[str]:
    if scenario.series == 1:
        return ["train/loss"]
    return [f"train/m{i}" for i in range(scenario.series)]


def build_workload(scenario: Scenario, tokens: dict[str, str], host: str) -> Workload:
    rng = random.Random(f"{scenario.name}-{scenario.requests}-{len(tokens)}")
    runs = list(tokens)
    names = _series_names(scenario)
    per_worker: list[list[bytes]] = [[] for _ in runs]
    points_per_run = dict.fromkeys(runs, 0)
    width = scenario.steps_per_series
    max_body = 0
    for index in range(scenario.requests):
        worker = index % len(runs)
        first = (index // len(runs)) * width
        steps = list(range(first, first + width))
        body = orjson.dumps(
            {
                "series": [
                    {"name": name, "steps": steps, "values": [rng.random() for _ in steps]}
                    for name in names
                ]
            }
        )
        if len(body) > INGEST_BODY_MAX_BYTES:
            raise SystemExit(f"{scenario.name}: a body of {len(body)} bytes is over the limit")
        max_body = max(max_body, len(body))
        head = (
            f"POST {INGEST_PATH} HTTP/1.1\r\nHost: {host}\r\n"
            f"Authorization: Bearer {tokens[runs[worker]]}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        per_worker[worker].append(head + body)
        points_per_run[runs[worker]] += scenario.points_per_request
    return Workload(scenario, runs, per_worker, points_per_run, max_body)


# --------------------------------------------------------------------------- client


async def _send(connection: Connection, request: bytes, result: LoadResult) -> bool:
    """One request on ``connection``; False when the connection cannot be used again."""
    try:
        async with asyncio.timeout(REQUEST_TIMEOUT_S):
            connection[1].write(request)
            status, body, keep_alive = await _read_response(connection[0])
    except (OSError, EOFError, ValueError, IndexError, TimeoutError) as exc:
        result.error(f"connection error: {exc!r}")
        return False
    if status != 200:
        result.error(f"HTTP {status}: {body[:300].decode(errors='replace')}")
    else:
        result.points_accepted += orjson.loads(body)["points"]["new"]
    return keep_alive


async def _worker(
    host: str,
    port: int,
    requests: list[bytes],
    gates: tuple[asyncio.Barrier, asyncio.Event],
    result: LoadResult,
) -> None:
    """Send the first request untimed; once every worker's is answered and the clock has
    started, the others one after another, timed."""
    warm, start = gates
    connection: Connection | None = await asyncio.open_connection(host, port)
    clock = time.perf_counter
    for index, request in enumerate(requests):
        if index == 1:
            await warm.wait()
            await start.wait()
        if connection is None:
            connection = await asyncio.open_connection(host, port)
        began = clock()
        usable = await _send(connection, request, result)
        if index > 0:
            result.latencies.append(clock() - began)
        if not usable:
            connection[1].close()
            connection = None
    if len(requests) < 2:
        await warm.wait()
    if connection is not None:
        connection[1].close()
        with contextlib.suppress(OSError):
            await connection[1].wait_closed()


async def _load(
    host: str, port: int, workload: Workload, on_start: Callable[[], None]
) -> tuple[LoadResult, float, float]:
    """Send every request; returns the result, wall seconds and client CPU seconds of the
    timed part (every request after each worker's first, which is stored but not timed).
    ``on_start`` runs once the first requests are answered, before the clock starts."""
    result = LoadResult()
    gates = asyncio.Barrier(len(workload.requests) + 1), asyncio.Event()
    tasks = [
        asyncio.create_task(_worker(host, port, requests, gates, result))
        for requests in workload.requests
    ]
    await gates[0].wait()
    on_start()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    gates[1].set()
    await asyncio.gather(*tasks)
    return result, time.perf_counter() - wall0, time.process_time() - cpu0


def run_load(
    host: str, port: int, workload: Workload, on_start: Callable[[], None]
) -> tuple[LoadResult, float, float]:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(_load(host, port, workload, on_start))
    return uvloop.run(_load(host, port, workload, on_start))


# --------------------------------------------------------------------------- server


def call(server: Server, method: str, path: str, key: str, payload: Any = None) -> Any:
    """An API request with the admin key; its JSON answer."""
    data = None if payload is None else orjson.dumps(payload)
    request = urllib.request.Request(  # noqa: S310 (a local http URL)
        server.base + path,
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310
            return orjson.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise RuntimeError(f"{method} {path}: HTTP {exc.code}: {exc.read()[:300]!r}") from None


def start_runs(server: Server, key: str, scenario: Scenario, workers: int) -> dict[str, str]:
    """One run per worker, each with its first execution attempt; run name -> token."""
    tokens = {}
    for w in range(min(workers, scenario.requests)):
        run = f"{scenario.name}-w{w:02d}"
        call(server, "POST", f"/api/v1/projects/{PROJECT}/runs", key, {"run": run})
        attempt = call(server, "POST", f"/api/v1/projects/{PROJECT}/runs/{run}/attempts", key)
        tokens[run] = attempt["token"]
    return tokens


@contextlib.contextmanager
def engine_store(engine: str, workdir: Path, pg_url: str) -> Iterator[tuple[list[str], Path]]:
    """The server's store arguments and the data directory holding ``admin.key``."""
    data_dir = workdir / f"{engine}-data"
    if engine == "sqlite":
        with sqlite_store(workdir) as args:
            yield args, Path(args[1])
    else:
        with postgres_store(pg_url) as args:
            yield [*args, "--data-dir", str(data_dir)], data_dir


def database_cpu_seconds(store_args: list[str]) -> dict[int, float]:
    """CPU seconds of each PostgreSQL backend connected to the benchmark's database, by pid
    (empty for SQLite, whose work is the server process's own)."""
    if "--database-url" not in store_args:
        return {}
    import psycopg

    url = store_args[store_args.index("--database-url") + 1]
    with psycopg.connect(url) as connection:
        rows = connection.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        ).fetchall()
    seconds = {}
    for (pid,) in rows:
        with contextlib.suppress(OSError):
            seconds[pid] = process_cpu_seconds(pid)
    return seconds


# --------------------------------------------------------------------------- verification


def verify(server: Server, key: str, workload: Workload, accepted: int) -> list[str]:
    """Mismatches between what was sent and what the server stored (empty: all stored)."""
    problems: list[str] = []
    if accepted != workload.points:
        problems.append(f"responses accepted {accepted} new points of {workload.points} sent")
    stored = {
        run["run"]: run["point_count"]
        for run in call(server, "GET", f"/api/v1/projects/{PROJECT}/runs", key)
    }
    for run, sent in workload.points_per_run.items():
        if stored.get(run) != sent:
            problems.append(f"run {run}: point_count {stored.get(run)}, sent {sent}")
    for run in sorted({workload.runs[0], workload.runs[-1]}):
        sent = workload.points_per_run[run]
        summaries = call(server, "GET", f"/api/v1/projects/{PROJECT}/runs/{run}/metrics", key)
        total = sum(m["count"] for m in summaries)
        if total != sent:
            problems.append(f"run {run}: metric summaries count {total}, sent {sent}")
    return problems


# --------------------------------------------------------------------------- reporting


@dataclass(frozen=True, slots=True)
class Row:
    engine: str
    checkout: str
    commit: str
    round: int
    scenario: str
    workers: int
    requests: int
    points_per_request: int
    max_body_bytes: int
    errors: int
    elapsed_s: float
    requests_per_s: float
    points_per_s: float
    p50_ms: float
    p99_ms: float
    server_cpu_percent: float
    database_cpu_percent: float | None
    #: server and database CPU per timed request: on a shared machine, where the CPU the
    #: server gets varies from one minute to the next, the steadier measure of cost
    cpu_ms_per_request: float
    client_cpu_percent: float
    verified: bool
    problems: list[str]
    error_samples: list[str]


@dataclass(frozen=True, slots=True)
class Measure:
    """Where one scenario runs: the engine, the server and what it serves."""

    engine: str
    server: Server
    key: str
    store_args: list[str]
    code: dict[str, str]
    round: int


def run_scenario(measure: Measure, scenario: Scenario, workers: int) -> Row:
    server, host = measure.server, "127.0.0.1"
    tokens = start_runs(server, measure.key, scenario, workers)
    workload = build_workload(scenario, tokens, f"{host}:{server.port}")
    timed = scenario.requests - len(workload.requests)
    print(
        f"  {scenario.name}: {scenario.requests} requests of {scenario.series} series x "
        f"{scenario.steps_per_series} points (largest body {workload.max_body_bytes:,} "
        f"bytes) from {len(workload.requests)} workers …",
        flush=True,
    )
    before: dict[str, Any] = {}

    def on_start() -> None:
        before["server"] = server.cpu_seconds()
        before["database"] = database_cpu_seconds(measure.store_args)

    result, elapsed, client_cpu = run_load(host, server.port, workload, on_start)
    cpu_before, db_before = before["server"], before["database"]
    server_cpu = server.cpu_seconds() - cpu_before
    db_after = database_cpu_seconds(measure.store_args)
    db_cpu = sum(s - db_before.get(pid, 0.0) for pid, s in db_after.items())
    try:
        problems = verify(server, measure.key, workload, result.points_accepted)
    except (OSError, RuntimeError) as exc:
        problems = [f"verification failed: {exc}"]
    latencies = sorted(result.latencies)
    row = Row(
        engine=measure.engine,
        checkout=measure.code["tuneplane"],
        commit=measure.code.get("commit", "unknown"),
        round=measure.round,
        scenario=scenario.name,
        workers=len(workload.requests),
        requests=scenario.requests,
        points_per_request=scenario.points_per_request,
        max_body_bytes=workload.max_body_bytes,
        errors=result.errors,
        elapsed_s=elapsed,
        requests_per_s=timed / elapsed,
        points_per_s=timed * scenario.points_per_request / elapsed,
        p50_ms=percentile(latencies, 0.50) * 1000,
        p99_ms=percentile(latencies, 0.99) * 1000,
        server_cpu_percent=100 * server_cpu / elapsed,
        database_cpu_percent=100 * db_cpu / elapsed if db_after else None,
        cpu_ms_per_request=1000 * (server_cpu + db_cpu) / timed,
        client_cpu_percent=100 * client_cpu / elapsed,
        verified=not problems,
        problems=problems,
        error_samples=result.error_samples,
    )
    db = "" if row.database_cpu_percent is None else f", db CPU {row.database_cpu_percent:.0f}%"
    print(
        f"    {row.requests_per_s:,.0f} requests/s, {row.points_per_s:,.0f} points/s, "
        f"p50 {row.p50_ms:.1f} ms, p99 {row.p99_ms:.1f} ms, server CPU "
        f"{row.server_cpu_percent:.0f}%{db}, {row.cpu_ms_per_request:.3f} CPU ms/request, "
        f"{row.errors} errors, "
        f"{'verified' if row.verified else 'NOT verified'}",
        flush=True,
    )
    for line in [*(f"error: {s}" for s in row.error_samples), *row.problems]:
        print(f"    {line}", flush=True)
    return row


def markdown_table(rows: list[Row]) -> str:
    lines = [
        "| engine | commit | round | scenario | requests | errors | requests/s | points/s "
        "| p50 ms | p99 ms | server CPU | database CPU | CPU ms/request | stored |",
        "|---|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for r in rows:
        db = "" if r.database_cpu_percent is None else f"{r.database_cpu_percent:.0f}%"
        lines.append(
            f"| {r.engine} | {r.commit} | {r.round} | {r.scenario} ({r.points_per_request}) "
            f"| {r.requests:,} | {r.errors} | {r.requests_per_s:,.0f} | {r.points_per_s:,.0f} "
            f"| {r.p50_ms:.1f} | {r.p99_ms:.1f} | {r.server_cpu_percent:.0f}% | {db} "
            f"| {r.cpu_ms_per_request:.3f} "
            f"| {'verified' if r.verified else 'MISMATCH'} |"
        )
    return "\n".join(lines)


def _spread(values: list[float], digits: int) -> str:
    """The median and, in brackets, the range."""
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{mid:,.{digits}f} ({low:,.{digits}f}\N{EN DASH}{high:,.{digits}f})"


def comparison_table(rows: list[Row]) -> str:
    """Per engine, scenario and commit: medians and ranges over the rounds, and the change
    of the medians against the first commit measured."""
    lines = [
        "| engine | scenario | commit | rounds | requests/s | points/s | change "
        "| CPU ms/request | change | p50 ms | p99 ms |",
        "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    groups: dict[tuple[str, str], dict[str, list[Row]]] = {}
    for r in rows:
        groups.setdefault((r.engine, r.scenario), {}).setdefault(r.commit, []).append(r)
    for (engine, scenario), by_commit in groups.items():
        first: tuple[float, float] | None = None
        for commit, runs in by_commit.items():
            rps = [r.requests_per_s for r in runs]
            cpu = [r.cpu_ms_per_request for r in runs]
            medians = statistics.median(rps), statistics.median(cpu)
            first = first or medians
            lines.append(
                f"| {engine} | {scenario} | {commit} | {len(runs)} | {_spread(rps, 0)} "
                f"| {statistics.median(r.points_per_s for r in runs):,.0f} "
                f"| {100 * (medians[0] / first[0] - 1):+.1f}% | {_spread(cpu, 3)} "
                f"| {100 * (medians[1] / first[1] - 1):+.1f}% "
                f"| {statistics.median(r.p50_ms for r in runs):.1f} "
                f"| {statistics.median(r.p99_ms for r in runs):.1f} |"
            )
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--engine", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--scenario", choices=["small", "large", "both"], default="both")
    parser.add_argument("--small-requests", type=int, default=20_000, metavar="N")
    parser.add_argument("--large-requests", type=int, default=2_000, metavar="N")
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument(
        "--checkout",
        type=Path,
        action="append",
        metavar="DIR",
        help="a checkout's root to serve from (repeatable; default: the current directory)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="measures per checkout and engine")
    parser.add_argument(
        "--pg-url",
        default=DEFAULT_PG_URL,
        help="admin URL used to create and drop the scratch database (default: %(default)s)",
    )
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write results as JSON")
    return parser.parse_args(argv)


def measure_engine(
    engine: str, checkout: Path, round_: int, args: argparse.Namespace, workdir: Path
) -> tuple[list[Row], str]:
    """Every scenario on a fresh store of ``engine``, served from ``checkout``."""
    os.chdir(checkout)
    code = served_code()
    print("serving: " + ", ".join(f"{k} {v}" for k, v in code.items()), flush=True)
    chosen = [s for s in scenarios(args.small_requests, args.large_requests) if s.requests > 0]
    chosen = [s for s in chosen if args.scenario in ("both", s.name)]
    rows: list[Row] = []
    with (
        tempfile.TemporaryDirectory(dir=workdir) as tmp,
        engine_store(engine, Path(tmp), args.pg_url) as (store_args, data_dir),
    ):
        print(f"{engine}: starting tuneplane serve {' '.join(store_args)}", flush=True)
        server = Server(store_args, Path(tmp) / "server.log", secrets.token_urlsafe(24))
        try:
            key = (data_dir / "admin.key").read_text().strip()
            measure = Measure(engine, server, key, store_args, code, round_)
            rows.extend(run_scenario(measure, s, args.workers) for s in chosen)
        finally:
            server.stop()
        return rows, server.log_text()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    engines = ["sqlite", "postgresql"] if args.engine == "both" else [args.engine]
    checkouts = [c.resolve() for c in (args.checkout or [Path.cwd()])]
    out = args.json.resolve() if args.json is not None else None
    here = Path.cwd()
    info = machine()
    if "postgresql" in engines:
        info["postgresql"] = postgres_version(args.pg_url)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    print("machine: " + ", ".join(f"{k} {v}" for k, v in info.items()), flush=True)

    rows: list[Row] = []
    logs: list[str] = []
    with tempfile.TemporaryDirectory(prefix="tuneplane-bench-") as tmp:
        for round_ in range(1, args.rounds + 1):
            order = checkouts if round_ % 2 else checkouts[::-1]
            for engine in engines:
                for checkout in order:
                    measured, log = measure_engine(engine, checkout, round_, args, Path(tmp))
                    rows.extend(measured)
                    logs.append(log)
    os.chdir(here)

    print()
    print(markdown_table(rows))
    if args.rounds > 1 or len(checkouts) > 1:
        print()
        print(comparison_table(rows))
    summary = summarize_log("\n".join(logs))
    if summary:
        print("\nserver logs, distinct messages (count x first line):")
        for line in summary:
            print(f"  {line}")
    if out is not None:
        document = {
            "started": started,
            "machine": info,
            "results": [asdict(r) for r in rows],
        }
        out.write_text(json.dumps(document, indent=2) + "\n")
        print(f"results written to {out}")
    return 0 if all(r.errors == 0 and r.verified for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
