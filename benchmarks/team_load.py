"""What a team's deployment carries, on one real ``tuneplane serve`` process: many runs
reporting at once, Arena workers, open dashboards with live streams, alert rules.

For ``--duration`` seconds (60), paced as real jobs are (not as fast as possible):

* ``--runs`` runs (1,000), each its own execution attempt and keep-alive connection, send one
  SDK batch (``--series`` 8 series x ``--steps`` 4 steps) every ``--interval`` seconds (5),
  starting at random offsets;
* ``--arena`` Arena workers (32) send one ``POST /ingest`` event of 8 metrics every second,
  each to its own run;
* ``--dashboards`` open dashboards (20): each polls a run's chart (two metrics downsampled to
  1,000 buckets) every 2 s and the project's runs list every 10 s, and holds the run's live
  stream (``…/stream``) open, counting the updates it is sent;
* ``--rules`` alert rules (20) judged on every batch of the project.

It reports how much of the paced load the server kept up with (sent against scheduled, and
how late the last batches left), the latency of ingest and reads (median, p99), the live
updates received, the server's CPU and peak memory, and errors; then checks that every point
sent is stored (each run's ``point_count``).

    python benchmarks/team_load.py                       # both engines, ~4 minutes
    python benchmarks/team_load.py --engine sqlite --runs 300 --duration 30
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import secrets
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).parent))
from ingest_arena import (
    RULES_PROJECT,
    Server,
    _read_response,
    machine,
    percentile,
    rule_bodies,
    served_code,
)
from sdk_ingest import call, engine_store

PROJECT = RULES_PROJECT
INGEST_PATH = "/api/v1/ingest/scalars"
TIMEOUT_S = 60.0


@dataclass
class Tally:
    """What one kind of client saw."""

    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    scheduled: int = 0
    sent: int = 0
    lateness: list[float] = field(default_factory=list)

    def row(self) -> str:
        ordered = sorted(self.latencies)
        median = percentile(ordered, 0.5) * 1000 if ordered else float("nan")
        p99 = percentile(ordered, 0.99) * 1000 if ordered else float("nan")
        late = max(self.lateness, default=0.0)
        return (
            f"{self.sent}/{self.scheduled} sent, median {median:.1f} ms, p99 {p99:.1f} ms, "
            f"latest start {late:.2f} s behind, {len(self.errors)} errors"
        )


@dataclass
class Setup:
    host: str
    port: int
    key: str
    tokens: dict[str, str]
    secret: str
    args: argparse.Namespace


def _post(host: str, path: str, credential: str, body: bytes) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {credential}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body


def _get(host: str, path: str, key: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n\r\n".encode()


async def _exchange(
    connection: tuple[asyncio.StreamReader, asyncio.StreamWriter], request: bytes, tally: Tally
) -> None:
    began = time.perf_counter()
    async with asyncio.timeout(TIMEOUT_S):
        connection[1].write(request)
        status, body, _ = await _read_response(connection[0])
    tally.latencies.append(time.perf_counter() - began)
    if status != 200:
        tally.errors.append(f"HTTP {status}: {body[:200]!r}")


async def _paced(
    requests: list[bytes], interval: float, until: float, setup: Setup, tally: Tally
) -> None:
    """Send ``requests`` in turn every ``interval`` seconds from a random offset until
    ``until``, on one keep-alive connection; a start later than its slot is recorded. A
    connection the server closed while idle (its keep-alive timeout) is opened again and
    the request sent once more, as HTTP clients do."""
    connection = await asyncio.open_connection(setup.host, setup.port)
    slot = time.perf_counter() + random.uniform(0, interval)
    index = 0
    while slot < until and index < len(requests):
        tally.scheduled += 1
        await asyncio.sleep(max(0.0, slot - time.perf_counter()))
        tally.lateness.append(time.perf_counter() - slot)
        for tried in range(2):
            try:
                await _exchange(connection, requests[index], tally)
            except (OSError, EOFError, ValueError, TimeoutError) as exc:
                connection[1].close()
                connection = await asyncio.open_connection(setup.host, setup.port)
                if tried:
                    tally.errors.append(repr(exc))
                continue
            tally.sent += 1
            break
        index += 1
        slot += interval
    connection[1].close()


def _run_batches(setup: Setup, run: str, batches: int) -> list[bytes]:
    a = setup.args
    address = f"{setup.host}:{setup.port}"
    names = [f"train/m{i}" for i in range(a.series)]
    requests = []
    for batch in range(batches):
        steps = list(range(batch * a.steps, (batch + 1) * a.steps))
        body = {"series": [{"name": n, "steps": steps, "values": [random.random()] * len(steps)}
                           for n in names]}  # fmt: skip
        requests.append(_post(address, INGEST_PATH, setup.tokens[run], orjson.dumps(body)))
    return requests


def _arena_events(setup: Setup, worker: int, count: int) -> list[bytes]:
    address = f"{setup.host}:{setup.port}"
    requests = []
    for step in range(count):
        metrics = {f"arena/m{i}": random.random() for i in range(8)}
        event = {"project": PROJECT, "run": f"arena-{worker:02d}", "step": step,
                 "log_id": f"e{step}", "metrics": metrics}  # fmt: skip
        requests.append(_post(address, "/ingest", setup.secret, orjson.dumps({"logs": [event]})))
    return requests


async def _stream(setup: Setup, run: str, until: float, updates: list[int]) -> None:
    """Hold a run's live stream open, counting the ``event:`` lines it is sent."""
    reader, writer = await asyncio.open_connection(setup.host, setup.port)
    path = f"/api/v1/projects/{PROJECT}/runs/{run}/stream"
    writer.write(_get(f"{setup.host}:{setup.port}", path, setup.key))
    seen = 0
    with contextlib.suppress(TimeoutError, OSError, asyncio.IncompleteReadError):
        async with asyncio.timeout(max(0.0, until - time.perf_counter())):
            while True:
                line = await reader.readline()
                if not line:
                    break
                seen += line.startswith(b"event:")
    updates.append(seen)
    writer.close()


