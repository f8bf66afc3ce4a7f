"""The Validation tab: honest counts, rates with Wilson intervals or the reason there is
none, "unknown" for a run without outcomes, trial results filtered and paged by the server,
retry histories, and trials moving between filters live as retries land."""

from __future__ import annotations

import re
from pathlib import Path

import boto3
import httpx
from playwright.sync_api import Browser, Page, expect

from tests.dashboard.conftest import Watched
from tests.dashboard.seed import ENV, Seeded
from tests.dashboard.seed_eval import (
    HISTORY_TRIAL,
    XSS,
    new_attempt,
    population,
    post_observations,
    trial,
)
from tests.dashboard.seed_restart import RESTART_RUN, seed_restart
from tests.serving import running_server

BASE = "/projects/lab/runs/eval-base"
DASH = "\N{EN DASH}"


def pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def test_rounds_show_counts_and_rates_with_intervals(page: Page, seeded: Seeded) -> None:
    answer = httpx.get(f"{seeded.base}/api/v1{BASE}/evaluation").json()
    val_1 = next(r for r in answer["rounds"] if r["round_id"] == "val-1")
    page.goto(BASE + "?tab=validation")
    row = page.locator('.rounds-table tr[data-round="val-1"]')
    expect(row.locator(".col-success")).to_have_text("78")
    expect(row.locator(".col-failure")).to_have_text("26")
    expect(row.locator(".col-infra_error")).to_have_text("13")
    expect(row.locator(".col-unscored")).to_have_text("13")
    expect(row.locator(".col-not-reported")).to_have_text("10")
    for column, key, value, fraction in (
        ("col-rate", "success_rate", "75.0%", "78 / 104"),
        ("col-coverage", "scoring_coverage", "74.3%", "104 / 140"),
    ):
        low, high = val_1[key]["wilson95"]
        cell = row.locator(f".{column}")
        expect(cell.locator(".figure-value")).to_have_text(value)
        expect(cell.locator(".figure-ci")).to_have_text(f"95% CI {pct(low)}{DASH}{pct(high)}")
        expect(cell.locator(".figure-fraction")).to_have_text(fraction)


def test_a_round_of_rewards_without_verdicts_shows_its_rewards_not_zero_percent(
    page: Page, seeded: Seeded
) -> None:
    # As a NeMo-RL validation log is imported: rewards, no verdicts, one sample's reward NaN.
    token = new_attempt(seeded.base, seeded.admin_key, "nemo-val")
    declaration = {**population("val-rl", 4), "verdicts": False}
    rewarded = [trial("val-rl", f"idx-{i}", "unscored", reward=r) for i, r in enumerate((1.0, 0.0))]
    no_reward = trial("val-rl", "idx-2", "unscored", reason_code="no_reward", reason="NaN")
    post_observations(seeded.base, token, [declaration, *rewarded, no_reward])
    page.goto("/projects/lab/runs/nemo-val?tab=validation")
    row = page.locator('.rounds-table tr[data-round="val-rl"]')
    for column in ("col-rate", "col-coverage"):
        expect(row.locator(f".{column} .figure-none")).to_have_text("no figure")
        expect(row.locator(f".{column}")).to_contain_text("no success or failure verdicts")
        assert "%" not in row.locator(f".{column}").inner_text()
    expect(row.locator(".col-reward-coverage .figure-value")).to_have_text("50.0%")
    expect(row.locator(".col-reward-coverage .figure-fraction")).to_have_text("2 / 4")
    expect(row.locator(".col-mean-reward .figure-value")).to_have_text("0.5")
    expect(row.locator(".col-mean-reward .figure-fraction")).to_have_text("mean of 2 rewards")
    # A round of verdicts shows its mean reward beside its rates (1.0 per success).
    page.goto(BASE + "?tab=validation")
    val_1 = page.locator('.rounds-table tr[data-round="val-1"]')
    expect(val_1.locator(".col-mean-reward .figure-value")).to_have_text("0.75")


