"""Screenshots of the dashboard for the README: ``python -m tests.dashboard.screenshots``.

Starts a server on a temporary SQLite directory, sends the test runs through the public API
and saves the main pages under ``docs/img/``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from tests.dashboard.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.dashboard.pages import wait_ready
from tests.dashboard.seed import ENV, PROJECT, SDK_PROJECT, seed
from tests.serving import running_server

OUT = Path(__file__).resolve().parents[2] / "docs" / "img"
PAGES = {
    "runs.png": (f"/projects/{PROJECT}", False),
    "run.png": (f"/projects/{PROJECT}/runs/grpo-qwen-7", True),
    "compare.png": (f"/compare?project={PROJECT}&runs=grpo-qwen-7,grpo-qwen-8&smooth=0.8", True),
    "reports.png": (f"/reports?project={PROJECT}&runs=grpo-qwen-7#alert-slow-step-180", False),
    "logs.png": (f"/projects/{SDK_PROJECT}/runs/sdk-run?tab=logs", False),
    "validation.png": (
        f"/projects/{SDK_PROJECT}/runs/eval-base?tab=validation&round=val-1&trial=q003",
        False,
    ),
    "events.png": (f"/projects/{SDK_PROJECT}/runs/eval-base?tab=events", False),
    "matched.png": ("/matched?left=lab/eval-base/val-full&right=lab/eval-tuned/val-full", False),
}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory() as data_dir,
        running_server("--data-dir", data_dir, env=ENV) as base,
        sync_playwright() as playwright,
    ):
        seed(base, Path(data_dir))
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(base_url=base, viewport={"width": 1280, "height": 860})
        page = context.new_page()
        for name, (path, charts) in PAGES.items():
            page.goto(path)
            if charts:
                wait_ready(page)
            page.wait_for_timeout(600)
            page.screenshot(path=OUT / name)
            print(OUT / name)
        browser.close()


if __name__ == "__main__":
    main()