async def _load(setup: Setup, tallies: dict[str, Tally], updates: list[int]) -> float:
    a = setup.args
    runs = list(setup.tokens)
    address = f"{setup.host}:{setup.port}"
    batches = int(a.duration / a.interval) + 2
    work = {run: _run_batches(setup, run, batches) for run in runs}
    arena = [_arena_events(setup, w, int(a.duration) + 2) for w in range(a.arena)]
    watched = runs[: a.dashboards]
    chart = "/api/v1/projects/{p}/runs/{r}/points?metric=train/m0&metric=train/m1&max_points=1000"
    charts = [[_get(address, chart.format(p=PROJECT, r=run), setup.key)] * 1000 for run in watched]
    listing = [_get(address, f"/api/v1/projects/{PROJECT}/runs", setup.key)] * 1000
    began = time.perf_counter()
    until = began + a.duration
    tasks = [_paced(work[run], a.interval, until, setup, tallies["sdk"]) for run in runs]
    tasks += [_paced(events, 1.0, until, setup, tallies["arena"]) for events in arena]
    tasks += [_paced(requests, 2.0, until, setup, tallies["chart"]) for requests in charts]
    tasks += [_paced(listing, 10.0, until, setup, tallies["runs list"]) for _ in watched]
    tasks += [_stream(setup, run, until + 2, updates) for run in watched]
    await asyncio.gather(*tasks)
    return time.perf_counter() - began


def _sample_server(server: Server, until: float, peak: list[int]) -> None:
    while time.monotonic() < until and server.process.poll() is None:
        status = Path(f"/proc/{server.process.pid}/status").read_text()
        rss = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS"))
        peak[0] = max(peak[0], rss)
        time.sleep(0.5)