def test_an_unknown_population_gives_the_reason_and_no_percentage(page: Page) -> None:
    page.goto(BASE + "?tab=validation")
    row = page.locator('.rounds-table tr[data-round="val-open"]')
    expect(row.locator(".col-expected")).to_have_text("not declared")
    coverage = row.locator(".col-coverage")
    expect(coverage).to_contain_text("unknown population")
    assert "%" not in coverage.inner_text()
    expect(row.locator(".col-not-reported")).to_contain_text("unknown")
    assert "%" not in row.locator(".col-not-reported").inner_text()


def test_a_run_without_outcomes_is_unknown_not_zero(page: Page) -> None:
    page.goto("/projects/lab/runs/sdk-run")
    page.get_by_role("tab", name="Validation").click()
    expect(page).to_have_url("/projects/lab/runs/sdk-run?tab=validation")
    panel = page.locator(".validation")
    expect(panel.locator(".empty-title")).to_have_text("Evaluation outcomes: unknown.")
    assert "0%" not in panel.inner_text()
    expect(panel.locator(".rounds-table")).to_have_count(0)


def trial_ids(page: Page) -> list[str]:
    ids: list[str] = page.eval_on_selector_all(
        ".trials-table tbody tr[data-trial]", "rows => rows.map(r => r.dataset.trial)"
    )
    return ids


def test_trial_results_are_filtered_and_paged_by_the_server(page: Page) -> None:
    pages: list[str] = []
    page.on("request", lambda r: pages.append(r.url) if "/trials?" in r.url else None)
    page.goto(BASE + "?tab=validation")
    page.locator('tr[data-round="val-1"]').get_by_role(
        "button", name="Inspect trial results"
    ).click()
    expect(page).to_have_url(re.compile(r"round=val-1"))
    where = page.locator(".page-where")
    expect(where).to_have_text(f"reported trials 1{DASH}50 of 130")
    assert trial_ids(page) == [f"q{i:03d}" for i in range(50)]
    page.get_by_role("button", name="next →").click()
    expect(where).to_have_text(f"reported trials 51{DASH}100 of 130")
    assert trial_ids(page) == [f"q{i:03d}" for i in range(50, 100)]
    page.get_by_role("button", name="next →").click()
    expect(where).to_have_text(f"reported trials 101{DASH}130 of 130")
    expect(page.get_by_role("button", name="next →")).to_be_disabled()
    page.get_by_role("button", name="← previous").click()
    expect(where).to_have_text(f"reported trials 51{DASH}100 of 130")
    assert any("after=q049" in url and "limit=50" in url for url in pages)

    page.locator(".outcome-filter.failure").click()
    expect(page).to_have_url(re.compile(r"status=failure"))
    expect(where).to_have_text(f"model failures 1{DASH}26 of 26")
    expect(page.locator(".trials-table tbody .outcome")).to_have_text(["model failure"] * 26)
    page.locator(".outcome-filter.success").click()
    expect(where).to_have_text(f"successes 1{DASH}50 of 78")
    page.get_by_role("button", name="next →").click()
    expect(where).to_have_text(f"successes 51{DASH}78 of 78")
    assert any("status=success" in url and "after=" in url for url in pages)


