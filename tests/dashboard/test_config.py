"""A run's config on its page: every key of a trainer's real config in a table of dotted keys
and values, filtered by key or value, lists on one line, text never HTML, kept as it is
through live updates."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.dashboard.seed import XSS, Seeded, start_sdk_run
from tests.dashboard.seed_hf import CONFIG, seed_hf_run

RUN = "grpo-config"


def flatten(value: Any, key: str = "") -> list[tuple[str, Any]]:
    """Dotted keys as the page makes them: nested mappings flattened, lists kept whole."""
    if isinstance(value, dict) and value:
        inner = [flatten(item, f"{key}.{name}" if key else name) for name, item in value.items()]
        return [row for rows in inner for row in rows]
    return [(key, value)]


FLAT = flatten(CONFIG)


@pytest.fixture(scope="module")
def hf_run(seeded: Seeded) -> str:
    return seed_hf_run(seeded.base, seeded.admin_key, RUN)


def rows(page: Page) -> list[list[str]]:
    found: list[list[str]] = page.eval_on_selector_all(
        ".config-table tbody tr",
        "rows => rows.map(r => [...r.cells].map(c => c.textContent))",
    )
    return found


def test_a_trainer_config_is_a_table_of_dotted_keys(
    page: Page, seeded: Seeded, hf_run: str
) -> None:
    assert len(FLAT) > 200  # GRPOConfig's 191 arguments and the model's configuration
    page.goto(hf_run)
    view = page.locator(".run-head .config-view")
    expect(view.locator(".config-count")).to_have_text(f"{len(FLAT)} keys")
    # Closed, it previews the first keys; the table is one click away.
    expect(view.locator("summary .chip")).to_have_count(6)
    expect(view.locator(".config-table")).to_be_hidden()
    view.locator("summary").click()
    expect(view.locator(".config-table")).to_be_visible()
    shown = dict((key, value) for key, value in rows(page))
    assert list(shown) == [key for key, _ in FLAT]
    assert shown["training_args.learning_rate"] == "1e-6"
    assert shown["training_args.adam_epsilon"] == "1e-8"
    assert shown["training_args.per_device_train_batch_size"] == "8"
    assert shown["training_args.output_dir"] == "outputs/qwen2.5-0.5b-grpo-gsm8k"
    assert shown["training_args.accelerator_config.split_batches"] == "false"
    assert shown["training_args.lr_scheduler_kwargs"] == "null"
    assert shown["training_args.reward_weights"] == "[1, 0.5]"
    assert shown["training_args.report_to"] == '["tuneplane"]'
    assert shown["model_config.layer_types"] == '["full_attention" \u00d724]'
    assert shown["model_config.rope_parameters.rope_theta"] == "10000"
    assert shown["model_config.id2label.0"] == "LABEL_0"

    # The filter reads keys and values.
    search = view.get_by_label("filter config")
    search.fill("learning_rate")
    wanted = [key for key, _ in FLAT if "learning_rate" in key]
    assert wanted
    assert all("learning_rate" not in str(value) for _, value in FLAT)
    expect(view.locator(".config-table tbody tr")).to_have_count(len(wanted))
    assert [key for key, _ in rows(page)] == wanted
    expect(view.locator(".config-count")).to_have_text(f"{len(wanted)} of {len(FLAT)} keys")
    search.fill("qwen2forcausallm")
    assert rows(page) == [["model_config.architectures", '["Qwen2ForCausalLM"]']]
    search.fill("no such key anywhere")
    expect(view.locator(".config-table tbody")).to_have_text("No key or value matches.")

    # A live update of the run's header (a new note) keeps the table open and filtered.
    search.fill("beta")
    filtered = rows(page)
    note = httpx.patch(
        f"{seeded.base}/api/v1/projects/lab/runs/{RUN}",
        json={"note": "best checkpoint at step 250"},
        headers={"Authorization": f"Bearer {seeded.admin_key}"},
    )
    assert note.status_code == 200, note.text
    expect(page.locator(".run-head .note")).to_have_text("best checkpoint at step 250")
    expect(view.locator("summary")).to_be_visible()
    assert view.evaluate("el => el.open") is True
    expect(search).to_have_value("beta")
    assert rows(page) == filtered


def test_config_values_are_text(page: Page) -> None:
    page.goto("/projects/lab/runs/sdk-run")
    view = page.locator(".run-head .config-view")
    expect(view.locator("summary .chip-value").last).to_have_text(XSS)
    view.locator("summary").click()
    assert rows(page) == [["lr", "1e-5"], ["batch_size", "64"], ["note", XSS]]
    assert page.locator("main img").count() == 0


def test_a_run_s_summary_is_a_table_beside_its_config(page: Page, seeded: Seeded) -> None:
    """``run.summary``: the summary events the run sent at its end, the later value of a
    key winning, in a table of their own; values are text."""
    token = start_sdk_run(seeded.base, seeded.admin_key, "with-summary", {"lr": 1e-5})
    auth = {"Authorization": f"Bearer {token}"}
    events = [
        {"event_id": "s1", "type": "event", "name": "summary",
         "fields": {"best/acc": 0.5, "note": XSS}},
        {"event_id": "s2", "type": "event", "name": "summary", "fields": {"best/acc": 0.91}},
    ]  # fmt: skip
    sent = httpx.post(
        f"{seeded.base}/api/v1/ingest/observations", json={"events": events}, headers=auth
    )
    assert sent.status_code == 200, sent.text
    page.goto("/projects/lab/runs/with-summary")
    view = page.locator(".run-head .summary-view")
    expect(view.locator(".config-count")).to_have_text("2 keys")
    view.locator("summary").click()
    assert view.locator(".config-table tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.textContent))"
    ) == [["best/acc", "0.91"], ["note", XSS]]
    assert page.locator("main img").count() == 0
    expect(page.locator(".run-head .config-view")).to_have_count(2)  # config, summary