def _set_up(server: Server, key: str, args: argparse.Namespace) -> dict[str, str]:
    tokens = {}
    started = time.perf_counter()
    for i in range(args.runs):
        run = f"job-{i:04d}"
        call(server, "POST", f"/api/v1/projects/{PROJECT}/runs", key, {"run": run})
        attempt = call(server, "POST", f"/api/v1/projects/{PROJECT}/runs/{run}/attempts", key)
        tokens[run] = attempt["token"]
        if i % 100 == 99:
            print(f"  {i + 1}/{args.runs} runs made", flush=True)
    # The evaluation-drop rule names a baseline run.
    call(server, "POST", f"/api/v1/projects/{PROJECT}/runs", key, {"run": "seed"})
    rules = f"/api/v1/projects/{PROJECT}/alert-rules"
    for body in rule_bodies(args.rules):
        call(server, "POST", rules, key, body)
    print(f"  set up in {time.perf_counter() - started:.0f} s", flush=True)
    return tokens


def _stored(server: Server, key: str, tokens: dict[str, str]) -> dict[str, int]:
    """Each of the benchmark's runs' ``point_count``, read a page of 1,000 at a time."""
    found: dict[str, int] = {}
    for offset in range(0, len(tokens) + 1000, 1000):
        page = f"/api/v1/projects/{PROJECT}/runs?limit=1000&offset={offset}"
        for run in call(server, "GET", page, key):
            if run["run"] in tokens:
                found[run["run"]] = run["point_count"]
    return found


def measure(engine: str, args: argparse.Namespace) -> dict[str, object]:
    with (
        tempfile.TemporaryDirectory() as tmp,
        engine_store(engine, Path(tmp), args.pg_url) as (
            store_args,
            data_dir,
        ),
    ):
        secret = secrets.token_urlsafe(24)
        server = Server(store_args, Path(tmp) / "server.log", secret)
        try:
            key = (data_dir / "admin.key").read_text().strip()
            tokens = _set_up(server, key, args)
            setup = Setup("127.0.0.1", server.port, key, tokens, secret, args)
            tallies = {name: Tally() for name in ("sdk", "arena", "chart", "runs list")}
            updates: list[int] = []
            peak = [0]
            cpu0 = server.cpu_seconds()
            sampler = asyncio.new_event_loop()
            future = sampler.run_in_executor(
                None, _sample_server, server, time.monotonic() + args.duration + 5, peak
            )
            client0 = time.process_time()
            wall = asyncio.run(_load(setup, tallies, updates))
            cpu = server.cpu_seconds() - cpu0
            client_cpu = time.process_time() - client0
            sampler.run_until_complete(future)
            sampler.close()
            stored = _stored(server, key, tokens)
        finally:
            server.stop()
    points_per_batch = args.series * args.steps
    sent_points = tallies["sdk"].sent * points_per_batch
    missing = sent_points - sum(stored.values())
    result: dict[str, object] = {
        "engine": engine,
        "wall_s": round(wall, 1),
        "server_cpu_pct": round(100 * cpu / wall),
        "server_peak_rss_mib": round(peak[0] / 1024),
        "client_cpu_pct": round(100 * client_cpu / wall),
        "load_average": Path("/proc/loadavg").read_text().split()[0],
        "points_per_s": round(sent_points / wall),
        "live_updates": sum(updates),
        "streams": len(updates),
        "points_not_stored": missing,
        **{name: tally.row() for name, tally in tallies.items()},
    }
    for name, tally in tallies.items():
        for error in tally.errors[:3]:
            print(f"  {name} error: {error}")
    return result


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--series", type=int, default=8)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--arena", type=int, default=32)
    parser.add_argument("--dashboards", type=int, default=20)
    parser.add_argument("--rules", type=int, default=20)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--json", type=Path)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(json.dumps({**machine(), **served_code()}))
    engines = ("sqlite", "postgresql") if args.engine == "both" else (args.engine,)
    results = []
    for engine in engines:
        shape = f"{args.runs} runs every {args.interval:g} s, {args.arena} Arena workers"
        extra = f"{args.dashboards} dashboards, {args.rules} rules, {args.duration:g} s"
        print(f"{engine}: {shape}, {extra}", flush=True)
        result = measure(engine, args)
        results.append(result)
        for name, value in result.items():
            print(f"  {name}: {value}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0 if all(r["points_not_stored"] == 0 for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
