"""Dark mode: the system's preference (prefers-color-scheme) unless the reader chose a theme
with the top bar's switch, remembered in the browser; the charts' axes, grid, text and PNG
download follow."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page, expect

from tests.dashboard.pages import DECODE_PNG, chart_png, charts, open_ready
from tests.dashboard.seed import PROJECT

RUN_PAGE = f"/projects/{PROJECT}/runs/grpo-qwen-7"

#: JS: the relative luminance (0 black, 1 white) of a CSS colour as the page resolves it.
LUMINANCE = """(color) => {
    const probe = document.createElement("span");
    probe.style.color = color;
    document.body.append(probe);
    const [r, g, b] = getComputedStyle(probe).color.match(/[\\d.]+/g).map(Number);
    probe.remove();
    const lin = (c) => ((c /= 255) <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4);
    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
}"""

#: JS: the luminance of the top-left pixel of a PNG (base64): the chart's background.
PNG_CORNER = f"""async (png) => {{
    const ctx = await ({DECODE_PNG})(png);
    const [r, g, b] = ctx.getImageData(2, 2, 1, 1).data;
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
}}"""


def luminance(page: Page, color: str) -> float:
    return float(page.evaluate(LUMINANCE, color))


def background(page: Page, selector: str) -> float:
    color = page.eval_on_selector(selector, "el => getComputedStyle(el).backgroundColor")
    return luminance(page, color)


def axis_colors(page: Page) -> dict[str, Any]:
    drawn = charts(page)["reward"]["axes"]
    y = next(axis for axis in drawn if axis["side"] == 3)
    return {"text": luminance(page, y["stroke"]), "grid": luminance(page, y["grid"])}


def assert_dark(page: Page) -> None:
    assert background(page, "html") < 0.05
    assert background(page, ".chart-slot") < 0.05
    assert luminance(page, page.eval_on_selector("body", "el => getComputedStyle(el).color")) > 0.5
    colors = axis_colors(page)
    assert colors["text"] > 0.3, colors
    assert colors["grid"] < 0.05, colors


def assert_light(page: Page) -> None:
    assert background(page, "html") > 0.8
    assert background(page, ".chart-slot") > 0.9
    colors = axis_colors(page)
    assert colors["text"] < 0.2, colors
    assert colors["grid"] > 0.7, colors


def test_a_dark_system_gets_dark_pages_and_charts(page: Page) -> None:
    page.emulate_media(color_scheme="dark")
    open_ready(page, RUN_PAGE)
    assert_dark(page)
    assert page.evaluate(PNG_CORNER, chart_png(page, "reward")) < 0.2
    # The system turning light is followed while the reader has chosen nothing.
    draws = charts(page)["reward"]["draws"]
    page.emulate_media(color_scheme="light")
    page.wait_for_function("n => window.__tuneplane.charts.reward.draws > n", arg=draws)
    assert_light(page)


def test_the_switch_is_remembered_and_redraws_the_charts(page: Page) -> None:
    page.emulate_media(color_scheme="dark")
    open_ready(page, RUN_PAGE)
    switch = page.locator(".top-links .theme-toggle")
    expect(switch).to_have_text("light")
    draws = charts(page)["reward"]["draws"]
    switch.click()
    page.wait_for_function("n => window.__tuneplane.charts.reward.draws > n", arg=draws)
    expect(switch).to_have_text("dark")
    assert_light(page)
    assert page.evaluate(PNG_CORNER, chart_png(page, "reward")) > 0.9
    assert page.evaluate("localStorage.getItem('tuneplane.theme')") == "light"

    # Chosen, it outlives a reload and the system's preference.
    open_ready(page, RUN_PAGE)
    assert_light(page)
    page.locator(".top-links .theme-toggle").click()
    page.wait_for_function("() => document.documentElement.dataset.theme === 'dark'")
    page.emulate_media(color_scheme="light")
    open_ready(page, RUN_PAGE)
    assert_dark(page)


#: JS: the colour most pixels of the events tab's histogram have (its bars), as "r,g,b".
BAR_COLOUR = """() => {
    const canvas = document.querySelector(".dist-figure canvas");
    const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
    const seen = new Map();
    for (let i = 0; i < data.length; i += 4) {
        if (data[i + 3] !== 255) continue;
        const key = `${data[i]},${data[i + 1]},${data[i + 2]}`;
        seen.set(key, (seen.get(key) ?? 0) + 1);
    }
    return [...seen].sort((a, b) => b[1] - a[1])[0][0];
}"""


def test_histograms_are_drawn_again_in_the_new_theme(page: Page) -> None:
    page.goto("/projects/lab/runs/eval-base?tab=events")
    page.wait_for_function("() => window.__tuneplane.events?.histogram")
    assert page.evaluate(BAR_COLOUR) == "31,95,191"  # --accent, light
    page.locator(".top-links .theme-toggle").click()
    page.wait_for_function(f"() => ({BAR_COLOUR})() === '110,162,240'")  # --accent, dark
