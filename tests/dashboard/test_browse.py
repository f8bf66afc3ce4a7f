"""Projects → runs → run page: tables, every metric charted in order, deep links, empty
states."""

from __future__ import annotations

import httpx
from playwright.sync_api import Page, expect

from tests.dashboard.conftest import Watched
from tests.dashboard.pages import chart_order, charts, open_ready
from tests.dashboard.seed import PROJECT, Seeded
from tuneplane.contract.ids import id_for_name

RUN_PAGE = f"/projects/{PROJECT}/runs/grpo-qwen-7"
SEEDED_RUNS = ["grpo-qwen-7", "grpo-qwen-8", "alert-only"]
METRICS = ["loss", "reward", "train/entropy", "train/kl", "arena/step_seconds", "eval/accuracy"]


def test_projects_lead_to_a_filterable_runs_table(page: Page) -> None:
    page.goto("/")
    page.get_by_role("link", name=PROJECT, exact=True).click()
    expect(page).to_have_url(f"/projects/{PROJECT}")
    # Other tests add runs to the shared server's project: only the seed's are known here.
    seeded = [page.locator(f'table.runs tbody tr[data-run="{run}"]') for run in SEEDED_RUNS]
    for seeded_row in seeded:
        expect(seeded_row).to_have_count(1)
    row = seeded[0]
    expect(row.locator("td").nth(6)).to_have_text("299")  # last step
    expect(row.locator(".chip")).to_have_count(4)  # of 5 config items: 4 and "+1"
    expect(row.locator(".config")).to_contain_text("+1")
    expect(row.locator(".chip").first).to_contain_text("participant")
    expect(row.locator(".health")).to_have_text("unknown")
    expect(row.get_by_role("link", name="4")).to_have_attribute(
        "href", f"/reports?project={PROJECT}&runs=grpo-qwen-7"
    )

    page.get_by_placeholder("filter runs").fill("sub-0001")
    expect(seeded[1]).to_have_count(1)
    expect(seeded[0]).to_have_count(0)
    expect(seeded[2]).to_have_count(0)
    expect(page).to_have_url(f"/projects/{PROJECT}?q=sub-0001")


def test_the_run_page_charts_every_metric_grouped_loss_reward_and_training_first(
    page: Page,
) -> None:
    page.set_viewport_size({"width": 1400, "height": 2400})
    open_ready(page, RUN_PAGE)
    assert chart_order(page) == METRICS
    groups = page.eval_on_selector_all("details.group", "gs => gs.map(g => g.dataset.prefix)")
    assert groups == ["", "train", "arena", "eval"]
    drawn = charts(page)
    assert {metric: entry["runs"] for metric, entry in drawn.items()} == {
        metric: {f"{PROJECT}/grpo-qwen-7": 300} for metric in METRICS
    }
    # uPlot's canvas (axes, grid) and the layer with the run's data, for every chart.
    expect(page.locator(".chart canvas:not(.plot-layer)")).to_have_count(len(METRICS))
    expect(page.locator(".chart canvas.plot-layer")).to_have_count(len(METRICS))
    expect(page.locator('.chart[data-metric="reward"] .legend-value')).to_have_text("1.009")
    csv = page.get_by_role("link", name="Download CSV")
    href = csv.get_attribute("href")
    assert href == f"/api/v1/projects/{PROJECT}/runs/grpo-qwen-7/export.csv"
    answer = page.request.get(href)
    assert answer.text().startswith("step,metric,value,log_id,time\n")


def test_a_deep_link_reproduces_the_view(page: Page) -> None:
    open_ready(page, RUN_PAGE + "?x=relative&smooth=0.5&log=1&metric=reward&metric=train/kl")
    assert chart_order(page) == ["reward", "train/kl"]
    expect(page.locator('input[name="x-axis"][value="relative"]')).to_be_checked()
    expect(page.locator('input[name="smooth"]')).to_have_value("0.5")
    expect(page.locator('input[name="log"]')).to_be_checked()
    # Raw line faint plus its EMA: the legend shows the last value and where the EMA ends.
    expect(page.locator('.chart[data-metric="reward"] .legend-raw')).to_contain_text("smoothed")

    page.locator('input[name="x-axis"][value="step"]').check(force=True)
    page.locator('input[name="log"]').uncheck()
    page.get_by_placeholder("filter metrics").fill("kl")
    expect(page.locator(".chart-slot")).to_have_count(1)
    expect(page).to_have_url(RUN_PAGE + "?smooth=0.5&metric=reward&metric=train%2Fkl&filter=kl")


def test_an_alert_only_run_says_it_has_no_metrics_yet(page: Page) -> None:
    page.goto(f"/projects/{PROJECT}/runs/alert-only")
    empty = page.locator(".empty")
    expect(empty).to_contain_text("No metrics yet.")
    expect(empty).to_contain_text("This run has 1 alert")
    expect(empty.get_by_role("link", name="read them in Reports")).to_have_attribute(
        "href", f"/reports?project={PROJECT}&runs=alert-only"
    )
    expect(page.locator(".controls")).to_be_hidden()


def test_missing_projects_and_runs_are_named(page: Page, watched: Watched) -> None:
    page.goto("/projects/nobody")
    expect(page.locator(".empty")).to_contain_text("No project named “nobody”.")
    page.goto(f"/projects/{PROJECT}/runs/nothing-here")
    expect(page.locator(".empty")).to_contain_text(
        f"No run named “nothing-here” in project “{PROJECT}”."
    )
    # The browser logs the API's 404 answers; nothing else may be logged.
    watched.errors[:] = [e for e in watched.errors if "404" not in e]


def test_a_project_named_as_people_name_it_shows_that_name(page: Page, seeded: Seeded) -> None:
    """A project created as "Qwen2.5 <evals>" is listed and headed by that name, as text,
    with its ID beside it; its address is the ID's."""
    shown = "Qwen2.5 <b>evals</b>"
    project = id_for_name(shown, fallback="project")
    made = httpx.post(
        f"{seeded.base}/api/v1/projects/{project}/runs",
        json={"run": "r1", "project_display_name": shown},
        headers={"Authorization": f"Bearer {seeded.admin_key}"},
    )
    assert made.status_code == 201, made.text
    page.goto("/")
    row = page.locator(f'tr[data-project="{project}"]')
    expect(row.get_by_role("link", name=shown, exact=True)).to_have_attribute(
        "href", f"/projects/{project}"
    )
    expect(row.locator(".project-id")).to_have_text(project)
    row.get_by_role("link", name=shown, exact=True).click()
    expect(page.locator("h1")).to_have_text(f"{shown} {project}")
    assert page.locator("main b").count() == 0
