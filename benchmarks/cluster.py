"""What a team's deployment carries, on one real ``tuneplane serve`` process: many runs
reporting at once, Arena workers, open dashboards with live streams, alert rules.

For ``--duration`` seconds (60), paced as real jobs are (not as fast as possible):

* ``--runs`` runs (1,000), each its own execution attempt and keep-alive connection, log
  ``--series`` 8 metrics every 100 ms and send them as the SDK does, one batch of ``--steps``
  10 steps every ``--interval`` second (80,000 points/s in all), from random offsets;
* ``--arena`` Arena workers (20) send one ``POST /ingest`` event of 8 metrics every second,
  each to its own run;
* ``--dashboards`` open dashboards (10): each polls a run's chart (two metrics downsampled to
  1,000 buckets) every 2 s and the project's runs list every 10 s, and holds the run's live
  stream (``…/stream``) open, noting how long after a batch was sent the stream said the run
  reached its last step (the live-update delay);
* ``--trajectories`` training rollouts a second (10), each of 8 messages, from the runs in turn;
* ``--rules`` alert rules (20) judged on every batch of the project.

It reports how much of the paced load the server kept up with (sent against scheduled, and
how late the last batches left), the latency of ingest and reads (median, p99), the live
updates received, the server's CPU and peak memory, and errors; then checks that every point
sent is stored (each run's ``point_count``).

    python benchmarks/cluster.py                       # both engines, a few minutes each
    python benchmarks/cluster.py --engine sqlite --runs 300 --duration 30
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
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import psutil

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
    requests: list[bytes],
    interval: float,
    until: float,
    setup: Setup,
    tally: Tally,
    sent_at: list[float] | None = None,
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
        if sent_at is not None:
            sent_at.append(time.perf_counter())
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


def _rollouts(setup: Setup, count: int) -> list[bytes]:
    """Training rollouts of 8 messages, from the runs in turn (one a run and step)."""
    address = f"{setup.host}:{setup.port}"
    runs = list(setup.tokens)
    requests = []
    for i in range(count):
        messages = [
            {"role": "user" if m % 2 == 0 else "assistant", "content": f"turn {m} " * 40}
            for m in range(8)
        ]
        rollout = {"scope": "training", "step": i, "trajectory_id": f"r{i}", "reward": 0.5,
                   "messages": messages, "total_messages": 8, "complete": True,
                   "capture_policy": "all"}  # fmt: skip
        body = orjson.dumps({"trajectories": [rollout]})
        token = setup.tokens[runs[i % len(runs)]]
        requests.append(_post(address, "/api/v1/ingest/trajectories", token, body))
    return requests


@dataclass
class Watch:
    """One dashboard's live stream: when each of its run's batches was sent, and how long
    after each the stream said the run had reached that batch's last step."""

    run: str
    sent_at: list[float] = field(default_factory=list)
    events: int = 0
    delays: list[float] = field(default_factory=list)

    def seen(self, last_step: int, steps_per_batch: int) -> None:
        now = time.perf_counter()
        while len(self.delays) < min(len(self.sent_at), (last_step + 1) // steps_per_batch):
            self.delays.append(now - self.sent_at[len(self.delays)])


async def _stream(setup: Setup, watch: Watch, until: float) -> None:
    """Hold a run's live stream open, noting each ``run`` event's last step."""
    reader, writer = await asyncio.open_connection(setup.host, setup.port)
    path = f"/api/v1/projects/{PROJECT}/runs/{watch.run}/stream"
    writer.write(_get(f"{setup.host}:{setup.port}", path, setup.key))
    event = b""
    with contextlib.suppress(TimeoutError, OSError, asyncio.IncompleteReadError):
        async with asyncio.timeout(max(0.0, until - time.perf_counter())):
            while line := await reader.readline():
                if line.startswith(b"event:"):
                    event = line[6:].strip()
                    watch.events += 1
                elif line.startswith(b"data:") and event == b"run":
                    last = orjson.loads(line[5:]).get("last_step")
                    if isinstance(last, int):
                        watch.seen(last, setup.args.steps)
    writer.close()


async def _load(setup: Setup, tallies: dict[str, Tally], watches: list[Watch]) -> float:
    a = setup.args
    runs = list(setup.tokens)
    address = f"{setup.host}:{setup.port}"
    batches = int(a.duration / a.interval) + 2
    work = {run: _run_batches(setup, run, batches) for run in runs}
    arena = [_arena_events(setup, w, int(a.duration) + 2) for w in range(a.arena)]
    watched = [watch.run for watch in watches]
    rollouts = _rollouts(setup, int(a.duration * a.trajectories) + 2)
    chart = "/api/v1/projects/{p}/runs/{r}/points?metric=train/m0&metric=train/m1&max_points=1000"
    charts = [[_get(address, chart.format(p=PROJECT, r=run), setup.key)] * 1000 for run in watched]
    listing = [_get(address, f"/api/v1/projects/{PROJECT}/runs", setup.key)] * 1000
    began = time.perf_counter()
    until = began + a.duration
    noted = {watch.run: watch.sent_at for watch in watches}
    tasks = [
        _paced(work[run], a.interval, until, setup, tallies["sdk"], noted.get(run)) for run in runs
    ]
    if a.trajectories > 0:  # four senders, as several jobs' rollouts arrive side by side
        tasks += [
            _paced(rollouts[i::4], 4 / a.trajectories, until, setup, tallies["rollouts"])
            for i in range(4)
        ]
    tasks += [_paced(events, 1.0, until, setup, tallies["arena"]) for events in arena]
    tasks += [_paced(requests, 2.0, until, setup, tallies["chart"]) for requests in charts]
    tasks += [_paced(listing, 10.0, until, setup, tallies["runs list"]) for _ in watched]
    tasks += [_stream(setup, watch, until + 2) for watch in watches]
    await asyncio.gather(*tasks)
    return time.perf_counter() - began


def _tree(server: Server) -> list[psutil.Process]:
    """The server process and its workers (``--workers``)."""
    top = psutil.Process(server.process.pid)
    return [top, *top.children(recursive=True)]


def _tree_cpu(server: Server) -> float:
    return sum(sum(p.cpu_times()[:2]) for p in _tree(server) if p.is_running())


def _sample_server(server: Server, until: float, rss_mib: list[float]) -> None:
    """The server's resident memory (all its processes), twice a second."""
    while time.monotonic() < until and server.process.poll() is None:
        with contextlib.suppress(psutil.Error):
            rss_mib.append(sum(p.memory_info().rss for p in _tree(server)) / 2**20)
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


def _levels(samples: list[float]) -> str:
    """Resident memory at each quarter of the load, to see whether it levels off."""
    if not samples:
        return "not sampled"
    quarters = [samples[min(len(samples) - 1, len(samples) * q // 4)] for q in (1, 2, 3, 4)]
    return " / ".join(f"{value:.0f}" for value in quarters) + f" MiB (peak {max(samples):.0f})"


def _percentiles(values: list[float]) -> str:
    if not values:
        return "none seen"
    ordered = sorted(values)
    median, p99 = percentile(ordered, 0.5) * 1000, percentile(ordered, 0.99) * 1000
    return f"median {median:.0f} ms, p99 {p99:.0f} ms"


def measure(engine: str, args: argparse.Namespace) -> dict[str, object]:
    processes = args.pg_workers if engine == "postgresql" else 1
    with (
        tempfile.TemporaryDirectory() as tmp,
        engine_store(engine, Path(tmp), args.pg_url) as (store_args, data_dir),
    ):
        workers = ["--workers", str(processes)] if processes > 1 else []
        server = Server(
            [*store_args, *workers], Path(tmp) / "server.log", secrets.token_urlsafe(24)
        )
        try:
            key = (data_dir / "admin.key").read_text().strip()
            tokens = _set_up(server, key, args)
            setup = Setup("127.0.0.1", server.port, key, tokens, server.secret, args)
            tallies = {name: Tally() for name in ("sdk", "arena", "rollouts", "chart", "runs list")}
            watches = [Watch(run) for run in list(tokens)[: args.dashboards]]
            rss: list[float] = []
            cpu0, client0 = _tree_cpu(server), time.process_time()
            sampler = threading.Thread(
                target=_sample_server, args=(server, time.monotonic() + args.duration, rss)
            )
            sampler.start()
            wall = asyncio.run(_load(setup, tallies, watches))
            cpu, client_cpu = _tree_cpu(server) - cpu0, time.process_time() - client0
            sampler.join()
            stored = _stored(server, key, tokens)
        finally:
            server.stop()
    sent_points = tallies["sdk"].sent * args.series * args.steps
    for name, tally in tallies.items():
        for error in tally.errors[:3]:
            print(f"  {name} error: {error}")
    return {
        "engine": engine,
        "server processes": processes,
        "wall_s": round(wall, 1),
        "server_cpu_pct": round(100 * cpu / wall),
        "server_rss": _levels(rss),
        "client_cpu_pct": round(100 * client_cpu / wall),
        "load_average": Path("/proc/loadavg").read_text().split()[0],
        "points_per_s": round(sent_points / wall),
        "live_update_delay": _percentiles([d for w in watches for d in w.delays]),
        "live_events": sum(w.events for w in watches),
        "points_not_stored": sent_points - sum(stored.values()),
        **{name: tally.row() for name, tally in tallies.items()},
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--series", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--arena", type=int, default=20)
    parser.add_argument("--dashboards", type=int, default=10)
    parser.add_argument("--trajectories", type=float, default=10.0)
    parser.add_argument("--rules", type=int, default=20)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--pg-workers", type=int, default=2, help="server processes on PostgreSQL")
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
