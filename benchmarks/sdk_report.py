"""The cost of ``Reporter.report()`` on the training thread, with the SDK's background sender
delivering to a real ``tuneplane serve`` process.

Targets (issue brief): for a call with 8 metrics, median <= 3 us, p99 <= 20 us, max <= 2 ms.

Scenarios, each timing every call with ``time.perf_counter_ns`` on the calling thread:

* ``floor``: the same work without tuneplane (copy the dict, take a lock, append): what this
  machine and interpreter can do at best, and how noisy they are.
* ``tight``: ``report()`` in a loop with nothing else, the sender delivering meanwhile. The
  loop offers points far faster than any server takes them, so the queue fills and the rest
  is dropped and counted: this measures the call, not the delivery.
* ``paced``: ``report()`` once every ``--pace-us`` microseconds of busy work (a training step
  that never sleeps); the sender keeps up, so every point is delivered and checked as
  stored on the server.
* ``down``: ``report()`` in a loop while the server is unreachable (a port nobody listens on):
  the sender retries and the queue overflows; the call must stay as cheap.

The server (SQLite in a temporary directory) runs as ``python -m tuneplane.cli serve``; the
run and its attempt are created through the public API with the admin key it writes. The
exit status is 1 when a paced point was not found stored.

    python benchmarks/sdk_report.py                   # about 30 s here
    python benchmarks/sdk_report.py --calls 100000 --json results.json
    python benchmarks/sdk_report.py --first-calls 20 --compare /tmp/before   # first call
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

import httpx

from tuneplane import Reporter

METRICS: Final = {f"train/m{i}": 0.1 * i for i in range(8)}
PROJECT: Final = "bench-sdk"
STARTUP_TIMEOUT_S: Final = 60.0


@dataclass
class Row:
    scenario: str
    calls: int
    median_us: float
    p99_us: float
    p999_us: float
    max_us: float
    over_2ms: int
    over_2ms_descheduled: int
    max_without_descheduling_us: float
    gc_max_us: float
    points_offered: int
    sent: int
    dropped: int
    stored: int | None

    def markdown(self) -> str:
        stored = "" if self.stored is None else f"{self.stored:,}"
        return (
            f"| {self.scenario} | {self.calls:,} | {self.median_us:.2f} | {self.p99_us:.2f} | "
            f"{self.p999_us:.1f} | {self.max_us:,.0f} | {self.over_2ms} "
            f"({self.over_2ms_descheduled}) | {self.max_without_descheduling_us:,.0f} | "
            f"{self.gc_max_us:,.0f} | "
            f"{self.points_offered:,} | {self.sent:,} | {self.dropped:,} | {stored} |"
        )


HEADER: Final = (
    "| scenario | calls | median µs | p99 µs | p99.9 µs | max µs | calls > 2 ms (descheduled) | "
    "max µs on CPU | longest GC µs | points offered | sent | dropped | stored |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


class GcWatch:
    """The longest garbage collection while watching (any thread)."""

    def __init__(self) -> None:
        self.longest_ns = 0
        self._started = 0

    def __call__(self, phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter_ns()
        else:
            self.longest_ns = max(self.longest_ns, time.perf_counter_ns() - self._started)

    def __enter__(self) -> GcWatch:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self)


class RunQueueClock:
    """Nanoseconds this thread has spent waiting for a CPU (``/proc/.../schedstat``): a
    call's share of it is time the operating system gave to other processes."""

    def __init__(self) -> None:
        self._fd = os.open(f"/proc/self/task/{threading.get_native_id()}/schedstat", os.O_RDONLY)

    def __call__(self) -> int:
        return int(os.pread(self._fd, 128, 0).split()[1])

    def close(self) -> None:
        os.close(self._fd)


def timed(
    calls: int, call: Callable[[int], None], pace_ns: int = 0
) -> tuple[Sequence[int], Sequence[int]]:
    """Each call's duration, and the part of it spent waiting for a CPU.

    The results go into arrays, not lists: a list of 200,000 items in the young generation
    costs every garbage collection that traverses it milliseconds, which the first version
    of this script measured as if the SDK had caused them."""
    clock = time.perf_counter_ns
    waited = RunQueueClock()
    latencies = array("q", bytes(8 * calls))
    descheduled = array("q", bytes(8 * calls))
    for step in range(calls):
        queued = waited()
        started = clock()
        call(step)
        ended = clock()
        latencies[step] = ended - started
        descheduled[step] = waited() - queued
        if pace_ns:
            until = clock() + pace_ns
            while clock() < until:
                pass
    waited.close()
    return latencies, descheduled


