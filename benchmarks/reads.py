"""Read throughput and latency against a real ``tuneplane serve``: what the access guard
costs the read routes.

Every read route runs the guard (``server/access.py``: a worker-thread hop, a connection,
resolving the caller, the project's facts) before its own work; before commit ``9b14751``
reads ran nothing of the kind. This script measures three reads of a public project,
for each engine (SQLite, PostgreSQL):

* ``run``: ``GET /api/v1/projects/{p}/runs/{r}``, a small read where the guard dominates;
* ``chart``: ``GET …/runs/{r}/points?metric=train/loss&max_points=1000`` of a run holding
  200,000 points of that metric (a chart's read);
* ``projects``: ``GET /api/v1/projects``.

Each read is sent by two callers: ``anonymous`` (no credential) and ``key``
(``Authorization: Bearer`` the admin key from the data directory's ``admin.key``). A checkout
before the guard ignores the key on reads, so there the two callers cost the same.

The project (``bench``) is made through the Arena route ``POST /ingest``, which creates public
projects before and after the guard: the 200,000-point run (``long``, one metric, in batches
of 128 events) and four small runs (``short-0`` … ``short-3``, 4 metrics x 256 steps). Each
run's ``point_count`` is checked before any read is timed.

Every read is sent by ``--workers`` concurrent clients (8 by default), each on its own
keep-alive HTTP/1.1 connection (the raw-HTTP asyncio client of ``ingest_arena.py``); each
client sends ``--warmup`` requests before the clock starts. Any answer but a 200 counts as an
error, and the first answer of every client and every 64th after it is decoded and checked
(the run's name and point count, a chart of at most 1,000 buckets over all 200,000 points,
a list holding the project). Server CPU (and, on PostgreSQL, the CPU of the database's
backends) over the timed part, per request, is the steadier measure on a shared machine.

Run it from the repository root (``pip install -e '.[test]'`` first)::

    python benchmarks/reads.py                               # both engines, this checkout
    python benchmarks/reads.py --engine sqlite --requests 2000
    git worktree add /tmp/tp-reads-before c1ad058
    python benchmarks/reads.py --checkout /tmp/tp-reads-before --checkout . --rounds 3

As in ``sdk_ingest.py``, ``--checkout`` (repeatable) names the checkouts to serve from; each
is measured in turn ``--rounds`` times per engine, the order reversed every other round, and
the comparison table gives each checkout's median and range and the change against the
first checkout named. The exit status is 1 when any request failed or any answer was wrong.
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
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import orjson

sys.path.insert(0, str(Path(__file__).parent))
import ingest_arena
from ingest_arena import (
    DEFAULT_PG_URL,
    REQUEST_TIMEOUT_S,
    Connection,
    Server,
    _read_response,
    http_get,
    http_json,
    machine,
    percentile,
    postgres_version,
    served_code,
    summarize_log,
)
from sdk_ingest import database_cpu_seconds, engine_store

PROJECT: Final = "bench"
LONG_RUN: Final = "long"
LONG_METRIC: Final = "train/loss"
LONG_POINTS: Final = 200_000
SHORT_RUNS: Final = tuple(f"short-{i}" for i in range(4))
SHORT_METRICS: Final = ("reward", "loss", "arena/step_seconds", "train/kl")
SHORT_STEPS: Final = 256
BATCH_EVENTS: Final = 128
CHART_BUCKETS: Final = 1000
CHECK_EVERY: Final = 64
ERRORS_SHOWN: Final = 5


# --------------------------------------------------------------------------- seeding


def _arena_request(host: str, secret: str, logs: list[dict[str, Any]]) -> bytes:
    body = orjson.dumps({"logs": logs})
    head = (
        f"POST /ingest HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {secret}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def seed(server: Server) -> list[str]:
    """The project's runs, written through ``POST /ingest``; mismatches in what was stored
    (empty: everything arrived)."""
    rng = random.Random("reads")
    host = f"127.0.0.1:{server.port}"

    def batches(run: str, steps: int, metrics: tuple[str, ...]) -> list[bytes]:
        out = []
        for first in range(0, steps, BATCH_EVENTS):
            logs = [
                {
                    "project": PROJECT,
                    "run": run,
                    "step": step,
                    "log_id": f"e{step}",
                    "metrics": {name: round(rng.random(), 4) for name in metrics},
                }
                for step in range(first, min(steps, first + BATCH_EVENTS))
            ]
            out.append(_arena_request(host, server.secret, logs))
        return out

    # One worker per run, so each run's steps arrive in order.
    requests = [batches(LONG_RUN, LONG_POINTS, (LONG_METRIC,))]
    requests += [batches(run, SHORT_STEPS, SHORT_METRICS) for run in SHORT_RUNS]
    expected = {LONG_RUN: LONG_POINTS, **dict.fromkeys(SHORT_RUNS, SHORT_STEPS * 4)}
    scenario = ingest_arena.Scenario("seed", sum(map(len, requests)), BATCH_EVENTS, 1)
    workload = ingest_arena.Workload(
        scenario, [LONG_RUN, *SHORT_RUNS], requests, expected, max(map(len, requests[0]))
    )
    result, elapsed, _ = ingest_arena.run_load("127.0.0.1", server.port, workload)
    problems = [f"seeding: {sample}" for sample in result.error_samples]
    stored = {r["run"]: r["point_count"] for r in server.get_json(_runs_path())}
    for run, sent in expected.items():
        if stored.get(run) != sent:
            problems.append(f"seeding: run {run} holds {stored.get(run)} points, sent {sent}")
    print(
        f"  seeded {sum(expected.values()):,} points in {len(expected)} runs "
        f"({scenario.requests} POST /ingest, {elapsed:.1f} s)",
        flush=True,
    )
    return problems


def _runs_path() -> str:
    return f"/api/v1/projects/{PROJECT}/runs"


# --------------------------------------------------------------------------- reads


Check = Callable[[Any], str | None]


def _check_run(answer: Any) -> str | None:
    if answer.get("run") != LONG_RUN or answer.get("point_count") != LONG_POINTS:
        return f"run answer names {answer.get('run')!r} with {answer.get('point_count')} points"
    return None


def _check_chart(answer: Any) -> str | None:
    charts = answer.get("metrics") or []
    if len(charts) != 1 or answer.get("missing"):
        return f"chart answer holds {len(charts)} metrics, missing {answer.get('missing')}"
    chart = charts[0]
    buckets = chart.get("buckets", [])
    counted = sum(b["count"] for b in buckets)
    if not 0 < len(buckets) <= CHART_BUCKETS or chart.get("total_points") != LONG_POINTS:
        return f"chart of {len(buckets)} buckets over {chart.get('total_points')} points"
    if counted != LONG_POINTS or not chart.get("downsampled"):
        return f"chart buckets count {counted} points, downsampled {chart.get('downsampled')}"
    return None


def _check_projects(answer: Any) -> str | None:
    mine = [p for p in answer if p.get("project") == PROJECT]
    if len(mine) != 1 or mine[0].get("run_count") != 1 + len(SHORT_RUNS):
        return f"project list {answer!r:.200}"
    return None


@dataclass(frozen=True, slots=True)
class Read:
    name: str
    path: str
    check: Check


READS: Final = (
    Read("run", f"{_runs_path()}/{LONG_RUN}", _check_run),
    Read(
        "chart",
        f"{_runs_path()}/{LONG_RUN}/points?metric={LONG_METRIC}&max_points={CHART_BUCKETS}",
        _check_chart,
    ),
    Read("projects", "/api/v1/projects", _check_projects),
)
CALLERS: Final = ("anonymous", "key")


# --------------------------------------------------------------------------- client


@dataclass(slots=True)
class ReadResult:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    samples: list[str] = field(default_factory=list)

    def error(self, message: str) -> None:
        self.errors += 1
        if len(self.samples) < ERRORS_SHOWN:
            self.samples.append(message)


async def _get(connection: Connection, request: bytes, check: Check | None) -> str | None:
    """One request; what was wrong with its answer (None: a 200, sane when checked)."""
    async with asyncio.timeout(REQUEST_TIMEOUT_S):
        connection[1].write(request)
        status, body, keep_alive = await _read_response(connection[0])
    if status != 200:
        return f"HTTP {status}: {body[:300].decode(errors='replace')}"
    if not keep_alive:
        return "the server closed a keep-alive connection"
    return None if check is None else check(orjson.loads(body))


@dataclass(frozen=True, slots=True)
class Plan:
    request: bytes
    check: Check
    warmup: int
    timed: int


async def _client(
    host: str,
    port: int,
    plan: Plan,
    gates: tuple[asyncio.Barrier, asyncio.Event],
    result: ReadResult,
) -> None:
    """``plan.warmup`` untimed requests, then, once every client is warm and the clock has
    started, ``plan.timed`` timed ones, on one keep-alive connection (a new one after a
    connection error, so every client reaches the gate)."""
    warm, start = gates
    connection: Connection | None = None
    clock = time.perf_counter
    for index in range(plan.warmup + plan.timed):
        if index == plan.warmup:
            await warm.wait()
            await start.wait()
        check = plan.check if (index - plan.warmup) % CHECK_EVERY == 0 else None
        began = clock()
        try:
            if connection is None:
                connection = await asyncio.open_connection(host, port)
            problem = await _get(connection, plan.request, check)
        except (OSError, EOFError, ValueError, IndexError, TimeoutError) as exc:
            problem = f"connection error: {exc!r}"
            if connection is not None:
                connection[1].close()
            connection = None
        if index >= plan.warmup:
            result.latencies.append(clock() - began)
        if problem is not None:
            result.error(problem)
    if plan.warmup >= plan.warmup + plan.timed:
        await warm.wait()
    if connection is not None:
        connection[1].close()
        with contextlib.suppress(OSError):
            await connection[1].wait_closed()


async def _load(
    host: str, port: int, plans: list[Plan], on_start: Callable[[], None]
) -> tuple[ReadResult, float, float]:
    result = ReadResult()
    gates = asyncio.Barrier(len(plans) + 1), asyncio.Event()
    tasks = [asyncio.create_task(_client(host, port, p, gates, result)) for p in plans]
    await gates[0].wait()
    on_start()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    gates[1].set()
    await asyncio.gather(*tasks)
    return result, time.perf_counter() - wall0, time.process_time() - cpu0


def run_load(
    port: int, plans: list[Plan], on_start: Callable[[], None]
) -> tuple[ReadResult, float, float]:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(_load("127.0.0.1", port, plans, on_start))
    return uvloop.run(_load("127.0.0.1", port, plans, on_start))


# --------------------------------------------------------------------------- measuring


@dataclass(frozen=True, slots=True)
class Row:
    engine: str
    checkout: str
    commit: str
    round: int
    read: str
    caller: str
    workers: int
    requests: int
    errors: int
    elapsed_s: float
    requests_per_s: float
    p50_ms: float
    p99_ms: float
    server_cpu_percent: float
    database_cpu_percent: float | None
    #: server and database CPU per timed request: the steadier measure on a shared machine
    cpu_ms_per_request: float
    client_cpu_percent: float
    error_samples: list[str]
    #: "private" when ``--private`` made the project so; "public" otherwise (and where the
    #: checkout has no private projects)
    visibility: str = "public"


@dataclass(frozen=True, slots=True)
class Measure:
    engine: str
    server: Server
    key: str
    store_args: list[str]
    code: dict[str, str]
    round: int
    visibility: str = "public"


def measure_read(measure: Measure, read: Read, caller: str, args: argparse.Namespace) -> Row:
    server = measure.server
    auth = f"Authorization: Bearer {measure.key}\r\n" if caller == "key" else ""
    request = f"GET {read.path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n{auth}\r\n"
    per_client = max(1, args.requests // args.workers)
    if read.name == "chart":
        per_client = max(1, per_client // args.chart_divisor)
    plan = Plan(request.encode(), read.check, args.warmup, per_client)
    before: dict[str, Any] = {}

    def on_start() -> None:
        before["server"] = server.cpu_seconds()
        before["database"] = database_cpu_seconds(measure.store_args)

    result, elapsed, client_cpu = run_load(server.port, [plan] * args.workers, on_start)
    server_cpu = server.cpu_seconds() - before["server"]
    db_after = database_cpu_seconds(measure.store_args)
    db_cpu = sum(s - before["database"].get(pid, 0.0) for pid, s in db_after.items())
    timed = len(result.latencies)
    latencies = sorted(result.latencies)
    row = Row(
        engine=measure.engine,
        checkout=measure.code["tuneplane"],
        commit=measure.code.get("commit", "unknown"),
        round=measure.round,
        read=read.name,
        caller=caller,
        workers=args.workers,
        requests=timed,
        errors=result.errors,
        elapsed_s=elapsed,
        requests_per_s=timed / elapsed,
        p50_ms=percentile(latencies, 0.50) * 1000,
        p99_ms=percentile(latencies, 0.99) * 1000,
        server_cpu_percent=100 * server_cpu / elapsed,
        database_cpu_percent=100 * db_cpu / elapsed if db_after else None,
        cpu_ms_per_request=1000 * (server_cpu + db_cpu) / max(1, timed),
        client_cpu_percent=100 * client_cpu / elapsed,
        error_samples=result.samples,
        visibility=measure.visibility,
    )
    print(
        f"  {read.name:8} {caller:9} {row.requests_per_s:8,.0f} requests/s, "
        f"p50 {row.p50_ms:6.2f} ms, p99 {row.p99_ms:6.2f} ms, "
        f"{row.cpu_ms_per_request:.3f} CPU ms/request, {row.errors} errors",
        flush=True,
    )
    for sample in row.error_samples:
        print(f"    error: {sample}", flush=True)
    return row


def measure_engine(
    engine: str, checkout: Path, round_: int, args: argparse.Namespace, workdir: Path
) -> tuple[list[Row], list[str], str]:
    """Every read and caller on a fresh, seeded store of ``engine``, served from
    ``checkout``; the rows, seeding problems and the server's log."""
    os.chdir(checkout)
    code = served_code()
    print("serving: " + ", ".join(f"{k} {v}" for k, v in code.items()), flush=True)
    with (
        tempfile.TemporaryDirectory(dir=workdir) as tmp,
        engine_store(engine, Path(tmp), args.pg_url) as (store_args, data_dir),
    ):
        print(f"{engine}: round {round_}, tuneplane serve {' '.join(store_args)}", flush=True)
        server = Server(store_args, Path(tmp) / "server.log", secrets.token_urlsafe(24))
        try:
            problems = seed(server)
            status, _ = http_get(f"{server.base}{READS[0].path}")
            if status != 200:
                problems.append(f"an anonymous read of the public project: HTTP {status}")
            key = (data_dir / "admin.key").read_text().strip()
            visibility = make_private(server) if args.private else "public"
            measure = Measure(engine, server, key, store_args, code, round_, visibility)
            callers = ("key",) if args.private else CALLERS
            rows = (
                []
                if problems
                else [
                    measure_read(measure, read, caller, args)
                    for read in READS
                    if args.read is None or read.name in args.read
                    for caller in callers
                ]
            )
        finally:
            server.stop()
        return rows, problems, server.log_text()


