"""Groups charted as one: on the compare page (and from the runs table's group links) the
runs of a group become one mean line with a min-max or ±std band, chosen in the controls
and kept in the address, with the group's runs one click away."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.dashboard.pages import charts, open_ready
from tests.dashboard.seed import SDK_PROJECT, Seeded, post_scalars, start_sdk_run
from tests.dashboard.seed_groups import BASELINE, GROUP, SEEDS, STEPS, seed_groups

COMPARE = f"/compare?project={SDK_PROJECT}&runs={','.join([*SEEDS, BASELINE])}"
GROUP_KEY = f"group:{SDK_PROJECT}/{GROUP}"
LOSS = '.chart[data-metric="train/loss"]'


@pytest.fixture(scope="module")
def grouped(seeded: Seeded) -> None:
    seed_groups(seeded.base, seeded.admin_key)


def drawn_keys(page: Page) -> set[str]:
    return set(charts(page)["train/loss"]["runs"])


def wait_keys(page: Page, keys: set[str]) -> None:
    page.wait_for_function(
        "(keys) => { const runs = window.__tuneplane.charts['train/loss']?.runs ?? {};"
        " return JSON.stringify(Object.keys(runs).sort()) === JSON.stringify(keys); }",
        arg=sorted(keys),
    )


def query_of(page: Page) -> dict[str, list[str]]:
    return parse_qs(urlparse(page.url).query)


def test_a_group_is_drawn_as_its_mean_with_a_band_and_its_runs_a_click_away(
    page: Page, grouped: None
) -> None:
    runs = {f"{SDK_PROJECT}/{run}" for run in STEPS}
    open_ready(page, COMPARE)
    assert drawn_keys(page) == runs  # each run its own line, as before
    page.get_by_label("groups as mean").check()
    wait_keys(page, {GROUP_KEY, f"{SDK_PROJECT}/{BASELINE}"})
    assert query_of(page)["groups"] == ["1"]
    chart = charts(page)["train/loss"]
    assert chart["bands"] >= 1  # the group's band (the baseline fits: no band of its own)
    assert chart["runs"][GROUP_KEY] == 400  # one cell a step: every step is its own
    group_row = page.locator(f"{LOSS} .group-row")
    expect(group_row.locator(".legend-label")).to_have_text(GROUP)
    expect(group_row.locator(".legend-band")).to_have_text("mean, min\u2013max band")
    minmax = chart["y"]

    # Under the cursor, late in the run: the mean of the two runs that reached that step.
    over = page.locator(f"{LOSS} .u-over")
    box = over.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * 0.95, box["y"] + box["height"] / 2)
    expect(group_row.locator(".legend-raw")).to_contain_text("mean of 2 of 3 runs")
    page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] / 2)
    expect(group_row.locator(".legend-raw")).to_contain_text("mean of 3 of 3 runs")

    # The ±std band instead, said in the legend: the chart's top (the group's first step, three
    # runs there) is the mean + std, no longer the highest run.
    page.get_by_label("group band").select_option("std")
    expect(group_row.locator(".legend-band")).to_have_text("mean ± std band")
    assert query_of(page)["band"] == ["std"]
    page.wait_for_function(
        "(y) => { const now = window.__tuneplane.charts['train/loss'].y; return now[1] !== y[1]; }",
        arg=minmax,
    )

    # The group's runs, one click away, and gone again.
    group_row.get_by_role("button", name="show its 3 runs").click()
    wait_keys(page, {GROUP_KEY, *runs})
    assert query_of(page)["expand"] == [GROUP]
    expect(page.locator(f"{LOSS} .member-row")).to_have_count(3)
    group_row.get_by_role("button", name="hide its 3 runs").click()
    wait_keys(page, {GROUP_KEY, f"{SDK_PROJECT}/{BASELINE}"})

    # The address alone draws it again.
    open_ready(page, f"{COMPARE}&groups=1&band=std&expand={GROUP}")
    wait_keys(page, {GROUP_KEY, *runs})
    expect(page.get_by_label("group band")).to_have_value("std")


def test_a_group_in_the_runs_table_links_to_its_runs_charted_as_one(
    page: Page, grouped: None
) -> None:
    page.goto(f"/projects/{SDK_PROJECT}")
    link = page.locator(f'tr[data-run="{SEEDS[0]}"] a.group')
    expect(link).to_have_text(GROUP)
    link.click()
    page.wait_for_function("() => window.__tuneplane?.ready === true")
    wait_keys(page, {GROUP_KEY})
    assert sorted(query_of(page)["runs"][0].split(",")) == SEEDS
    expect(page.get_by_label("groups as mean")).to_be_checked()


def test_groups_follow_the_x_axis_metric_and_a_zoom(page: Page, grouped: None) -> None:
    asked: list[dict[str, list[str]]] = []
    page.on(
        "request",
        lambda request: (
            asked.append(parse_qs(urlparse(request.url).query))
            if urlparse(request.url).path.endswith("/groups/points")
            else None
        ),
    )
    open_ready(page, f"{COMPARE}&groups=1&zoom=100,200")
    wait_keys(page, {GROUP_KEY, f"{SDK_PROJECT}/{BASELINE}"})
    zoomed = [query for query in asked if "start" in query]
    assert zoomed, asked
    assert (zoomed[-1]["start"], zoomed[-1]["end"]) == (["100"], ["200"])


def test_a_group_follows_its_runs_live_points(page: Page, seeded: Seeded) -> None:
    tokens = {}
    for run in ("live-a", "live-b"):
        tokens[run] = start_sdk_run(seeded.base, seeded.admin_key, run)
        renamed = httpx.patch(
            f"{seeded.base}/api/v1/projects/{SDK_PROJECT}/runs/{run}",
            json={"group": "live-g"},
            headers={"Authorization": f"Bearer {seeded.admin_key}"},
        )
        assert renamed.status_code == 200, renamed.text
        steps = list(range(50))
        body = {"series": [{"name": "train/loss", "steps": steps, "values": [1.0] * 50}]}
        post_scalars(seeded.base, tokens[run], body)
    key = f"group:{SDK_PROJECT}/live-g"
    open_ready(page, f"/compare?project={SDK_PROJECT}&runs=live-a,live-b&groups=1")
    wait_keys(page, {key})
    assert charts(page)["train/loss"]["runs"][key] == 50
    # Ten more steps of one run: the group's mean reaches them, one run there.
    more = {"series": [{"name": "train/loss", "steps": list(range(50, 60)), "values": [3.0] * 10}]}
    post_scalars(seeded.base, tokens["live-a"], more)
    page.wait_for_function(
        "(key) => window.__tuneplane.charts['train/loss'].runs[key] === 60", arg=key
    )
    assert charts(page)["train/loss"]["lastStep"][key] == 59


def wait_group(page: Page, metric: str, key: str) -> None:
    page.wait_for_function(
        "([m, k]) => (window.__tuneplane.charts[m]?.runs ?? {})[k] > 0", arg=[metric, key]
    )


def test_the_runs_page_charts_each_listed_group_as_one(page: Page, grouped: None) -> None:
    page.goto(f"/projects/{SDK_PROJECT}?q=group~qwen")
    panel = page.locator(".group-charts")
    expect(panel).to_be_visible()
    expect(panel.locator(".grouped-count")).to_have_text("1 group of 3 listed runs")
    # The metric people come for first: the training loss.
    expect(panel.get_by_label("group chart metric")).to_have_value("train/loss")
    wait_group(page, "train/loss", GROUP_KEY)
    chart = charts(page)["train/loss"]
    assert set(chart["runs"]) == {GROUP_KEY}
    assert chart["runs"][GROUP_KEY] == 400
    assert chart["bands"] >= 1
    group_row = panel.locator(f"{LOSS} .group-row")
    expect(group_row.locator(".legend-label")).to_have_text(GROUP)
    expect(group_row.locator(".legend-band")).to_have_text("mean, min\u2013max band")

    # The group's runs, one click away.
    group_row.get_by_role("button", name="show its 3 runs").click()
    wait_keys(page, {GROUP_KEY, *(f"{SDK_PROJECT}/{run}" for run in SEEDS)})
    expect(panel.locator(f"{LOSS} .member-row")).to_have_count(3)

    # The ±std band and another metric, kept in the address.
    panel.get_by_label("group chart band").select_option("std")
    expect(group_row.locator(".legend-band")).to_have_text("mean ± std band")
    panel.get_by_label("group chart metric").select_option("train/reward")
    wait_group(page, "train/reward", GROUP_KEY)
    expect(panel.locator('.chart[data-metric="train/reward"]')).to_be_visible()
    assert (query_of(page)["gmetric"], query_of(page)["gband"]) == (["train/reward"], ["std"])
    page.reload()
    expect(page.get_by_label("group chart metric")).to_have_value("train/reward")
    wait_group(page, "train/reward", GROUP_KEY)


def test_a_group_marks_where_its_runs_were_nan_and_says_how_many_were_valid(
    page: Page, seeded: Seeded
) -> None:
    runs = ["nan-a", "nan-b", "nan-c"]
    tokens = grouped_runs(seeded, "nan-g", runs)
    for i, run in enumerate(runs):
        token = tokens[run]
        values = [2.0 / (1 + step) + 0.05 * i for step in range(100)]
        body: dict[str, object] = {
            "series": [{"name": "train/loss", "steps": list(range(100)), "values": values}]
        }
        if run != "nan-a":  # two of the three diverge at step 50
            body["invalid"] = [{"name": "train/loss", "steps": [50], "kinds": ["nan"]}]
        post_scalars(seeded.base, token, body)
    key = f"group:{SDK_PROJECT}/nan-g"
    open_ready(page, f"/compare?project={SDK_PROJECT}&runs={','.join(runs)}&groups=1")
    wait_group(page, "train/loss", key)
    page.wait_for_function(
        "(k) => window.__tuneplane.charts['train/loss'].marks?.[k] === 1", arg=key
    )
    chart = page.locator(LOSS)
    badge = chart.locator(".badge.warn")
    expect(badge).to_have_text("1 NaN/inf")
    expect(badge).to_have_attribute("title", "NaN/±inf at step 50: nan")
    # Under the cursor at step 50: the mean is of the one run still finite there.
    over = chart.locator(".u-over")
    box = over.bounding_box()
    assert box is not None
    group_row = chart.locator(".group-row")
    for fraction in (0.495, 0.5, 0.505, 0.49, 0.51):
        page.mouse.move(box["x"] + box["width"] * fraction, box["y"] + box["height"] / 2)
        text = group_row.locator(".legend-raw").text_content() or ""
        if "NaN" in text:
            break
    expect(group_row.locator(".legend-raw")).to_contain_text("mean of 1 of 3 runs (2 NaN/inf here)")


def grouped_runs(seeded: Seeded, group: str, runs: list[str]) -> dict[str, str]:
    """New runs of ``group``, each with an attempt: their ingest tokens."""
    tokens = {}
    for run in runs:
        tokens[run] = start_sdk_run(seeded.base, seeded.admin_key, run)
        renamed = httpx.patch(
            f"{seeded.base}/api/v1/projects/{SDK_PROJECT}/runs/{run}",
            json={"group": group},
            headers={"Authorization": f"Bearer {seeded.admin_key}"},
        )
        assert renamed.status_code == 200, renamed.text
    return tokens


def test_the_runs_page_s_group_charts_follow_new_points(page: Page, seeded: Seeded) -> None:
    tokens = grouped_runs(seeded, "rows-g", ["rows-a", "rows-b"])
    for token in tokens.values():
        body = {"series": [{"name": "train/loss", "steps": list(range(50)), "values": [1.0] * 50}]}
        post_scalars(seeded.base, token, body)
    key = f"group:{SDK_PROJECT}/rows-g"
    page.goto(f"/projects/{SDK_PROJECT}?q=group=rows-g")
    wait_group(page, "train/loss", key)
    assert charts(page)["train/loss"]["runs"][key] == 50
    # Ten more steps of one run: the next refresh of the table brings them to the chart.
    more = {"series": [{"name": "train/loss", "steps": list(range(50, 60)), "values": [2.0] * 10}]}
    post_scalars(seeded.base, tokens["rows-a"], more)
    page.wait_for_function(
        "(key) => window.__tuneplane.charts['train/loss'].runs[key] === 60", arg=key, timeout=15_000
    )
