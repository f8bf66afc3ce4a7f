"""Charts over another metric (train/epoch, a token count): the server pairs each bucket with
that metric's value at the bucket's last step (``?x=``), and the page draws over it, chosen in
the controls and kept in the address."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
from playwright.sync_api import Page, Request, expect

from tests.dashboard.pages import charts, open_ready
from tests.dashboard.seed import SDK_PROJECT, Seeded, post_scalars, start_sdk_run

RUN = "x-over-epoch"
STEPS = 2000  # four blocks of stored points a series
TOKENS_FROM = 100


def epoch(step: int) -> float:
    """train/epoch is logged at every other step: an odd step pairs with the one before."""
    return round((step - step % 2) / 800, 6)


@pytest.fixture(scope="module")
def x_run(seeded: Seeded) -> str:
    token = start_sdk_run(seeded.base, seeded.admin_key, RUN)
    for first in range(0, STEPS, 500):
        steps = list(range(first, first + 500))
        even = [s for s in steps if s % 2 == 0]
        late = [s for s in steps if s >= TOKENS_FROM]
        series: list[dict[str, Any]] = [
            {"name": "train/loss", "steps": steps, "values": [2 - s / STEPS for s in steps]},
            {"name": "train/epoch", "steps": even, "values": [epoch(s) for s in even]},
        ]
        if late:
            series.append(
                {"name": "train/num_tokens", "steps": late, "values": [s * 4096.0 for s in late]}
            )
        post_scalars(seeded.base, token, {"series": series})
    return f"/projects/{SDK_PROJECT}/runs/{RUN}"


def get(seeded: Seeded, path: str, **params: Any) -> httpx.Response:
    return httpx.get(f"{seeded.base}/api/v1/projects/{SDK_PROJECT}{path}", params=params)


def test_the_server_pairs_buckets_with_another_metric_by_step(seeded: Seeded, x_run: str) -> None:
    every = get(
        seeded, f"/runs/{RUN}/points", metric="train/loss", max_points=5000, x="train/epoch"
    )
    assert every.status_code == 200, every.text
    buckets = every.json()["metrics"][0]["buckets"]
    assert len(buckets) == STEPS
    assert [b["x"] for b in buckets] == [epoch(b["step_max"]) for b in buckets]

    # Downsampled: each bucket's x is the epoch at its last step, across blocks.
    reduced = get(seeded, f"/runs/{RUN}/points/train/loss", max_points=37, x="train/epoch").json()
    assert reduced["downsampled"] is True
    assert [b["x"] for b in reduced["buckets"]] == [
        epoch(b["step_max"]) for b in reduced["buckets"]
    ]

    # Before the x metric's first point there is nothing to pair with: null.
    early = get(
        seeded,
        f"/runs/{RUN}/points",
        metric="train/loss",
        max_points=5000,
        x="train/num_tokens",
        start=95,
        end=104,
    ).json()["metrics"][0]["buckets"]
    assert [b["x"] for b in early] == [None] * 5 + [s * 4096.0 for s in range(100, 105)]

    # Several runs: a run without the x metric has null x.
    both = get(
        seeded,
        "/points",
        metric="train/loss",
        runs=f"{RUN},sdk-run",
        max_points=50,
        x="train/epoch",
    ).json()
    paired = {entry["run"]: [b["x"] for b in entry["buckets"]] for entry in both["runs"]}
    assert None not in paired[RUN]
    assert set(paired["sdk-run"]) == {None}

    # Without max_points there are no buckets to pair.
    refused = get(seeded, f"/runs/{RUN}/points", metric="train/loss", x="train/epoch")
    assert refused.status_code == 422
    assert refused.json()["error"]["details"][0]["field"] == "x"


def x_labels(page: Page, metric: str) -> list[str]:
    drawn = charts(page)[metric]["axes"]
    return [label["text"] for label in next(a for a in drawn if a["side"] == 2)["labels"]]


def test_the_page_charts_over_a_metric_chosen_and_kept_in_the_address(
    page: Page, x_run: str
) -> None:
    asked: list[dict[str, list[str]]] = []

    def on_request(request: Request) -> None:
        url = urlparse(request.url)
        if url.path.endswith("/points"):
            asked.append(parse_qs(url.query))

    page.on("request", on_request)
    open_ready(page, x_run)
    assert float(x_labels(page, "train/loss")[-1]) >= 1000  # steps: 0 … 2,000

    choose = page.get_by_label("x axis metric")
    choose.select_option("train/epoch")
    expect(page).to_have_url(f"{x_run}?x=metric%3Atrain%2Fepoch")
    page.wait_for_function("() => window.__tuneplane.charts['train/loss'].draws >= 2")
    page.wait_for_function(
        "() => window.__tuneplane.charts['train/loss'].axes[0].labels.every(l => +l.text <= 2.5)"
    )
    assert all(query.get("x") == ["train/epoch"] for query in asked[-3:]), asked
    labels = [float(text) for text in x_labels(page, "train/loss")]
    assert labels[0] >= 0
    assert labels[-1] <= 2.5  # epochs: 0 … 2.5, not steps

    # The address alone reproduces it.
    open_ready(page, f"{x_run}?x=metric:train/epoch")
    expect(page.get_by_label("x axis metric")).to_have_value("train/epoch")
    assert [float(text) for text in x_labels(page, "train/loss")][-1] <= 2.5
    assert not page.locator('input[name="x-axis"]:checked').count()

    # The cursor names the metric's value and the step.
    over = page.locator('.chart[data-metric="train/loss"] .u-over')
    box = over.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    legend = page.locator('.chart[data-metric="train/loss"] .legend-where')
    expect(legend).to_contain_text("train/epoch ")
    expect(legend).to_contain_text("step")

    # A drag zooms into a range of epochs: the server is asked for its steps, paired.
    asked.clear()
    box = over.bounding_box()
    assert box is not None
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.4, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.6, y, steps=4)
    page.mouse.up()
    expect(page.locator(".zoom")).to_contain_text("zoomed to ")
    zoomed = [query for query in asked if "start" in query]
    assert zoomed, asked
    assert all(query["x"] == ["train/epoch"] for query in zoomed)
    start, end = int(zoomed[0]["start"][0]), int(zoomed[0]["end"][0])
    assert 600 < start < end < 1400, (start, end)  # epochs 1.0 … 1.5 are steps 800 … 1,200

    # Back to steps.
    page.locator('input[name="x-axis"][value="step"]').check(force=True)
    expect(page).to_have_url(x_run)
    expect(page.get_by_label("x axis metric")).to_have_value("")
