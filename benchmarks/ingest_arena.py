"""Arena ingest throughput: ``POST /ingest`` against a real ``tuneplane serve`` process.

What it measures, for each engine (SQLite, PostgreSQL) and each scenario:

* ``small``: batches of 1 log event with 4 metrics (``reward``, ``loss``,
  ``arena/step_seconds``, ``train/kl``): requests/s is the figure of merit.
* ``full``: the largest batches the contract allows, 128 events x 128 metrics (16,384 points,
  kept under the 256 KiB body limit): points/s is the figure of merit.

Every scenario is sent by ``--workers`` concurrent clients (32 by default), each on its own
keep-alive HTTP/1.1 connection and its own run (``<scenario>-w00`` … in project ``bench``),
so a run's steps arrive in order and its ``log_id`` values (``e<step>``) are unique. Request
bodies are built before the clock starts and the client is a lean asyncio loop writing raw
HTTP, so it takes as little CPU as possible from the server on a small machine. Any non-200
answer or connection error counts as an error.

After the load, every point is checked as stored: each run's ``point_count`` from
``GET /api/v1/projects/bench/runs``, and for two runs per scenario the per-metric summary
counts (``GET …/metrics``) and the line count of ``GET …/export.csv``.

Each engine gets a fresh store: a temporary data directory for SQLite, a scratch database
``tuneplane_bench_<random>`` created through ``--pg-url`` (and dropped afterwards) for
PostgreSQL.

Run it from the repository root (``pip install -e '.[test]'`` first); the default run (30,000
small and 300 full requests per engine) takes about four minutes on a 2-core machine::

    python benchmarks/ingest_arena.py                      # both engines, default sizes
    python benchmarks/ingest_arena.py --engine sqlite --small-requests 5000 --full-requests 50
    python benchmarks/ingest_arena.py --json results.json  # also write the results as JSON

The server is started as ``python -m tuneplane.cli serve``, so it imports the ``tuneplane`` of
the current directory: run the script from another checkout's root to measure that checkout.
The ``serving:`` line names the package directory and its git commit. The exit status is 1
when any request failed or any point was not found stored.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import secrets
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import orjson

from tuneplane.contract.limits import (
    ARENA_BATCH_MAX_ITEMS,
    ARENA_BODY_MAX_BYTES,
    ARENA_EVENT_MAX_METRICS,
)

PROJECT: Final = "bench"
SMALL_METRICS: Final = ("reward", "loss", "arena/step_seconds", "train/kl")
FULL_EVENTS: Final = ARENA_BATCH_MAX_ITEMS
FULL_METRICS: Final = tuple(f"m{i:03d}" for i in range(ARENA_EVENT_MAX_METRICS))
REQUEST_TIMEOUT_S: Final = 120.0
STARTUP_TIMEOUT_S: Final = 60.0
ERRORS_SHOWN: Final = 5
DEFAULT_PG_URL: Final = "postgresql://postgres@127.0.0.1:5432/test"


# --------------------------------------------------------------------------- workload


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    requests: int
    events_per_request: int
    metrics_per_event: int
    project: str = PROJECT
    #: Told apart in the results, and in run names (each round its own runs).
    label: str = ""


@dataclass(frozen=True, slots=True)
class Workload:
    """Every request of one scenario, pre-encoded, split across the workers."""

    scenario: Scenario
    runs: list[str]
    #: per worker: the full HTTP requests (head and body) it sends, in order
    requests: list[list[bytes]]
    #: per run: the points its requests carry
    points_per_run: dict[str, int]
    max_body_bytes: int

    @property
    def points(self) -> int:
        return sum(self.points_per_run.values())


def _small_event(project: str, run: str, step: int, rng: random.Random) -> dict[str, Any]:
    return {
        "project": project,
        "run": run,
        "step": step,
        "log_id": f"e{step}",
        "metrics": {
            "reward": round(rng.random(), 4),
            "loss": round(2.0 / (1 + step), 6),
            "arena/step_seconds": round(rng.uniform(0.5, 3.0), 3),
            "train/kl": round(rng.random() / 100, 6),
        },
    }


def _full_event(project: str, run: str, step: int, rng: random.Random) -> dict[str, Any]:
    # Four decimals keep a value at six characters, so 128 x 128 points fit in 256 KiB.
    return {
        "project": project,
        "run": run,
        "step": step,
        "log_id": f"e{step}",
        "metrics": {name: round(rng.random(), 4) for name in FULL_METRICS},
    }


def build_workload(scenario: Scenario, workers: int, host: str, secret: str) -> Workload:
    rng = random.Random(f"{scenario.name}-{scenario.requests}-{workers}")
    workers = min(workers, scenario.requests)
    tag = scenario.label.replace(" ", "-").replace("#", "")
    runs = [f"{scenario.name}{tag}-w{w:02d}" for w in range(workers)]
    head = (
        f"POST /ingest HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {secret}\r\n"
        "Content-Type: application/json\r\nContent-Length: "
    ).encode()
    per_worker: list[list[bytes]] = [[] for _ in range(workers)]
    points_per_run = dict.fromkeys(runs, 0)
    steps = [0] * workers
    max_body = 0
    for index in range(scenario.requests):
        worker = index % workers
        run = runs[worker]
        if scenario.name == "small":
            logs = [_small_event(scenario.project, run, steps[worker], rng)]
        else:
            logs = [
                _full_event(scenario.project, run, steps[worker] + e, rng)
                for e in range(FULL_EVENTS)
            ]
        steps[worker] += len(logs)
        body = orjson.dumps({"logs": logs})
        if len(body) > ARENA_BODY_MAX_BYTES:
            raise SystemExit(
                f"{scenario.name}: a body of {len(body)} bytes exceeds the "
                f"{ARENA_BODY_MAX_BYTES:,}-byte limit"
            )
        max_body = max(max_body, len(body))
        per_worker[worker].append(head + str(len(body)).encode() + b"\r\n\r\n" + body)
        points_per_run[run] += sum(len(log["metrics"]) for log in logs)
    return Workload(scenario, runs, per_worker, points_per_run, max_body)


# --------------------------------------------------------------------------- client


@dataclass(slots=True)
class LoadResult:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    points_accepted: int = 0

    def error(self, message: str) -> None:
        self.errors += 1
        if len(self.error_samples) < ERRORS_SHOWN:
            self.error_samples.append(message)


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    """Status, body and whether the server keeps the connection open."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            raise ConnectionError("server closed the connection") from None
        raise
    status_line, *header_lines = head[:-4].split(b"\r\n")
    status = int(status_line.split(b" ", 2)[1])
    length = 0
    keep_alive = True
    for line in header_lines:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"connection" and value.strip().lower() == b"close":
            keep_alive = False
        elif name == b"transfer-encoding":
            raise ValueError("chunked responses are not expected from POST /ingest")
    body = await reader.readexactly(length) if length else b""
    return status, body, keep_alive


Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def _worker(
    host: str,
    port: int,
    connection: Connection | None,
    requests: list[bytes],
    start: asyncio.Event,
    result: LoadResult,
) -> None:
    """Send ``requests`` one after another on one keep-alive connection."""
    await start.wait()
    clock = time.perf_counter
    for request in requests:
        began = clock()
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT_S):
                if connection is None:
                    connection = await asyncio.open_connection(host, port)
                connection[1].write(request)
                status, body, keep_alive = await _read_response(connection[0])
        except (
            OSError,
            EOFError,
            ValueError,
            IndexError,
            TimeoutError,
            asyncio.LimitOverrunError,
        ) as exc:
            result.error(f"connection error: {exc!r}")
            if connection is not None:
                connection[1].close()
            connection = None
            continue
        result.latencies.append(clock() - began)
        if status != 200:
            result.error(f"HTTP {status}: {body[:300].decode(errors='replace')}")
        else:
            result.points_accepted += orjson.loads(body)["points"]
        if not keep_alive:
            connection[1].close()
            connection = None
    if connection is not None:
        connection[1].close()
        with contextlib.suppress(OSError):
            await connection[1].wait_closed()


