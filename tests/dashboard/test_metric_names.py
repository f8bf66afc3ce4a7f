"""Metric names a URL path cannot carry (dot segments, "%", "?", "#", "<tags>") are charted,
compared, zoomed and labelled as they were reported: the dashboard names metrics in the
query, never in the path."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import Page, expect

from tests.dashboard.pages import charts, open_ready
from tests.dashboard.seed import SDK_PROJECT, XSS, Seeded, post_scalars, start_sdk_run
from tests.dashboard.test_charts import drag

NAMES = ["a/../b", "..", ".", "./x/.", "p%41q", "what?#now", XSS]
STEPS = 40
RUNS = ("odd-names", "odd-names-2")


@pytest.fixture(scope="module")
def odd_runs(seeded: Seeded) -> None:
    for offset, run in enumerate(RUNS):
        token = start_sdk_run(seeded.base, seeded.admin_key, run)
        series = [
            {
                "name": name,
                "steps": list(range(STEPS)),
                "values": [i + offset + s / 100 for s in range(STEPS)],
            }
            for i, name in enumerate(NAMES)
        ]
        invalid = [{"name": name, "steps": [STEPS], "kinds": ["nan"]} for name in NAMES]
        post_scalars(seeded.base, token, {"series": series, "invalid": invalid})


@pytest.fixture
def tall(page: Page) -> Page:
    """A viewport with every chart of these runs on screen (charts load when shown)."""
    page.set_viewport_size({"width": 1400, "height": 3000})
    return page


def test_every_name_is_charted_and_labelled_as_reported(tall: Page, odd_runs: None) -> None:
    page = tall
    open_ready(page, f"/projects/{SDK_PROJECT}/runs/{RUNS[0]}")
    key = f"{SDK_PROJECT}/{RUNS[0]}"
    drawn = charts(page)
    assert {name: drawn[name]["runs"] for name in NAMES} == {name: {key: STEPS} for name in NAMES}
    # Each chart has its own values: no name was read as another.
    for i, name in enumerate(NAMES):
        assert drawn[name]["y"] == pytest.approx([i, i + (STEPS - 1) / 100])
    headings = page.locator(".chart h3.metric").all_text_contents()
    assert sorted(headings) == sorted(NAMES)
    for name in NAMES:
        badge = page.locator(".chart", has=page.get_by_role("heading", name=name, exact=True))
        expect(badge.locator(".badge.warn")).to_have_text("1 NaN/inf")

    # A zoom re-queries the range of these names too.
    over = page.locator(".chart", has=page.get_by_role("heading", name="a/../b", exact=True))
    drag(page, over.locator(".u-over"), 0.25, 0.6)
    page.wait_for_function("() => window.__tuneplane?.charts['a/../b']?.draws === 2", polling=50)
    zoomed = charts(page)["a/../b"]["runs"][key]
    assert 0 < zoomed < STEPS
    assert "zoom" in parse_qs(urlparse(page.url).query)


def test_runs_compared_on_such_names(tall: Page, odd_runs: None) -> None:
    page = tall
    open_ready(page, f"/compare?project={SDK_PROJECT}&runs={','.join(RUNS)}")
    drawn = charts(page)
    for i, name in enumerate(NAMES):
        assert drawn[name]["runs"] == {f"{SDK_PROJECT}/{run}": STEPS for run in RUNS}
        assert drawn[name]["y"] == pytest.approx([i, i + 1 + (STEPS - 1) / 100])