def row(
    scenario: str,
    timings: tuple[Sequence[int], Sequence[int]],
    gc_ns: int,
    offered: int,
    sent: int = 0,
    dropped: int = 0,
    stored: int | None = None,
) -> Row:
    latencies, descheduled = timings
    ordered = sorted(latencies)
    slow = [i for i, value in enumerate(latencies) if value > 2_000_000]

    def at(fraction: float) -> float:
        return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))] / 1000

    return Row(
        scenario=scenario,
        calls=len(ordered),
        median_us=statistics.median(ordered) / 1000,
        p99_us=at(0.99),
        p999_us=at(0.999),
        max_us=ordered[-1] / 1000,
        over_2ms=len(slow),
        over_2ms_descheduled=sum(1 for i in slow if descheduled[i] * 2 > latencies[i]),
        max_without_descheduling_us=max(
            latency - waited for latency, waited in zip(latencies, descheduled, strict=True)
        )
        / 1000,
        gc_max_us=gc_ns / 1000,
        points_offered=offered,
        sent=sent,
        dropped=dropped,
        stored=stored,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Server:
    def __init__(self, data_dir: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.data_dir = data_dir
        self._log = open(data_dir.parent / "server.log", "wb")  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tuneplane.cli", "serve", "--data-dir", str(data_dir),
             "--port", str(self.port)],
            stdout=self._log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            try:
                if httpx.get(self.base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the server did not start; see server.log")
            time.sleep(0.1)
        key = (data_dir / "admin.key").read_text().strip()
        self.api = httpx.Client(base_url=self.base, headers={"Authorization": f"Bearer {key}"})

    def attempt(self, run: str) -> str:
        created = self.api.post(f"/api/v1/projects/{PROJECT}/runs", json={"run": run})
        created.raise_for_status()
        answer = self.api.post(f"/api/v1/projects/{PROJECT}/runs/{run}/attempts")
        answer.raise_for_status()
        token: str = answer.json()["token"]
        return token

    def stored_points(self, run: str) -> int:
        metrics = self.api.get(f"/api/v1/projects/{PROJECT}/runs/{run}/metrics").json()
        return sum(int(metric["count"]) for metric in metrics)

    def stop(self) -> None:
        self.api.close()
        self.process.terminate()
        self.process.wait(30)
        self._log.close()


def floor(calls: int) -> Row:
    lock = threading.Lock()
    steps: list[int] = []
    queue: list[dict[str, float]] = []

    def call(step: int) -> None:
        copy = dict(METRICS)
        with lock:
            if len(queue) < 100_000 // len(METRICS):
                steps.append(step)
                queue.append(copy)

    with GcWatch() as watch:
        timings = timed(calls, call)
    return row("floor", timings, watch.longest_ns, calls * len(METRICS))


def with_reporter(
    scenario: str, reporter: Reporter, calls: int, pace_ns: int = 0, server: Server | None = None
) -> Row:
    def call(step: int) -> None:
        reporter.report(METRICS, step=step)

    with GcWatch() as watch:
        timings = timed(calls, call, pace_ns)
    health = reporter.close(30)
    stored = server.stored_points(reporter.run) if server is not None else None
    return row(
        scenario,
        timings,
        watch.longest_ns,
        calls * len(METRICS),
        health.sent,
        health.dropped,
        stored,
    )


FIRST_CALL: Final = """
import json, os, sys, time
import tuneplane
metrics = {f"train/m{i}": 0.1 * i for i in range(8)}
call = tuneplane.report
if os.environ.get("BENCH_INIT"):  # init() first, then log()
    tuneplane.init(project="bench-sdk", name=os.environ["BENCH_INIT"])
    call = tuneplane.log
took = []
for step in range(3):
    started = time.perf_counter_ns()
    call(metrics, step=step)
    took.append(time.perf_counter_ns() - started)
reporter = tuneplane.client.default.default_reporter()
ok = reporter is not None and reporter.flush(30) and reporter.health().sent == 24
print(json.dumps({"first": took[0], "second": took[1], "third": took[2], "ok": ok}))
"""


def first_calls(server: Server, rounds: int, sources: dict[str, Path]) -> list[str]:
    """The first ``report()`` of a fresh process under ``tuneplane run``'s environment,
    for each checkout in ``sources`` in turn (alternating, so that both see the same
    machine), ``rounds`` processes each: median and max of the first, second and third
    call, in µs."""
    kinds = [(label, source, False) for label, source in sources.items()]
    kinds.append(("this, init() then log()", sources["this"], True))
    took: dict[str, list[dict[str, int]]] = {label: [] for label, _, _ in kinds}
    for index in range(rounds):
        for label, source, init in kinds:
            run = f"first-{index}-{len(took[label])}-{'init' if init else label}"
            env = {**os.environ, "PYTHONPATH": str(source)}
            if init:
                key = (server.data_dir / "admin.key").read_text().strip()
                env.update(BENCH_INIT=run, TUNEPLANE_URL=server.base, TUNEPLANE_API_KEY=key)
            else:
                env.update(
                    TUNEPLANE_JOB_ENDPOINT=server.base,
                    TUNEPLANE_JOB_RUN_ID=f"{PROJECT}/{run}",
                    TUNEPLANE_JOB_TOKEN=server.attempt(run),
                )
            # cwd: ``python -c`` imports from the working directory first.
            done = subprocess.run(
                [sys.executable, "-c", FIRST_CALL],
                env=env,
                cwd=source,
                capture_output=True,
                text=True,
            )
            result = json.loads(done.stdout)
            if not result.pop("ok"):
                raise SystemExit(f"first call ({label}): points not delivered: {done.stderr}")
            took[label].append(result)
    lines = ["| checkout | processes | first call median µs | first call max µs | "
             "second median µs | third median µs |", "|---|---|---|---|---|---|"]  # fmt: skip
    for label, results in took.items():
        first = [r["first"] / 1000 for r in results]
        lines.append(
            f"| {label} | {len(results)} | {statistics.median(first):,.0f} | {max(first):,.0f} | "
            f"{statistics.median(r['second'] / 1000 for r in results):,.1f} | "
            f"{statistics.median(r['third'] / 1000 for r in results):,.1f} |"
        )
    return lines


def machine() -> dict[str, str]:
    model = ""
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "cpu": model,
        "cores": str(os.cpu_count()),
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()}",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200_000, help="calls per scenario")
    parser.add_argument("--paced-calls", type=int, default=20_000)
    parser.add_argument("--pace-us", type=int, default=100, help="busy work between calls")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--gc-freeze",
        action="store_true",
        help="gc.freeze() after the imports, as long-running services do: full collections "
        "then skip the interpreter's startup objects",
    )
    parser.add_argument(
        "--first-calls",
        type=int,
        metavar="N",
        help="only measure the first report() of N fresh processes per checkout",
    )
    parser.add_argument(
        "--compare",
        type=Path,
        metavar="DIR",
        help="with --first-calls: also a checkout of another commit (its directory holding "
        "tuneplane/), measured alternately with this one",
    )
    args = parser.parse_args(argv)
    if args.first_calls:
        sources = {"this": Path(__file__).resolve().parent.parent}
        if args.compare:
            sources = {"compared": args.compare.resolve(), **sources}
        with tempfile.TemporaryDirectory(prefix="tuneplane-sdk-bench-") as workdir:
            server = Server(Path(workdir) / "data")
            try:
                table = first_calls(server, args.first_calls, sources)
            finally:
                server.stop()
        print("machine:", ", ".join(f"{k} {v}" for k, v in machine().items()))
        print("\n".join(table))
        return 0
    if args.gc_freeze:
        gc.collect()
        gc.freeze()

    rows: list[Row] = []
    rows.append(floor(args.calls))
    with tempfile.TemporaryDirectory(prefix="tuneplane-sdk-bench-") as workdir:
        server = Server(Path(workdir) / "data")
        try:
            rows.append(
                with_reporter("tight", Reporter(server.base, f"{PROJECT}/tight",
                              server.attempt("tight")), args.calls)
            )  # fmt: skip
            paced = Reporter(server.base, f"{PROJECT}/paced", server.attempt("paced"))
            rows.append(
                with_reporter("paced", paced, args.paced_calls, args.pace_us * 1000, server)
            )
        finally:
            server.stop()
    dead = Reporter(f"http://127.0.0.1:{free_port()}", f"{PROJECT}/down", "tpi_none")
    rows.append(with_reporter("down", dead, args.calls))

    print("machine:", ", ".join(f"{k} {v}" for k, v in machine().items()))
    print(HEADER)
    for result in rows:
        print(result.markdown())
    if args.json:
        args.json.write_text(
            json.dumps({"machine": machine(), "rows": [asdict(r) for r in rows]}, indent=2)
        )
    paced_row = next(r for r in rows if r.scenario == "paced")
    complete = paced_row.stored == paced_row.points_offered == paced_row.sent
    if not complete:
        print("paced: not every point was stored", file=sys.stderr)
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