async def _load(host: str, port: int, workload: Workload) -> tuple[LoadResult, float, float]:
    """Send every request; returns the result, wall seconds and client CPU seconds.

    Connections are opened before the clock starts."""
    result = LoadResult()
    start = asyncio.Event()
    connections = await asyncio.gather(
        *(asyncio.open_connection(host, port) for _ in workload.requests)
    )
    tasks = [
        asyncio.create_task(_worker(host, port, connection, requests, start, result))
        for connection, requests in zip(connections, workload.requests, strict=True)
    ]
    cpu0, wall0 = time.process_time(), time.perf_counter()
    start.set()
    await asyncio.gather(*tasks)
    return result, time.perf_counter() - wall0, time.process_time() - cpu0


def run_load(host: str, port: int, workload: Workload) -> tuple[LoadResult, float, float]:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(_load(host, port, workload))
    return uvloop.run(_load(host, port, workload))


# --------------------------------------------------------------------------- server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def http_get(url: str, timeout: float = 600.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def process_cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of a process and its reaped children, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


class Server:
    """A ``tuneplane serve`` process on a free port, its output in a log file."""

    def __init__(self, store_args: list[str], log_path: Path, secret: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.secret = secret
        self.data_dir = Path(store_args[store_args.index("--data-dir") + 1])
        env = {**os.environ, "TUNEPLANE_INGEST_SECRET": secret}
        env.pop("TUNEPLANE_DATABASE_URL", None)
        env.pop("TUNEPLANE_DIR", None)
        command = [
            sys.executable,
            "-m",
            "tuneplane.cli",
            "serve",
            *store_args,
            "--port",
            str(self.port),
            "--log-level",
            "warning",
        ]
        self._log = log_path.open("wb")
        self.process = subprocess.Popen(command, env=env, stdout=self._log, stderr=self._log)
        self._wait_healthy()

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"server exited at startup:\n{self.log_text()}")
            with contextlib.suppress(OSError):
                if http_get(f"{self.base}/healthz", timeout=2)[0] == 200:
                    return
            time.sleep(0.1)
        self.stop()
        raise SystemExit(f"server did not answer /healthz in {STARTUP_TIMEOUT_S:.0f}s")

    def get_json(self, path: str) -> Any:
        status, body = http_get(self.base + path)
        if status != 200:
            raise RuntimeError(f"GET {path}: HTTP {status}: {body[:300]!r}")
        return orjson.loads(body)

    def cpu_seconds(self) -> float:
        return process_cpu_seconds(self.process.pid)

    def log_text(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


@contextlib.contextmanager
def sqlite_store(workdir: Path) -> Iterator[list[str]]:
    yield ["--data-dir", str(workdir / "sqlite-data")]


@contextlib.contextmanager
def postgres_store(admin_url: str) -> Iterator[list[str]]:
    import psycopg
    from psycopg import sql
    from sqlalchemy.engine import make_url

    name = f"tuneplane_bench_{secrets.token_hex(4)}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    try:
        yield ["--database-url", url]
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


# --------------------------------------------------------------------------- verification


def verify(server: Server, workload: Workload, accepted: int) -> list[str]:
    """Mismatches between what was sent and what the server stored (empty: all stored)."""
    problems: list[str] = []
    if accepted != workload.points:
        problems.append(f"responses accepted {accepted} points of {workload.points} sent")
    project = workload.scenario.project
    stored = {
        run["run"]: run["point_count"]
        for run in server.get_json(f"/api/v1/projects/{project}/runs")
    }
    for run, sent in workload.points_per_run.items():
        if stored.get(run) != sent:
            problems.append(f"run {run}: point_count {stored.get(run)}, sent {sent}")
    for run in sorted({workload.runs[0], workload.runs[-1]}):
        sent = workload.points_per_run[run]
        path = f"/api/v1/projects/{project}/runs/{run}"
        summary_total = sum(m["count"] for m in server.get_json(f"{path}/metrics"))
        if summary_total != sent:
            problems.append(f"run {run}: metric summaries count {summary_total}, sent {sent}")
        status, body = http_get(server.base + f"{path}/export.csv")
        lines = body.count(b"\n") - 1 if status == 200 else -1  # less the header line
        if lines != sent:
            problems.append(
                f"run {run}: export.csv has {lines} points (HTTP {status}), sent {sent}"
            )
    return problems


# --------------------------------------------------------------------------- reporting


@dataclass(frozen=True, slots=True)
class Row:
    engine: str
    scenario: str
    workers: int
    requests: int
    events_per_request: int
    metrics_per_event: int
    max_body_bytes: int
    errors: int
    elapsed_s: float
    requests_per_s: float
    points_accepted: int
    points_per_s: float
    p50_ms: float
    p99_ms: float
    server_cpu_percent: float
    server_cpu_ms_per_request: float
    client_cpu_percent: float
    verified: bool
    problems: list[str]
    error_samples: list[str]


def percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return float("nan")
    rank = max(0, min(len(sorted_values) - 1, round(fraction * len(sorted_values)) - 1))
    return sorted_values[rank]


def run_scenario(engine: str, server: Server, scenario: Scenario, workers: int) -> Row:
    host = "127.0.0.1"
    workload = build_workload(scenario, workers, f"{host}:{server.port}", server.secret)
    workers = len(workload.requests)
    print(
        f"  {scenario.name}: {scenario.requests} requests of {scenario.events_per_request} "
        f"event(s) x {scenario.metrics_per_event} metrics (largest body "
        f"{workload.max_body_bytes:,} bytes) from {workers} workers …",
        flush=True,
    )
    cpu_before = server.cpu_seconds()
    result, elapsed, client_cpu = run_load(host, server.port, workload)
    server_cpu = server.cpu_seconds() - cpu_before
    try:
        problems = verify(server, workload, result.points_accepted)
    except (OSError, RuntimeError) as exc:
        problems = [f"verification failed: {exc}"]
    latencies = sorted(result.latencies)
    row = Row(
        engine=engine,
        scenario=scenario.name + scenario.label,
        workers=workers,
        requests=scenario.requests,
        events_per_request=scenario.events_per_request,
        metrics_per_event=scenario.metrics_per_event,
        max_body_bytes=workload.max_body_bytes,
        errors=result.errors,
        elapsed_s=elapsed,
        requests_per_s=scenario.requests / elapsed,
        points_accepted=result.points_accepted,
        points_per_s=result.points_accepted / elapsed,
        p50_ms=percentile(latencies, 0.50) * 1000,
        p99_ms=percentile(latencies, 0.99) * 1000,
        server_cpu_percent=100 * server_cpu / elapsed,
        server_cpu_ms_per_request=1000 * server_cpu / scenario.requests,
        client_cpu_percent=100 * client_cpu / elapsed,
        verified=not problems,
        problems=problems,
        error_samples=result.error_samples,
    )
    print(
        f"    {row.requests_per_s:,.0f} requests/s, {row.points_per_s:,.0f} points/s, "
        f"p50 {row.p50_ms:.1f} ms, p99 {row.p99_ms:.1f} ms, {row.errors} errors, "
        f"{'verified' if row.verified else 'NOT verified'}",
        flush=True,
    )
    for sample in row.error_samples:
        print(f"    error: {sample}", flush=True)
    for problem in row.problems:
        print(f"    mismatch: {problem}", flush=True)
    return row


def machine() -> dict[str, str]:
    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
    }


