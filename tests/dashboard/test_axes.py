"""Axis labels are whole and apart: a constant learning rate's y labels fit the axis and tell
its ticks apart, and a log scale over several decades labels decades that never touch."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from playwright.sync_api import Page

from tests.dashboard.pages import charts, open_ready
from tests.dashboard.seed import SDK_PROJECT, Seeded, post_scalars, start_sdk_run

RUN = "axes-sft"
STEPS = list(range(0, 500, 5))

#: JS: the width of each text in a canvas font, as the page's canvas measures it.
TEXT_WIDTHS = """([font, texts]) => {
    const ctx = new OffscreenCanvas(1, 1).getContext("2d");
    ctx.font = font;
    return texts.map((text) => ctx.measureText(text).width);
}"""


@pytest.fixture(scope="module")
def axes_run(seeded: Seeded) -> str:
    """A fine-tuning run with a constant learning rate and a gradient norm falling from
    1e3 to 1e-3 (six decades)."""
    token = start_sdk_run(seeded.base, seeded.admin_key, RUN)
    series = [
        {"name": "train/learning_rate", "steps": STEPS, "values": [1e-4] * len(STEPS)},
        {
            "name": "train/grad_norm",
            "steps": STEPS,
            "values": [1e3 * 10 ** (-6 * s / STEPS[-1]) for s in STEPS],
        },
        {"name": "train/loss", "steps": STEPS, "values": [2.5 - s / 400 for s in STEPS]},
    ]
    post_scalars(seeded.base, token, {"series": series})
    return f"/projects/{SDK_PROJECT}/runs/{RUN}"


def axis(page: Page, metric: str, side: int) -> dict[str, Any]:
    drawn: list[dict[str, Any]] = charts(page)[metric]["axes"]
    found = [a for a in drawn if a["side"] == side]
    assert len(found) == 1, drawn
    return found[0]


def widths(page: Page, shown: dict[str, Any]) -> list[float]:
    texts = [label["text"] for label in shown["labels"]]
    measured: list[float] = page.evaluate(TEXT_WIDTHS, [shown["font"], texts])
    return measured


def assert_y_labels_whole_and_apart(page: Page, metric: str) -> list[str]:
    """Every y label fits between the axis' left edge and its tick; no two overlap; each
    says the value of its tick. Answers the labels, top to bottom."""
    shown = axis(page, metric, 3)
    labels = shown["labels"]
    assert len(labels) >= 2, shown
    room = shown["size"] - shown["tick"] - shown["gap"]
    for label, width in zip(labels, widths(page, shown), strict=True):
        assert width <= room, f"{label['text']!r} is {width:.1f} px wide, the axis has {room}"
        assert float(label["text"]) == pytest.approx(label["value"], rel=1e-2), label
    texts = [label["text"] for label in labels]
    assert len(set(texts)) == len(texts), texts
    places = sorted(label["at"] for label in labels)
    gaps = [b - a for a, b in itertools.pairwise(places)]
    assert min(gaps) >= shown["fontSize"], (texts, places)
    return [label["text"] for label in sorted(labels, key=lambda label: label["at"])]


def assert_x_labels_apart(page: Page, metric: str) -> None:
    shown = axis(page, metric, 2)
    labelled = zip(shown["labels"], widths(page, shown), strict=True)
    placed = sorted(labelled, key=lambda pair: pair[0]["at"])
    for (a, wa), (b, wb) in itertools.pairwise(placed):
        assert b["at"] - a["at"] >= (wa + wb) / 2, (a, b)


def test_a_constant_learning_rate_has_whole_distinct_labels(page: Page, axes_run: str) -> None:
    open_ready(page, axes_run)
    page.locator('.chart-slot[data-metric="train/learning_rate"]').scroll_into_view_if_needed()
    page.wait_for_function("() => window.__tuneplane.charts['train/learning_rate']?.axes")
    texts = assert_y_labels_whole_and_apart(page, "train/learning_rate")
    assert "1e-4" in texts, texts
    assert_x_labels_apart(page, "train/learning_rate")
    # An ordinary range keeps short labels.
    loss = assert_y_labels_whole_and_apart(page, "train/loss")
    assert all(len(text) <= 4 for text in loss), loss


def test_a_log_scale_labels_decades_that_never_touch(page: Page, axes_run: str) -> None:
    open_ready(page, f"{axes_run}?log=1&metric=train/grad_norm")
    page.wait_for_function("() => window.__tuneplane.charts['train/grad_norm']?.axes")
    texts = assert_y_labels_whole_and_apart(page, "train/grad_norm")
    values = [float(text) for text in texts]
    assert all(math.log10(v) == round(math.log10(v)) for v in values), texts
    assert len(values) >= 3, texts
    assert_x_labels_apart(page, "train/grad_norm")
