"""Live: a batch posted while the page is open appears without a reload, its new steps
carried by the run's stream; new metrics and alerts appear too; a refused stream is retried;
a comparison follows its runs on one stream."""

from __future__ import annotations

import math
import re
from urllib.parse import parse_qs, urlparse

from playwright.sync_api import Page, Request, Route, expect

from tests.dashboard.conftest import Watched
from tests.dashboard.pages import (
    chart_order,
    chart_png,
    charts,
    open_ready,
    png_difference,
    wait_points,
)
from tests.dashboard.seed import (
    PROJECT,
    SDK_PROJECT,
    Seeded,
    post_ingest,
    post_scalars,
    start_sdk_run,
)
from tests.helpers import alert, log


def post_steps(seeded: Seeded, run: str, steps: range, metrics: tuple[str, ...]) -> None:
    post_ingest(
        seeded.base,
        {"logs": [log(f"e{s}", s, {m: s / 10 for m in metrics}, run=run) for s in steps]},
    )


def test_a_batch_posted_while_watching_appears_live(page: Page, seeded: Seeded) -> None:
    post_steps(seeded, "live-run", range(10), ("reward", "loss"))
    key = f"{PROJECT}/live-run"
    queries: list[dict[str, list[str]]] = []

    def on_request(request: Request) -> None:
        url = urlparse(request.url)
        if "/points" in url.path:
            queries.append(parse_qs(url.query))

    page.on("request", on_request)
    open_ready(page, f"/projects/{PROJECT}/runs/live-run")
    wait_points(page, "reward", key, 10)
    expect(page.locator(".live-state").first).to_have_text("live")
    initial = len(queries)

    post_steps(seeded, "live-run", range(10, 15), ("reward", "loss"))
    wait_points(page, "reward", key, 15)
    wait_points(page, "loss", key, 15)
    expect(page.locator(".fact", has_text="last step").locator("dd")).to_have_text("14")
    # The new steps came with the run's stream: no chart asked for points again.
    assert queries[initial:] == []
    assert page.evaluate("window.__tuneplane.updates") >= 1

    post_steps(seeded, "live-run", range(15, 16), ("reward", "loss", "train/grad_norm"))
    page.wait_for_function("() => window.__tuneplane?.charts['train/grad_norm']?.draws > 0")
    assert chart_order(page) == ["loss", "reward", "train/grad_norm"]

    post_ingest(seeded.base, {"alerts": [alert("live-alert", "Reward collapsed", run="live-run")]})
    expect(page.locator(".alert-line")).to_contain_text("Reward collapsed")


def test_a_refused_stream_is_retried(page: Page, seeded: Seeded, watched: Watched) -> None:
    post_steps(seeded, "retry-run", range(3), ("reward",))
    refused: list[str] = []

    def refuse_once(route: Route) -> None:
        if not refused:
            refused.append(route.request.url)
            route.fulfill(status=503, body="restarting")
        else:
            route.fallback()

    page.route(re.compile(r"/runs/retry-run/stream(\?|$)"), refuse_once)
    open_ready(page, f"/projects/{PROJECT}/runs/retry-run")
    expect(page.locator(".live-line .live-state")).to_have_text("live")
    post_steps(seeded, "retry-run", range(3, 6), ("reward",))
    wait_points(page, "reward", f"{PROJECT}/retry-run", 6)
    assert len(refused) == 1
    watched.errors[:] = [e for e in watched.errors if "status of 503" not in e]


def test_a_corrected_step_shows_without_a_reload(page: Page, seeded: Seeded) -> None:
    """An SDK step reported again replaces its value: the chart loads that series again."""
    token = start_sdk_run(seeded.base, seeded.admin_key, "corrected-run")

    def report(steps: list[int], values: list[float]) -> None:
        body = {"series": [{"name": "train/loss", "steps": steps, "values": values}]}
        post_scalars(seeded.base, token, body)

    report(list(range(10)), [1.0] * 10)
    open_ready(page, f"/projects/{SDK_PROJECT}/runs/corrected-run")
    expect(page.locator(".live-line .live-state")).to_have_text("live")
    assert charts(page)["train/loss"]["y"][1] < 2
    report([5], [50.0])  # no new point: only a correction
    page.wait_for_function("() => window.__tuneplane?.charts['train/loss']?.y[1] > 49")
    assert charts(page)["train/loss"]["runs"] == {f"{SDK_PROJECT}/corrected-run": 10}