def served_code() -> dict[str, str]:
    """Which tuneplane the server runs (it inherits PYTHONPATH), and its git commit."""
    found = subprocess.run(
        [sys.executable, "-c", "import tuneplane; print(tuneplane.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    package = Path(found.stdout.strip()).parent
    code = {"tuneplane": str(package)}
    git = shutil.which("git")
    if git is not None:
        head = subprocess.run(
            [git, "-C", str(package), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
        )
        if head.returncode == 0:
            status = subprocess.run(
                [git, "-C", str(package), "status", "--porcelain", "--", "."],
                capture_output=True,
                text=True,
            )
            dirty = " with uncommitted changes" if status.stdout.strip() else ""
            code["commit"] = head.stdout.strip() + dirty
    return code


def postgres_version(admin_url: str) -> str:
    import psycopg

    with psycopg.connect(admin_url) as connection:
        row = connection.execute("SHOW server_version").fetchone()
    return str(row[0]) if row else "unknown"


# --------------------------------------------------------------------------- alert rules

RULES_PROJECT: Final = "bench-rules"


def rule_bodies(count: int) -> list[dict[str, Any]]:
    """``count`` alert rules of every kind, on the small batches' series and on others, none
    of which fires on this load (cycled when more are asked for)."""
    kinds: list[dict[str, Any]] = [
        {"kind": "nan", "metric": "*loss*"},
        {"kind": "heartbeat", "seconds": 30},
        {"kind": "threshold", "metric": "reward", "op": "above", "value": 1e9},
        {"kind": "threshold", "metric": "loss", "op": "below", "value": -1e9},
        {"kind": "change", "metric": "loss", "percent": 1e6, "window": 100},
        {"kind": "change", "metric": "reward", "percent": 1e6, "window": 50},
        {"kind": "stall", "metric": "train/kl", "seconds": 3600},
        {"kind": "threshold", "metric": "train/kl", "op": "above", "value": 1e9},
        {"kind": "nan", "metric": "reward"},
        {"kind": "nan", "metric": "arena/*"},
        {"kind": "threshold", "metric": "arena/step_seconds", "op": "above", "value": 1e9},
        {"kind": "eval_drop", "points": 5, "baseline": {"run": "seed", "round_id": "val"}},
        {"kind": "threshold", "metric": "grad_norm", "op": "above", "value": 100},
        {"kind": "nan", "metric": "val/*"},
        {"kind": "change", "metric": "eval/accuracy", "percent": 20, "window": 10},
        {"kind": "stall", "metric": "throughput", "seconds": 600},
        {"kind": "threshold", "metric": "lr", "op": "below", "value": 0},
        {"kind": "nan", "metric": "m0*"},
        {"kind": "threshold", "metric": "m1*", "op": "above", "value": 1e9},
        {"kind": "change", "metric": "m12*", "percent": 1e6, "window": 1000},
    ]
    return [{**kinds[i % len(kinds)], "name": f"rule {i}"} for i in range(count)]


def http_json(server: Server, method: str, path: str, body: Any = None) -> Any:
    key = (server.data_dir / "admin.key").read_text().strip()
    request = urllib.request.Request(  # noqa: S310 - the local server
        server.base + path,
        data=None if body is None else orjson.dumps(body),
        method=method,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
        return orjson.loads(response.read())


def set_up_rules(server: Server, count: int) -> None:
    """Project ``bench`` without rules (its defaults deleted) and ``bench-rules`` with
    ``count``; each made by one batch of a run ``seed``."""
    for project, wanted in ((PROJECT, 0), (RULES_PROJECT, count)):
        log = {"project": project, "run": "seed", "step": 0, "log_id": "e0", "metrics": {"x": 1}}
        request = urllib.request.Request(  # noqa: S310 - the local server
            server.base + "/ingest",
            data=orjson.dumps({"logs": [log]}),
            headers={"Authorization": f"Bearer {server.secret}"},
        )
        urllib.request.urlopen(request, timeout=60).close()  # noqa: S310
        rules = f"/api/v1/projects/{project}/alert-rules"
        for found in http_json(server, "GET", rules)["rules"]:
            http_json(server, "DELETE", f"{rules}/{found['id']}")
        for body in rule_bodies(wanted):
            http_json(server, "POST", rules, body)
        print(f"  {project}: {len(http_json(server, 'GET', rules)['rules'])} alert rules")


def compare_rules(
    engine: str, server: Server, scenarios: list[Scenario], args: argparse.Namespace
) -> list[Row]:
    """Alternate rounds without and with rules (the order reversed every other round), on
    one server; print the server's CPU per request of each round, the means and the median
    of the rounds' paired differences. With ``--null`` neither project has a rule: the
    difference then is the benchmark's own noise."""
    count = 0 if args.null else args.rules
    set_up_rules(server, count)
    rows: list[Row] = []
    for scenario in scenarios:
        cpu: dict[str, list[float]] = {PROJECT: [], RULES_PROJECT: []}
        for round_no in range(args.rounds):
            order = (PROJECT, RULES_PROJECT) if round_no % 2 == 0 else (RULES_PROJECT, PROJECT)
            for project in order:
                rules = count if project == RULES_PROJECT else 0
                label = f" {project} {rules} rules #{round_no + 1}"
                chosen = replace(scenario, project=project, label=label)
                row = run_scenario(engine, server, chosen, args.workers)
                rows.append(row)
                cpu[project].append(row.server_cpu_ms_per_request)
                print(f"    {row.server_cpu_ms_per_request:.3f} ms server CPU per request")
        without, with_rules = (statistics.fmean(cpu[k]) for k in (PROJECT, RULES_PROJECT))
        paired = [100 * (b / a - 1) for a, b in zip(cpu[PROJECT], cpu[RULES_PROJECT], strict=True)]
        print(
            f"  {engine} {scenario.name}: server CPU per request {without:.3f} ms without "
            f"rules, {with_rules:.3f} ms with {count}: {100 * (with_rules / without - 1):+.1f}%; "
            f"rounds paired: median {statistics.median(paired):+.1f}% "
            f"({min(paired):+.1f}% to {max(paired):+.1f}%)",
            flush=True,
        )
    return rows


def markdown_table(rows: list[Row]) -> str:
    lines = [
        "| engine | scenario | requests | errors | elapsed s | requests/s | points/s "
        "| p50 ms | p99 ms | server CPU | client CPU | stored |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for r in rows:
        shape = f"{r.events_per_request}x{r.metrics_per_event}"
        lines.append(
            f"| {r.engine} | {r.scenario} ({shape}) | {r.requests:,} | {r.errors} "
            f"| {r.elapsed_s:.1f} | {r.requests_per_s:,.0f} | {r.points_per_s:,.0f} "
            f"| {r.p50_ms:.1f} | {r.p99_ms:.1f} | {r.server_cpu_percent:.0f}% "
            f"| {r.client_cpu_percent:.0f}% | {'verified' if r.verified else 'MISMATCH'} |"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--engine", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--scenario", choices=["small", "full", "both"], default="both")
    parser.add_argument("--small-requests", type=int, default=30_000, metavar="N")
    parser.add_argument("--full-requests", type=int, default=300, metavar="N")
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument(
        "--pg-url",
        default=DEFAULT_PG_URL,
        help="admin URL used to create and drop the scratch database (default: %(default)s)",
    )
    parser.add_argument(
        "--rules",
        type=int,
        default=0,
        metavar="N",
        help="alert rules: alternate rounds between a project without rules and one with N "
        "(20 in the target), then compare the server's CPU per request",
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="with --rules: rounds of each (default 3)"
    )
    parser.add_argument(
        "--null",
        action="store_true",
        help="with --rules: give neither project a rule (the comparison's own noise)",
    )
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write results as JSON")
    parser.add_argument(
        "--server-logs", type=Path, metavar="DIR", help="keep each server's full log in DIR"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    engines = ["sqlite", "postgresql"] if args.engine == "both" else [args.engine]
    scenarios = [
        Scenario("small", args.small_requests, 1, len(SMALL_METRICS)),
        Scenario("full", args.full_requests, FULL_EVENTS, len(FULL_METRICS)),
    ]
    scenarios = [s for s in scenarios if args.scenario in ("both", s.name) and s.requests > 0]
    info = machine()
    if "postgresql" in engines:
        info["postgresql"] = postgres_version(args.pg_url)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    code = served_code()
    print("machine: " + ", ".join(f"{k} {v}" for k, v in info.items()), flush=True)
    print("serving: " + ", ".join(f"{k} {v}" for k, v in code.items()), flush=True)

    rows: list[Row] = []
    server_logs: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="tuneplane-bench-") as tmp:
        workdir = Path(tmp)
        for engine in engines:
            store = sqlite_store(workdir) if engine == "sqlite" else postgres_store(args.pg_url)
            with store as store_args:
                if "--data-dir" not in store_args:  # the admin key, for the rules' API
                    store_args = [*store_args, "--data-dir", str(workdir / f"{engine}-data")]
                secret = secrets.token_urlsafe(24)
                print(f"{engine}: starting tuneplane serve {' '.join(store_args)}", flush=True)
                server = Server(store_args, workdir / f"{engine}.log", secret)
                print(f"  server pid {server.process.pid} on port {server.port}", flush=True)
                try:
                    if args.rules:
                        rows += compare_rules(engine, server, scenarios, args)
                    else:
                        for scenario in scenarios:
                            rows.append(run_scenario(engine, server, scenario, args.workers))
                finally:
                    server.stop()
                    server_logs[engine] = server.log_text()

    print()
    print(markdown_table(rows))
    print()
    for engine, log in server_logs.items():
        summary = summarize_log(log)
        if summary:
            print(f"{engine} server log, distinct messages (count x first line):")
            for line in summary:
                print(f"  {line}")
        if args.server_logs is not None:
            args.server_logs.mkdir(parents=True, exist_ok=True)
            (args.server_logs / f"{engine}.log").write_text(log)
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "started": started,
                    "machine": info,
                    "code": code,
                    "results": [asdict(r) for r in rows],
                },
                indent=2,
            )
            + "\n"
        )
        print(f"results written to {args.json}")
    ok = all(r.errors == 0 and r.verified for r in rows)
    return 0 if ok else 1


def summarize_log(log: str) -> list[str]:
    """The server log's distinct messages with their counts, tracebacks reduced to their
    last line (the exception); the startup banner is left out."""
    skipped = ("Traceback", "During handling", "The above exception")
    counts: Counter[str] = Counter()
    for line in log.splitlines():
        if not line.strip() or line[0].isspace() or line.startswith(skipped):
            continue
        if line.startswith("tuneplane ") and " on " in line:
            continue
        counts[line[:300]] += 1
    return [f"{count} x {line}" for line, count in counts.most_common(15)]


if __name__ == "__main__":
    sys.exit(main())
