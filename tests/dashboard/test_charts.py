"""Charts: comparison of runs, zoom re-queried at full resolution, min-max bands where
downsampled, NaN/inf marks, PNG download."""

from __future__ import annotations

import math
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import Locator, Page, Request, expect

from tests.dashboard.conftest import Watched
from tests.dashboard.pages import (
    DECODE_PNG,
    chart_order,
    chart_png,
    charts,
    open_ready,
    png_difference,
    wait_points,
    wait_ready,
)
from tests.dashboard.seed import PROJECT, SDK_PROJECT, Seeded, arena_run, post_ingest
from tests.helpers import log

LONG_STEPS = 3000


@pytest.fixture(scope="module")
def long_run(seeded: Seeded) -> str:
    """A run with more points than a chart is wide, so the server downsamples it."""
    for first in range(0, LONG_STEPS, 128):
        steps = range(first, min(first + 128, LONG_STEPS))
        post_ingest(
            seeded.base,
            {
                "logs": [
                    log(
                        f"e{s}",
                        s,
                        {"reward": math.sin(s / 50) + (50 if s == 1234 else 0)},
                        run="long-run",
                    )
                    for s in steps
                ]
            },
        )
    return f"/projects/{PROJECT}/runs/long-run"


def test_two_runs_are_overlaid_one_colour_each_with_values_under_the_cursor(page: Page) -> None:
    reads: list[str] = []
    page.on("request", lambda r: reads.append(urlparse(r.url).path))
    page.goto(f"/projects/{PROJECT}")
    page.get_by_label("select grpo-qwen-7").check()
    page.get_by_label("select grpo-qwen-8").check()
    page.get_by_role("link", name="Compare selected").click()
    expect(page).to_have_url(f"/compare?project={PROJECT}&runs=grpo-qwen-7%2Cgrpo-qwen-8")
    wait_ready(page)
    assert charts(page)["reward"]["runs"] == {
        f"{PROJECT}/grpo-qwen-7": 300,
        f"{PROJECT}/grpo-qwen-8": 240,
    }
    # Both runs come in one read each: run objects, metric lists, a chart's points.
    for path in ("/runs", "/metrics", "/points"):
        assert f"/api/v1/projects/{PROJECT}{path}" in reads
    assert not [path for path in reads if "/runs/grpo-qwen-7" in path and "stream" not in path]
    legend = page.locator('.chart[data-metric="reward"] .legend')
    expect(legend.locator(".legend-row")).to_have_count(2)
    colours = legend.locator(".swatch").evaluate_all("els => els.map(e => e.style.background)")
    assert len(set(colours)) == 2
    expect(legend.locator(".legend-label")).to_have_text(["grpo-qwen-7", "grpo-qwen-8"])

    # Under the cursor the legend shows that step's values of both runs.
    before = legend.locator(".legend-value").all_text_contents()
    over = page.locator('.chart[data-metric="reward"] .u-over')
    box = over.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * 0.2, box["y"] + box["height"] / 2)
    expect(legend.locator(".legend-where")).not_to_have_text("step 299")
    after = legend.locator(".legend-value").all_text_contents()
    assert after != before
    assert "no data" not in after
    # And a dot on each run's line, in its colour.
    dots = page.locator('.chart[data-metric="reward"] .cursor-dot:not([hidden])')
    expect(dots).to_have_count(2)
    assert dots.evaluate_all("els => els.map(e => e.style.background)") == colours

    page.locator('input[name="x-axis"][value="time"]').check(force=True)
    expect(page).to_have_url(f"/compare?project={PROJECT}&runs=grpo-qwen-7%2Cgrpo-qwen-8&x=time")
    page.get_by_role("link", name="remove").first.click()
    expect(page).to_have_url(f"/compare?project={PROJECT}&runs=grpo-qwen-8&x=time")
    wait_ready(page)
    assert charts(page)["reward"]["runs"] == {f"{PROJECT}/grpo-qwen-8": 240}


def test_legend_of_many_runs_shows_values_under_the_cursor_only(page: Page, seeded: Seeded) -> None:
    runs = [f"many-{i}" for i in range(5)]
    for i, run in enumerate(runs):
        arena_run(seeded.base, run, i, 40, project="many")
    page.goto(f"/compare?project=many&runs={','.join(runs)}")
    wait_ready(page)
    legend = page.locator('.chart[data-metric="reward"] .legend')
    expect(legend.locator(".legend-label")).to_have_text(runs)
    # Five runs are past the last-values limit: names only while the cursor is elsewhere.
    expect(legend.locator(".legend-where")).to_have_text("values under the cursor")
    assert legend.locator(".legend-value").all_text_contents() == [""] * 5

    over = page.locator('.chart[data-metric="reward"] .u-over')
    box = over.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    expect(legend.locator(".legend-where")).to_contain_text("step")
    values = legend.locator(".legend-value").all_text_contents()
    assert all(value and value != "no data" for value in values), values

    expect(page.locator('.chart[data-metric="reward"] .cursor-dot:not([hidden])')).to_have_count(5)

    page.mouse.move(0, 0)
    expect(legend.locator(".legend-where")).to_have_text("values under the cursor")
    expect(page.locator('.chart[data-metric="reward"] .cursor-dot:not([hidden])')).to_have_count(0)
    assert legend.locator(".legend-value").all_text_contents() == [""] * 5