def test_a_comparison_follows_its_runs_on_one_stream(page: Page, seeded: Seeded) -> None:
    runs = [f"cmp-{i}" for i in range(4)]
    for run in runs:
        post_steps(seeded, run, range(5), ("reward",))
    streams: list[str] = []
    points: list[str] = []

    def on_request(request: Request) -> None:
        path = urlparse(request.url).path
        if path.endswith("/stream"):
            streams.append(request.url)
        elif "/points" in path:
            points.append(request.url)

    page.on("request", on_request)
    open_ready(page, f"/compare?project={PROJECT}&runs={','.join(runs)}")
    expect(page.locator(".live-state")).to_have_text("live")
    fetched = len(points)
    post_steps(seeded, runs[1], range(5, 8), ("reward",))
    post_steps(seeded, runs[3], range(5, 6), ("reward",))
    wait_points(page, "reward", f"{PROJECT}/{runs[1]}", 8)
    wait_points(page, "reward", f"{PROJECT}/{runs[3]}", 6)
    # The header's rows of the changed runs follow too.
    expect(page.locator(f'tr[data-run="{runs[1]}"] td.num')).to_have_text("step 7")
    expect(page.locator(f'tr[data-run="{runs[3]}"] td.num')).to_have_text("step 5")
    expect(page.locator(f'tr[data-run="{runs[0]}"] td.num')).to_have_text("step 4")
    assert points[fetched:] == []
    assert len(streams) == 1
    query = parse_qs(urlparse(streams[0]).query)
    assert urlparse(streams[0]).path == f"/api/v1/projects/{PROJECT}/stream"
    assert (query["runs"], query["points"]) == ([",".join(runs)], ["1"])


def test_a_live_point_that_moves_nothing_on_screen_is_not_redrawn(
    page: Page, seeded: Seeded
) -> None:
    """A flat series of 6,000 steps is downsampled: a new 0 joins the last bucket and moves
    no pixel, so the chart keeps its drawing; a point that shows is drawn."""
    steps = 6000
    for first in range(0, steps, 128):
        values = {s: 0.0 for s in range(first, min(first + 128, steps))}
        values.update({0: 1.0, 1: -1.0} if first == 0 else {})
        post_ingest(
            seeded.base,
            {"logs": [log(f"e{s}", s, {"flat": v}, run="flat-run") for s, v in values.items()]},
        )
    key = f"{PROJECT}/flat-run"
    open_ready(page, f"/projects/{PROJECT}/runs/flat-run")
    expect(page.locator(".live-state").first).to_have_text("live")
    assert charts(page)["flat"]["downsampled"] is True
    step = steps
    # A new bucket of one point is drawn; the points after it join it.
    while charts(page)["flat"]["skipped"] == 0 and step < steps + 40:
        post_ingest(seeded.base, {"logs": [log(f"e{step}", step, {"flat": 0.0}, run="flat-run")]})
        page.wait_for_function(
            "([k, s]) => window.__tuneplane.charts.flat.lastStep[k] === s", arg=[key, step]
        )
        step += 1
    skipped = charts(page)["flat"]["skipped"]
    assert skipped == 1
    post_ingest(seeded.base, {"logs": [log(f"e{step}", step, {"flat": 0.9}, run="flat-run")]})
    page.wait_for_function(
        "([k, s]) => window.__tuneplane.charts.flat.lastStep[k] === s", arg=[key, step]
    )
    assert charts(page)["flat"]["skipped"] == skipped
    post_ingest(
        seeded.base, {"logs": [log(f"e{step + 1}", step + 1, {"flat": 7.0}, run="flat-run")]}
    )
    page.wait_for_function("() => window.__tuneplane.charts.flat.y[1] === 7")
    assert charts(page)["flat"]["skipped"] == skipped


def test_a_chart_followed_live_is_drawn_as_a_fresh_load_draws_it(
    page: Page, seeded: Seeded
) -> None:
    """Live points reach the chart's drawing as the rows that changed; once drawn, the chart
    is the same, pixel for pixel, as the page loaded again."""

    def post(steps: range) -> None:
        events = [
            log(f"e{s}", s, {"reward": math.sin(s / 3) * (s % 7)}, run="paint-run") for s in steps
        ]
        post_ingest(seeded.base, {"logs": events})

    post(range(10))
    key = f"{PROJECT}/paint-run"
    open_ready(page, f"/projects/{PROJECT}/runs/paint-run")
    expect(page.locator(".live-state").first).to_have_text("live")
    # More rows than the drawing's tables first had room for, a few at a time.
    for first, last in ((10, 11), (11, 14), (14, 15), (15, 30)):
        post(range(first, last))
        wait_points(page, "reward", key, last)
    live = chart_png(page, "reward")
    page.reload()
    wait_points(page, "reward", key, 30)
    assert png_difference(page, live, chart_png(page, "reward")) == 0
