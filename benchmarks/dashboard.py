"""Dashboard speed in headless Chromium against a real ``tuneplane serve`` on SQLite.

What it measures:

* **run page**: one run with 8 metrics x 200,000 points each; the time from navigation start
  until every chart has drawn all its data (``window.__tuneplane.readyAt``: the first frame
  after the last chart on screen was drawn). Each load is a fresh browser context (cold).
* **compare**: the same for 20 such runs overlaid (``/compare?project=…&runs=…``).
* **live update**: with the run page open, 1 new point per series is posted (one Arena
  event with the 8 metrics); main-thread work is Chromium's ``TaskDuration`` (DevTools
  ``Performance.getMetrics``) from before the post until every chart has taken the point
  (drawn it, or kept its canvas because it would move nothing by a quarter pixel), minus
  what the page spends idle over the same time (measured while the harness polls the page
  as it does during an update). ``draw ms`` is the page's own measure of the
  synchronous redraw; ``frames``, how many live frames the page drew for the update;
  ``worker script ms``, the time the worker that draws the charts' data (bands, lines,
  marks) spent in its script for the update, off the main thread (Chromium rasterizes each
  canvas after that, on the worker's thread too: not counted). The
  same is done for the comparison (1 point per series in each run): once with every run's
  batch posted at once (workers of one sweep reporting the same step), and once with the
  batches posted one after another, each after the previous answer, which spreads the
  update over a few hundred milliseconds.
* **live update, every chart moves**: the same, with each update's point 3,000 steps after
  the last, so every chart is drawn again (the usual case above is a point that moves
  nothing by a quarter pixel, whose chart keeps its drawing). These updates leave their
  runs' ends sparse, so they use runs of their own (``moving-00`` …), loaded like the others.

The series are training-like curves (rising, decaying, flat and logarithmic trends with
noise and rare spikes), so each downsampled bucket has a band as real runs do. The data is
loaded through the public API (``POST /ingest`` batches of 128 events x
8 metrics, many requests in flight); loading the 64M points of 40 runs takes several minutes, so
``--data-dir`` keeps them for the next run (runs already complete are not sent again).

    python benchmarks/dashboard.py                          # 20 runs x 8 x 200,000 points
    python benchmarks/dashboard.py --runs 2 --points 20000  # a quick look
    python benchmarks/dashboard.py --data-dir /tmp/tp-bench --json results.json

Targets (issue 4): interactive within 1.5 s; a live update under 16 ms of main-thread work.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx
import orjson
from playwright.sync_api import Browser, Page, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

PROJECT: Final = "bench"
SECRET: Final = "dashboard-bench-secret"
METRICS: Final = (
    "reward",
    "loss",
    "arena/step_seconds",
    "train/kl",
    "train/entropy",
    "train/grad_norm",
    "train/lr",
    "eval/accuracy",
)
EVENTS_PER_BATCH: Final = 128
IN_FLIGHT: Final = 16
CHROMIUM: Final = "/usr/bin/chromium"
CHROMIUM_ARGS: Final = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
#: Tall enough that every chart is on screen, under the header of a 20-run comparison too
#: (5 rows of charts: one per name prefix group), so "drawn" means all 8 charts.
VIEWPORT: Final = {"width": 1600, "height": 3400}
#: Steps between live points in the updates that move every chart: each point starts a new
#: bucket far enough right to move every line (a point 1 step on mostly moves nothing).
MOVE: Final = 3000


def run_name(index: int, prefix: str = "bench") -> str:
    return f"{prefix}-{index:02d}"


def noise(metric_index: int, step: int) -> float:
    """Deterministic noise in [0, 1)."""
    return (math.sin(step * 12.9898 + metric_index * 78.233) * 43758.5453) % 1.0


def value(metric_index: int, step: int) -> float:
    """Training-like curves: a trend (rising, decaying, flat) with noise, and rare spikes."""
    u = noise(metric_index, step)
    scale = 40_000 * (1 + metric_index % 3)
    trend = (
        1 - math.exp(-step / scale),
        2 * math.exp(-step / scale) + 0.1,
        1.2 + 0.1 * math.sin(step / 50_000),
        math.log1p(step / scale),
    )[metric_index % 4]
    spike = 5.0 if u > 0.9995 else 0.0
    return trend + 0.2 * (u - 0.5) + spike


# --------------------------------------------------------------------------- server


@contextmanager
def server(data_dir: Path) -> Iterator[str]:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "TUNEPLANE_INGEST_SECRET": SECRET}
    env.pop("TUNEPLANE_DATABASE_URL", None)
    log = (data_dir / "server.log").open("w")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tuneplane.cli",
            "serve",
            "--data-dir",
            str(data_dir),
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise SystemExit(f"server exited: see {data_dir / 'server.log'}")
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("server did not start within 60 s")
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


# --------------------------------------------------------------------------- loading


def batch(run: str, first: int, last: int) -> bytes:
    """One Arena batch: events for steps first..last-1, each with every metric."""
    return orjson.dumps(
        {
            "logs": [
                {
                    "project": PROJECT,
                    "run": run,
                    "step": step,
                    "log_id": f"e{step}",
                    "metrics": {m: value(i, step) for i, m in enumerate(METRICS)},
                }
                for step in range(first, last)
            ]
        }
    )


async def load_runs(base: str, runs: list[str], points: int) -> None:
    jobs = [(run, first) for run in runs for first in range(0, points, EVENTS_PER_BATCH)]
    done = 0
    started = time.perf_counter()
    headers = {"Authorization": f"Bearer {SECRET}", "Content-Type": "application/json"}
    limits = httpx.Limits(max_connections=IN_FLIGHT, max_keepalive_connections=IN_FLIGHT)
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=300, limits=limits) as c:

        async def worker() -> None:
            nonlocal done
            while jobs:
                run, first = jobs.pop()
                body = batch(run, first, min(first + EVENTS_PER_BATCH, points))
                answer = await c.post("/ingest", content=body)
                if answer.status_code != 200:
                    raise SystemExit(f"ingest failed: {answer.status_code} {answer.text}")
                done += 1
                if done % 2000 == 0:
                    rate = done * EVENTS_PER_BATCH * len(METRICS) / (time.perf_counter() - started)
                    print(f"  {done} batches, {rate:,.0f} points/s", flush=True)

        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))


def ensure_data(base: str, runs: list[str], points: int) -> float:
    """Load the runs that are not complete yet; answers the seconds spent."""
    wanted = points * len(METRICS)
    existing = {}
    answer = httpx.get(f"{base}/api/v1/projects/{PROJECT}/runs", timeout=60)
    if answer.status_code == 200:
        existing = {r["run"]: r["point_count"] for r in answer.json()}
    # Live updates measured earlier add a few points: a run with at least as many is loaded.
    missing = [run for run in runs if existing.get(run, 0) < wanted]
    if not missing:
        return 0.0
    print(f"loading {len(missing)} runs x {len(METRICS)} metrics x {points:,} points", flush=True)
    started = time.perf_counter()
    asyncio.run(load_runs(base, missing, points))
    elapsed = time.perf_counter() - started
    print(f"  loaded in {elapsed:.0f} s", flush=True)
    return elapsed


# --------------------------------------------------------------------------- browser


@dataclass
class PageLoad:
    ready_ms: list[float] = field(default_factory=list)
    first_chart_ms: list[float] = field(default_factory=list)
    requests: int = 0
    buckets_per_series: int = 0
    charts: int = 0


@dataclass
class LiveUpdate:
    task_ms: list[float] = field(default_factory=list)
    draw_ms: list[float] = field(default_factory=list)
    #: Live frames the page drew for each update (changes arriving apart are drawn apart).
    frames: list[int] = field(default_factory=list)
    #: The worker's script time drawing the charts' data for each update (rasterizing the
    #: canvases follows on its thread, not counted), off the main thread.
    paint_ms: list[float] = field(default_factory=list)
    idle_ms_per_s: float = 0.0


FIRST_CHART_JS = """() => new Promise(resolve => {
    const t = performance.getEntriesByType('mark').find(m => m.name === 'first-chart');
    resolve(t ? t.startTime : null);
})"""


def open_page(browser: Browser, base: str, path: str) -> tuple[Page, Any]:
    context = browser.new_context(base_url=base, viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(120_000)
    page.goto(path)
    page.wait_for_function("() => window.__tuneplane && window.__tuneplane.ready", polling=20)
    return page, context


def measure_load(browser: Browser, base: str, path: str, runs: int, repeats: int) -> PageLoad:
    result = PageLoad()
    for _ in range(repeats):
        counted: list[str] = []
        context = browser.new_context(base_url=base, viewport=VIEWPORT)
        page = context.new_page()
        page.set_default_timeout(120_000)
        page.on("request", lambda r, seen=counted: seen.append(r.url))
        page.goto(path)
        page.wait_for_function("() => window.__tuneplane && window.__tuneplane.ready", polling=20)
        state = page.evaluate("window.__tuneplane")
        drawn = {m: len(c["runs"]) for m, c in state["charts"].items()}
        assert drawn == {m: runs for m in METRICS}, f"not every chart drawn: {drawn}"
        result.ready_ms.append(state["readyAt"])
        result.requests = sum("/points?" in url for url in counted)
        result.charts = len(state["charts"])
        result.buckets_per_series = max(
            n for chart in state["charts"].values() for n in chart["runs"].values()
        )
        first = page.evaluate(FIRST_CHART_JS)
        if first is not None:
            result.first_chart_ms.append(first)
        context.close()
    return result


def task_ms(cdp: Any) -> float:
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return float(metrics["TaskDuration"]) * 1000


def measure_live(
    browser: Browser,
    base: str,
    path: str,
    runs: list[str],
    repeats: int,
    together: bool = True,
    gap: int = 1,
) -> LiveUpdate:
    """Post 1 point per series to each run and time the page's main thread until drawn.

    together: every run's batch is posted at once (runs reporting the same step, as workers
    of one sweep do); otherwise one after another, each waiting for the previous answer,
    which spreads one update over a few hundred milliseconds and several live frames.
    gap: steps between one update's point and the next. With 1, a point mostly joins its
    series' last bucket and moves nothing on screen; a gap of thousands of steps makes every
    update a new bucket that moves every line, so every chart is drawn again.
    """
    page, context = open_page(browser, base, path)
    cdp = context.new_cdp_session(page)
    cdp.send("Performance.enable")
    result = LiveUpdate()
    time.sleep(1.0)
    # The idle rate includes the harness's own polling (below, every 10 ms in the page), so
    # subtracting it leaves only what the page did for the update.
    before = task_ms(cdp)
    started = time.perf_counter()
    with contextlib.suppress(PlaywrightTimeout):
        page.wait_for_function("() => false", polling=10, timeout=2000)
    idle = (task_ms(cdp) - before) / (time.perf_counter() - started)
    result.idle_ms_per_s = idle
    listed = httpx.get(f"{base}/api/v1/projects/{PROJECT}/runs", timeout=60).json()
    step = gap + max(r["last_step"] for r in listed if r["run"] in runs)
    headers = {"Authorization": f"Bearer {SECRET}", "Content-Type": "application/json"}
    limits = httpx.Limits(max_connections=len(runs), max_keepalive_connections=len(runs))
    client = httpx.Client(base_url=base, headers=headers, limits=limits, timeout=60)
    poster = ThreadPoolExecutor(len(runs))

    def post(body: bytes) -> httpx.Response:
        return client.post("/ingest", content=body)

    # Open the connections before the clock starts.
    list(poster.map(lambda _: client.get("/healthz"), runs))
    for _ in range(repeats):
        updates = page.evaluate("window.__tuneplane.updates")
        painted = page.evaluate("window.__tuneplane.paintMs")
        want = {run: None for run in runs}
        started_task = task_ms(cdp)
        started = time.perf_counter()
        bodies = [batch(run, step, step + 1) for run in runs]
        answers = list(poster.map(post, bodies)) if together else [post(b) for b in bodies]
        for answer in answers:
            assert answer.status_code == 200, answer.text
        page.wait_for_function(
            """([keys, metrics, step]) => metrics.every(m => {
                const c = window.__tuneplane.charts[m];
                return c && keys.every(k => c.lastStep?.[k] >= step);
            })""",
            arg=[[f"{PROJECT}/{r}" for r in want], list(METRICS), step],
            polling=10,
        )
        elapsed = time.perf_counter() - started
        spent = task_ms(cdp) - started_task - idle * elapsed
        result.task_ms.append(max(0.0, spent))
        frames = page.evaluate("window.__tuneplane.updates") - updates
        assert frames > 0
        result.frames.append(frames)
        result.draw_ms.append(page.evaluate("window.__tuneplane.lastUpdateMs"))
        step += gap
        time.sleep(0.3)  # the worker has drawn by then
        result.paint_ms.append(page.evaluate("window.__tuneplane.paintMs") - painted)
    poster.shutdown()
    client.close()
    context.close()
    return result


# --------------------------------------------------------------------------- report


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    chromium = subprocess.run(
        [CHROMIUM, "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {chromium}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="runs in the comparison (20)")
    parser.add_argument("--points", type=int, default=200_000, help="points per series")
    parser.add_argument("--repeats", type=int, default=3, help="page loads per measure (3)")
    parser.add_argument("--updates", type=int, default=5, help="live updates measured (5)")
    parser.add_argument("--data-dir", type=Path, help="keep the loaded data here for reuse")
    parser.add_argument("--json", type=Path, help="write the results as JSON")
    parser.add_argument("--load-only", action="store_true", help="load the data, measure nothing")
    args = parser.parse_args()

    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="tuneplane-dashboard-bench-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    runs = [run_name(i) for i in range(args.runs)]
    single = f"/projects/{PROJECT}/runs/{runs[0]}"
    compare = f"/compare?project={PROJECT}&runs={','.join(runs)}"
    # The updates that move every chart leave points far apart at the end of their runs,
    # after which a point 1 step on moves the lines too: they have runs of their own.
    moving = [run_name(i, "moving") for i in range(args.runs)]
    results: dict[str, Any] = {"machine": machine(), "runs": args.runs, "points": args.points}
    with server(data_dir) as base:
        results["load_seconds"] = ensure_data(base, runs + moving, args.points)
        if args.load_only:
            return 0
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            measure_load(browser, base, single, 1, 1)  # warm the server's and the OS's caches
            print("measuring run_page", flush=True)
            run_page = measure_load(browser, base, single, 1, args.repeats)
            print("measuring comparison", flush=True)
            comparison = measure_load(browser, base, compare, args.runs, args.repeats)
            print("measuring live_run", flush=True)
            live_run = measure_live(browser, base, single, runs[:1], args.updates)
            print("measuring live_compare", flush=True)
            live_compare = measure_live(browser, base, compare, runs, args.updates)
            print("measuring live_compare, runs posting one after another", flush=True)
            live_spread = measure_live(browser, base, compare, runs, args.updates, together=False)
            print("measuring live updates that move every chart", flush=True)
            moving_single = f"/projects/{PROJECT}/runs/{moving[0]}"
            moving_run = measure_live(
                browser, base, moving_single, moving[:1], args.updates, gap=MOVE
            )
            moving_compare = measure_live(
                browser,
                base,
                f"/compare?project={PROJECT}&runs={','.join(moving)}",
                moving,
                args.updates,
                gap=MOVE,
            )
            browser.close()
    results.update(
        run_page=asdict(run_page),
        compare=asdict(comparison),
        live_run=asdict(live_run),
        live_compare=asdict(live_compare),
        live_compare_one_after_another=asdict(live_spread),
        live_run_every_chart_moves=asdict(moving_run),
        live_compare_every_chart_moves=asdict(moving_compare),
    )
    series = len(METRICS)
    print(f"\nmachine: {results['machine']}")
    print(f"data: {args.runs} runs x {series} metrics x {args.points:,} points")
    print("| page | charts | requests | buckets/series | first chart ms | all drawn ms (median) |")
    print("|---|--:|--:|--:|--:|--:|")
    for name, load in (("run page", run_page), (f"compare {args.runs} runs", comparison)):
        print(
            f"| {name} | {load.charts} | {load.requests} | {load.buckets_per_series} | "
            f"{median(load.first_chart_ms):.0f} | {median(load.ready_ms):.0f} "
            f"({', '.join(f'{v:.0f}' for v in load.ready_ms)}) |"
        )
    print(
        "\n| live update | main-thread ms (median) | all samples | draw ms (median) | frames "
        "| worker script ms (median) |"
    )
    print("|---|--:|---|--:|---|--:|")
    for name, live in (
        ("run page", live_run),
        (f"compare {args.runs} runs", live_compare),
        (f"compare {args.runs} runs, posted one after another", live_spread),
        (f"run page, every chart moves (points {MOVE:,} steps apart)", moving_run),
        (f"compare {args.runs} runs, every chart moves", moving_compare),
    ):
        print(
            f"| {name} | {median(live.task_ms):.1f} | "
            f"{', '.join(f'{v:.1f}' for v in live.task_ms)} | {median(live.draw_ms):.1f} | "
            f"{', '.join(map(str, live.frames))} | {median(live.paint_ms):.1f} |"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