def points_requests(page: Page) -> list[dict[str, list[str]]]:
    seen: list[dict[str, list[str]]] = []

    def on_request(request: Request) -> None:
        url = urlparse(request.url)
        if url.path.endswith("/points"):
            seen.append(parse_qs(url.query))

    page.on("request", on_request)
    return seen


def drag(page: Page, over: Locator, start: float, end: float) -> None:
    """Drag across a chart from one fraction of its width to another."""
    box = over.bounding_box()
    assert box is not None
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * start, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * end, y, steps=4)
    page.mouse.up()


def test_drag_zoom_requeries_the_range_at_full_resolution(page: Page, long_run: str) -> None:
    seen = points_requests(page)
    open_ready(page, long_run)
    key = f"{PROJECT}/long-run"
    chart = page.locator('.chart[data-metric="reward"]')
    width = chart.locator(".plot").evaluate("el => el.clientWidth")
    first = charts(page)["reward"]
    assert first["downsampled"] is True
    assert 0 < first["runs"][key] <= width
    assert seen == [{"metric": ["reward"], "max_points": [str(width)]}]
    expect(chart.locator(".badge")).to_have_text(f"3,000 pts → {first['runs'][key]}")

    over = chart.locator(".u-over")
    drag(page, over, 0.40, 0.45)
    page.wait_for_function("() => window.__tuneplane?.charts.reward.draws === 2", polling=50)
    zoom = seen[-1]
    start, end = int(zoom["start"][0]), int(zoom["end"][0])
    assert zoom["max_points"] == [str(width)]
    assert 0 < end - start + 1 < width  # a narrow range: every original point
    zoomed = charts(page)["reward"]
    assert zoomed["downsampled"] is False
    assert zoomed["runs"][key] == end - start + 1
    expect(page.locator(".zoom")).to_contain_text("zoomed to")

    over.dblclick()
    page.wait_for_function("() => window.__tuneplane?.charts.reward.draws === 3")
    assert charts(page)["reward"]["runs"][key] == first["runs"][key]
    expect(page.locator(".zoom")).to_be_hidden()
    assert len(seen) == 2  # the full view was kept, not fetched again


def test_a_zoom_is_in_the_address_so_a_shared_link_shows_it(page: Page, long_run: str) -> None:
    open_ready(page, long_run)
    key = f"{PROJECT}/long-run"
    full = charts(page)["reward"]["runs"][key]
    over = page.locator('.chart[data-metric="reward"] .u-over')
    drag(page, over, 0.40, 0.45)
    page.wait_for_function("() => window.__tuneplane?.charts.reward.draws === 2", polling=50)
    zoomed = charts(page)["reward"]
    query = parse_qs(urlparse(page.url).query)
    lo, hi = (float(v) for v in query["zoom"][0].split(","))
    assert 0 < lo < hi < LONG_STEPS
    assert zoomed["runs"][key] == math.floor(hi) - math.ceil(lo) + 1
    shared = page.url

    # The link, opened afresh, asks the server for that range only and draws it.
    other = page.context.new_page()
    seen = points_requests(other)
    other.goto(shared)
    wait_ready(other)
    assert charts(other)["reward"]["runs"] == zoomed["runs"]
    assert charts(other)["reward"]["draws"] == 1
    assert seen[-1]["start"] == [str(math.ceil(lo))]
    assert seen[-1]["end"] == [str(math.floor(hi))]
    expect(other.locator(".zoom")).to_contain_text("zoomed to")

    # Resetting the zoom takes it out of the address.
    other.locator('.chart[data-metric="reward"] .u-over').dblclick()
    other.wait_for_function("() => window.__tuneplane?.charts.reward.draws === 2")
    assert charts(other)["reward"]["runs"][key] == full
    expect(other.locator(".zoom")).to_be_hidden()
    assert "zoom" not in parse_qs(urlparse(other.url).query)

    # So does a new x axis, whose units the range is not in.
    drag(page, over, 0.2, 0.3)
    page.wait_for_function("() => window.__tuneplane?.charts.reward.draws === 3", polling=50)
    assert parse_qs(urlparse(page.url).query)["zoom"] != query["zoom"]
    page.locator('input[name="x-axis"][value="time"]').check(force=True)
    expect(page).to_have_url(f"{long_run}?x=time")
    other.close()


