"""Small helpers for driving the dashboard pages."""

from __future__ import annotations

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