def make_private(server: Server) -> str:
    """Make the project private (read by the key only); a checkout from before private
    projects answers 404 and its project stays public."""
    try:
        http_json(server, "PATCH", f"/api/v1/projects/{PROJECT}/access", {"visibility": "private"})
    except urllib.error.HTTPError as exc:
        if exc.code not in (404, 405):
            raise
        print("  this checkout has no private projects: the project stays public", flush=True)
        return "public"
    status, _ = http_get(f"{server.base}{READS[0].path}")
    if status != 404:
        raise RuntimeError(f"an anonymous read of the private project answered {status}")
    print(f"  project {PROJECT} made private", flush=True)
    return "private"


# --------------------------------------------------------------------------- reporting


def markdown_table(rows: list[Row]) -> str:
    lines = [
        "| engine | commit | round | read | caller | requests | errors | requests/s "
        "| p50 ms | p99 ms | server CPU | database CPU | CPU ms/request |",
        "|---|---|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        db = "" if r.database_cpu_percent is None else f"{r.database_cpu_percent:.0f}%"
        lines.append(
            f"| {r.engine} | {r.commit} | {r.round} | {r.read} | {r.caller} | {r.requests:,} "
            f"| {r.errors} | {r.requests_per_s:,.0f} | {r.p50_ms:.2f} | {r.p99_ms:.2f} "
            f"| {r.server_cpu_percent:.0f}% | {db} | {r.cpu_ms_per_request:.3f} |"
        )
    return "\n".join(lines)


def _spread(values: list[float], digits: int) -> str:
    """The median and, in brackets, the range."""
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{mid:,.{digits}f} ({low:,.{digits}f}\N{EN DASH}{high:,.{digits}f})"


def comparison_table(rows: list[Row]) -> str:
    """Per engine, read and caller: each commit's medians and ranges over the rounds, and
    the change of the medians against the first commit measured."""
    lines = [
        "| engine | read | caller | commit | rounds | requests/s | change | p50 ms | p99 ms "
        "| CPU ms/request | change |",
        "|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    groups: dict[tuple[str, str, str], dict[str, list[Row]]] = {}
    for r in rows:
        groups.setdefault((r.engine, r.read, r.caller), {}).setdefault(r.commit, []).append(r)
    for (engine, read, caller), by_commit in groups.items():
        first: tuple[float, float] | None = None
        for commit, runs in by_commit.items():
            rps = [r.requests_per_s for r in runs]
            cpu = [r.cpu_ms_per_request for r in runs]
            medians = statistics.median(rps), statistics.median(cpu)
            first = first or medians
            lines.append(
                f"| {engine} | {read} | {caller} | {commit} | {len(runs)} | {_spread(rps, 0)} "
                f"| {100 * (medians[0] / first[0] - 1):+.1f}% "
                f"| {_spread([r.p50_ms for r in runs], 2)} "
                f"| {_spread([r.p99_ms for r in runs], 2)} | {_spread(cpu, 3)} "
                f"| {1000 * (medians[1] - first[1]):+.0f} µs |"
            )
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--engine", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument(
        "--read",
        choices=[read.name for read in READS],
        action="append",
        help="only this read (repeatable; default: all three)",
    )
    parser.add_argument(
        "--requests", type=int, default=6_000, metavar="N", help="timed requests per read"
    )
    parser.add_argument(
        "--chart-divisor",
        type=int,
        default=10,
        metavar="D",
        help="the chart read sends REQUESTS/D (it is slower)",
    )
    parser.add_argument("--warmup", type=int, default=20, metavar="N", help="per client")
    parser.add_argument("--workers", type=int, default=8, help="concurrent clients")
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
    parser.add_argument(
        "--private",
        action="store_true",
        help="make the project private after seeding and read it with the key only",
    )
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write results as JSON")
    return parser.parse_args(argv)


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
    problems: list[str] = []
    logs: list[str] = []
    with tempfile.TemporaryDirectory(prefix="tuneplane-bench-") as tmp:
        for round_ in range(1, args.rounds + 1):
            order = checkouts if round_ % 2 else checkouts[::-1]
            for engine in engines:
                for checkout in order:
                    measured, wrong, log = measure_engine(engine, checkout, round_, args, Path(tmp))
                    rows.extend(measured)
                    problems.extend(wrong)
                    logs.append(log)
    os.chdir(here)

    print()
    print(markdown_table(rows))
    if args.rounds > 1 or len(checkouts) > 1:
        print()
        print(comparison_table(rows))
    for problem in problems:
        print(f"problem: {problem}")
    summary = summarize_log("\n".join(logs))
    if summary:
        print("\nserver logs, distinct messages (count x first line):")
        for line in summary:
            print(f"  {line}")
    if out is not None:
        document = {"started": started, "machine": info, "results": [asdict(r) for r in rows]}
        out.write_text(json.dumps(document, indent=2) + "\n")
        print(f"results written to {out}")
    return 0 if rows and not problems and all(r.errors == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