#: Pixels tinted with the run's colour (blue, #1f77b4, faded for the band, over white) in the
#: top quarter of the chart in its PNG download, where only the band of the spike reaches:
#: the lines, bucket means of values in [-1, 1], stay near the bottom. Grid, axis text and
#: title are grey. The
#: PNG has the title above the chart (1.5 lines of 18 pixels), then the chart (220 high).
SPIKE_PIXELS = f"""async (png) => {{
    const ctx = await ({DECODE_PNG})(png);
    const pixels = ctx.getImageData(0, 27, ctx.canvas.width, 220 / 4).data;
    let blue = 0;
    for (let i = 0; i < pixels.length; i += 4) {{
        if (pixels[i + 2] - pixels[i] > 4) blue += 1;
    }}
    return blue;
}}"""


def spike_pixels(page: Page) -> int:
    """The reward chart's blue pixels near its top, as its PNG download shows them."""
    return int(page.evaluate(SPIKE_PIXELS, chart_png(page, "reward")))


#: Who draws a chart's data layer: a canvas handed to a worker has no context on the page.
LAYER_DRAWN_BY = """() => {
    const layer = document.querySelector('.chart[data-metric="reward"] canvas.plot-layer');
    try {
        return layer.getContext("2d") ? "page" : null;
    } catch {
        return "worker";
    }
}"""


def test_downsampled_series_keep_their_spikes_in_a_band(page: Page, long_run: str) -> None:
    open_ready(page, long_run)
    assert page.evaluate(LAYER_DRAWN_BY) == "worker"
    drawn = charts(page)["reward"]
    # Bucket means hide the one-step spike at step 1234 (+50); the min-max band shows it.
    assert drawn["bands"] == 1
    assert drawn["y"][1] > 49
    assert spike_pixels(page) > 0
    page.locator('input[name="log"]').check()
    page.wait_for_function("() => window.__tuneplane?.charts.reward.draws === 2")
    assert charts(page)["reward"]["y"][1] > 49
    # The spike's bucket has a mean below zero: on a log scale only its band can show it.
    assert spike_pixels(page) > 0


def test_where_no_worker_can_draw_the_page_draws_the_data(page: Page, long_run: str) -> None:
    # A browser that cannot hand a canvas to a worker.
    page.add_init_script("delete HTMLCanvasElement.prototype.transferControlToOffscreen")
    open_ready(page, long_run)
    assert page.evaluate(LAYER_DRAWN_BY) == "page"
    assert spike_pixels(page) > 0


def test_a_drawing_worker_that_fails_says_so(page: Page, watched: Watched) -> None:
    page.route(
        "**/static/charts/painter.js",
        lambda route: route.fulfill(content_type="text/javascript", body="throw new Error('x');"),
    )
    page.goto(f"/projects/{PROJECT}/runs/grpo-qwen-7")
    failed = "the worker drawing the charts failed"
    for _ in range(100):
        if any(failed in error for error in watched.errors):
            break
        page.wait_for_timeout(50)
    assert any(failed in error for error in watched.errors), watched.errors
    watched.errors.clear()


def test_a_changed_view_is_drawn_as_a_fresh_load_of_it(page: Page) -> None:
    path = f"/compare?project={PROJECT}&runs=grpo-qwen-7,grpo-qwen-8"
    open_ready(page, path)
    draws = charts(page)["reward"]["draws"]
    page.locator('input[name="smooth"]').fill("0.8")
    page.wait_for_function("n => window.__tuneplane.charts.reward.draws > n", arg=draws, polling=50)
    changed = chart_png(page, "reward")
    open_ready(page, path + "&smooth=0.8")
    assert png_difference(page, changed, chart_png(page, "reward")) == 0


def test_nan_and_inf_steps_are_marked_not_hidden(page: Page) -> None:
    open_ready(page, f"/projects/{SDK_PROJECT}/runs/sdk-run")
    assert chart_order(page) == ["train/loss", "train/reward"]
    badge = page.locator('.chart[data-metric="train/loss"] .badge.warn')
    expect(badge).to_have_text("3 NaN/inf")
    expect(badge).to_have_attribute("title", "NaN/±inf at step 400: nan, 401: inf, 402: -inf")
    wait_points(page, "train/loss", f"{SDK_PROJECT}/sdk-run", 400)


def test_a_chart_downloads_as_png(page: Page) -> None:
    open_ready(page, f"/projects/{PROJECT}/runs/grpo-qwen-7")
    with page.expect_download() as download:
        page.locator('.chart[data-metric="reward"] button.png').click()
    assert download.value.suggested_filename == "grpo-qwen-7-reward.png"
    path = download.value.path()
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
