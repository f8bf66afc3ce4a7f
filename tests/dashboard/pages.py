"""Small helpers for driving the dashboard pages."""

from __future__ import annotations

import base64
from typing import Any

from playwright.sync_api import Page


def open_ready(page: Page, path: str) -> None:
    """Open a chart page and wait until every chart on screen has drawn its data."""
    page.goto(path)
    wait_ready(page)


def wait_ready(page: Page) -> None:
    """Wait until the current document's charts have drawn (it may still be loading)."""
    page.wait_for_function("() => window.__tuneplane?.ready === true")


def charts(page: Page) -> dict[str, Any]:
    """What uPlot was given, per metric: {runs: {<project>/<run>: points}, draws, downsampled}."""
    drawn: dict[str, Any] = page.evaluate("window.__tuneplane.charts")
    return drawn


def chart_order(page: Page) -> list[str]:
    order: list[str] = page.eval_on_selector_all(
        ".chart-slot", "slots => slots.map(s => s.dataset.metric)"
    )
    return order


def wait_points(page: Page, metric: str, run_key: str, count: int) -> None:
    page.wait_for_function(
        "([m, k, n]) => window.__tuneplane.charts[m]?.runs[k] === n", arg=[metric, run_key, count]
    )


def chart_png(page: Page, metric: str) -> str:
    """A chart's PNG download (its title, axes, data and legend), base64-encoded."""
    with page.expect_download() as download:
        page.locator(f'.chart[data-metric="{metric}"] button.png').click()
    return base64.b64encode(download.value.path().read_bytes()).decode()


#: JS: a PNG (base64) as the page decodes it, as an OffscreenCanvas's 2D context.
DECODE_PNG = """async (png) => {
    const bytes = Uint8Array.from(atob(png), (c) => c.charCodeAt(0));
    const image = await createImageBitmap(new Blob([bytes], { type: "image/png" }));
    const ctx = new OffscreenCanvas(image.width, image.height).getContext("2d");
    ctx.drawImage(image, 0, 0);
    return ctx;
}"""


def png_difference(page: Page, a: str, b: str) -> int:
    """How many pixels differ between two PNGs (base64); -1 when their sizes differ."""
    return int(
        page.evaluate(
            f"""async ([a, b]) => {{
                const decode = {DECODE_PNG};
                const [x, y] = [await decode(a), await decode(b)];
                const [w, h] = [x.canvas.width, x.canvas.height];
                if (w !== y.canvas.width || h !== y.canvas.height) return -1;
                const [p, q] = [x.getImageData(0, 0, w, h).data, y.getImageData(0, 0, w, h).data];
                let differ = 0;
                for (let i = 0; i < p.length; i += 4) {{
                    const same = p[i] === q[i] && p[i + 1] === q[i + 1] && p[i + 2] === q[i + 2];
                    if (!same) differ += 1;
                }}
                return differ;
            }}""",
            [a, b],
        )
    )