def test_a_trial_shows_its_retry_history_as_text(page: Page) -> None:
    page.goto(BASE + "?tab=validation&round=val-1")
    page.get_by_role("button", name=HISTORY_TRIAL, exact=True).click()
    expect(page).to_have_url(re.compile(f"trial={HISTORY_TRIAL}"))
    history = page.locator(".history")
    expect(history.locator("h3")).to_have_text(f"Retry history of {HISTORY_TRIAL}")
    rows = history.locator("tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.locator(".outcome")).to_have_text(["success", "model failure", "execution error"])
    expect(rows.first).to_contain_text("current")
    expect(rows.nth(2).locator(".error-type")).to_have_text(XSS)
    why = rows.nth(2).locator(".trial-reason")
    expect(why).to_have_text(f"the verifier timed out {XSS}")
    expect(why).to_have_attribute("title", "verifier_timeout")
    expect(rows.first.locator(".trial-reason")).to_have_count(0)  # a verdict needs no reason
    assert page.locator(".validation img").count() == 0


def test_a_retry_moves_its_trial_between_filters_live(page: Page, seeded: Seeded) -> None:
    token = new_attempt(seeded.base, seeded.admin_key, "eval-live")
    statuses = ["success", "failure", "failure", "infra_error"]
    post_observations(
        seeded.base,
        token,
        [trial("val-live", f"t{i}", status) for i, status in enumerate(statuses)],
    )
    page.goto("/projects/lab/runs/eval-live?tab=validation&round=val-live&status=failure")
    expect(page.locator(".live-line .live-state")).to_have_text("live")
    expect(page.locator(".page-where")).to_have_text(f"model failures 1{DASH}2 of 2")
    assert trial_ids(page) == ["t1", "t2"]
    page.get_by_role("button", name="t1", exact=True).click()
    expect(page.locator(".history tbody tr")).to_have_count(1)

    post_observations(seeded.base, token, [trial("val-live", "t1", "success", 1)])
    expect(page.locator(".trials-table tbody tr[data-trial]")).to_have_count(1)
    assert trial_ids(page) == ["t2"]
    expect(page.locator(".outcome-filter.failure .count")).to_have_text("1")
    expect(page.locator('tr[data-round="val-live"] .col-success')).to_have_text("2")
    expect(page.locator(".history tbody tr")).to_have_count(2)
    page.locator(".outcome-filter.success").click()
    expect(page.locator(".page-where")).to_have_text(f"successes 1{DASH}2 of 2")
    assert trial_ids(page) == ["t0", "t1"]

    # A change while another tab is shown is fetched when the Validation tab is shown again.
    page.get_by_role("tab", name="Charts").click()
    post_observations(seeded.base, token, [trial("val-live", "t2", "success", 1)])
    newest = httpx.get(f"{seeded.base}/api/v1/projects/lab/runs/eval-live").json()
    page.wait_for_function(
        "id => window.__tuneplane.lastObservationId === id", arg=newest["last_observation_id"]
    )
    assert page.locator(".validation").is_hidden()
    page.get_by_role("tab", name="Validation").click()
    expect(page.locator(".page-where")).to_have_text(f"successes 1{DASH}3 of 3")
    assert trial_ids(page) == ["t0", "t1", "t2"]


def test_an_execution_attempt_is_picked_and_kept_in_the_address(
    page: Page, seeded: Seeded, watched: Watched
) -> None:
    run = seed_restart(seeded.base, seeded.admin_key, f"{RESTART_RUN}-validation")
    page.goto(f"/projects/lab/runs/{run}?tab=validation")
    picker = page.locator('select[name="execution-attempt"]')
    expect(picker).to_have_value("2")
    row = page.locator('.rounds-table tr[data-round="val-r"]')
    expect(row.locator(".col-failure")).to_have_text("1")
    expect(row.locator(".col-success")).to_have_text("0")
    expect(row.locator(".col-not-reported")).to_have_text("3")

    picker.select_option("1")
    expect(page).to_have_url(re.compile(r"attempt=1"))
    expect(row.locator(".col-success")).to_have_text("3")
    expect(row.locator(".col-not-reported")).to_have_text("0")
    row.get_by_role("button", name="Inspect trial results").click()
    expect(page.locator(".inspector h2")).to_contain_text("execution attempt 1")
    expect(page.locator(".page-where")).to_have_text(f"reported trials 1{DASH}4 of 4")
    page.get_by_role("button", name="q0", exact=True).click()
    expect(page.locator(".history tbody .outcome")).to_have_text(["success"])
    expect(page.locator(".history .history-count")).to_contain_text("1 attempt")

    # The address keeps the choice: a reload shows execution 1's round and trial again.
    page.reload()
    expect(picker).to_have_value("1")
    expect(page.locator(".history tbody .outcome")).to_have_text(["success"])
    link = row.get_by_role("link", name="compare with…")
    assert "left_attempt=1" in (link.get_attribute("href") or "")

    page.goto(f"/projects/lab/runs/{run}?tab=validation&attempt=9")
    expect(page.locator(".attempt-refused")).to_contain_text(
        "execution attempt 9 of lab/" + run + " reported no evaluation outcome"
    )
    expect(picker).to_have_value("")
    picker.select_option("2")
    expect(row.locator(".col-failure")).to_have_text("1")
    # The browser logs the API's 404 answer; the page said what is missing instead.
    watched.errors[:] = [e for e in watched.errors if "status of 404" not in e]


def test_trajectories_the_blob_store_refused_are_said_on_their_round(
    browser: Browser, s3_bucket: str, tmp_path: Path
) -> None:
    env = {**ENV, "TUNEPLANE_BLOB_URL": f"s3://{s3_bucket}/bodies"}
    with running_server("--data-dir", str(tmp_path), env=env) as base:
        token = new_attempt(base, (tmp_path / "admin.key").read_text().strip(), "blobless")
        events = [population("val-b", 2), trial("val-b", "q0", "success")]
        post_observations(base, token, [*events, trial("val-b", "q1", "failure")])
        s3 = boto3.client("s3")  # the bucket goes: outcomes land, their text does not
        s3.delete_bucket(Bucket=s3_bucket)
        texts = [
            {"scope": "evaluation", "round_id": "val-b", "trial_id": t, "trial_attempt": 0,
             "messages": [{"role": "user", "content": "hi"}], "total_messages": 1,
             "complete": True, "capture_policy": "all"}
            for t in ("q0", "q1")
        ]  # fmt: skip
        refused = httpx.post(
            f"{base}/api/v1/ingest/trajectories",
            json={"trajectories": texts},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert refused.status_code == 503, refused.text
        context = browser.new_context(base_url=base)
        page = context.new_page()
        page.goto("/projects/lab/runs/blobless?tab=validation")
        row = page.locator('.rounds-table tr[data-round="val-b"]')
        expect(row.locator(".round-id .unstored")).to_have_text(" 2 trajectories not stored")
        expect(row.locator(".col-success")).to_have_text("1")
        context.close()
        s3.create_bucket(Bucket=s3_bucket)  # so that the server's readiness holds at exit


def test_a_round_of_repeated_tasks_shows_its_checkpoint_pass_at_k_and_clustered_interval(
    page: Page, seeded: Seeded
) -> None:
    token = new_attempt(seeded.base, seeded.admin_key, "repeats")
    outcomes = {"q1-r0": "success", "q1-r1": "failure", "q2-r0": "success", "q2-r1": "success"}
    events = [trial("val-k", t, status) for t, status in outcomes.items()]
    checkpoint = {"event_id": "ckpt", "type": "event", "name": "evaluation/checkpoint",
                  "fields": {"round_id": "val-k", "checkpoint": "qwen-step-400 <b>"}}  # fmt: skip
    post_observations(seeded.base, token, [population("val-k", 4), checkpoint, *events])
    read = httpx.get(f"{seeded.base}/api/v1/projects/lab/runs/repeats/evaluation/val-k").json()
    clustered = read["repeats"]["clustered_rate"]
    page.goto("/projects/lab/runs/repeats?tab=validation")
    expect(page.locator('tr[data-round="val-k"] .checkpoint')).to_have_text(
        " checkpoint qwen-step-400 <b>"
    )
    page.locator('.rounds-table tr[data-round="val-k"]').get_by_role(
        "button", name="Inspect trial results"
    ).click()
    repeats = page.locator(".inspector .repeats")
    expect(repeats).to_contain_text("2 tasks, up to 2 repeats (scored trials only)")
    expect(repeats.locator('.pass-at[data-k="1"]')).to_have_text("pass@1 75.0%")
    expect(repeats.locator('.pass-at[data-k="2"]')).to_have_text("pass@2 100.0%")
    low, high = clustered["interval95"]
    expect(repeats.locator(".clustered")).to_contain_text(
        f"success rate 75.0%, 95% CI {pct(low)}{DASH}{pct(high)} with each task's repeats"
    )
    # A round without repeats says nothing of them.
    page.goto(BASE + "?tab=validation&round=val-1")
    expect(page.locator(".inspector .trials-table tbody tr").first).to_be_visible()
    expect(page.locator(".inspector .repeats")).to_be_hidden()
