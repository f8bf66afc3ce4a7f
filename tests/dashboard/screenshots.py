"""Screenshots of the dashboard for the README: ``python -m tests.dashboard.screenshots``
(or ``… screenshots trajectory.png`` for some of them).

Starts a server on a temporary SQLite directory, sends the test runs through the public API
(without the text that looks like HTML, which only the tests need) and saves the main pages
under ``docs/img/``. Trajectory bodies are shown to members with the
content permission only: their pages are taken signed in as the private project's owner.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from tests.dashboard.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.dashboard.pages import wait_ready
from tests.dashboard.seed import ENV, PROJECT, SDK_PROJECT, seed
from tests.dashboard.seed_groups import BASELINE, SEEDS, seed_groups
from tests.dashboard.seed_trajectories import PROJECT as AGENTS
from tests.dashboard.seed_trajectories import seed_for_screenshots
from tests.serving import running_server

OUT = Path(__file__).resolve().parents[2] / "docs" / "img"
PAGES = {
    "runs.png": (f"/projects/{PROJECT}", False),
    "run.png": (f"/projects/{PROJECT}/runs/grpo-qwen-7", True),
    "compare.png": (f"/compare?project={PROJECT}&runs=grpo-qwen-7,grpo-qwen-8&smooth=0.8", True),
    "groups.png": (
        f"/compare?project={SDK_PROJECT}&runs={','.join([*SEEDS, BASELINE])}&groups=1&smooth=0.6",
        True,
    ),
    "runs-groups.png": (f"/projects/{SDK_PROJECT}?q=group~qwen", True),
    "reports.png": (f"/reports?project={PROJECT}&runs=grpo-qwen-7#alert-slow-step-180", False),
    "logs.png": (f"/projects/{SDK_PROJECT}/runs/sdk-run?tab=logs", False),
    "validation.png": (
        f"/projects/{SDK_PROJECT}/runs/eval-base?tab=validation&round=val-1&trial=q003",
        False,
    ),
    "events.png": (f"/projects/{SDK_PROJECT}/runs/eval-base?tab=events", False),
    "matched.png": ("/matched?left=lab/eval-base/val-full&right=lab/eval-tuned/val-full", False),
}
#: Pages read signed in as SIGNED_IN (the trajectories' project is private).
SIGNED_IN_PAGES = {
    "trajectory.png": (
        f"/projects/{AGENTS}/runs/eval-run/trajectory"
        "?attempt=1&round_id=val-t&trial_id=long&trial_attempt=1",
        False,
    ),
    "rollouts.png": (f"/projects/{AGENTS}/runs/train-run?tab=rollouts&step=20", False),
}
SIGNED_IN = ("ada", "screenshots only")


def main(wanted: list[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory() as data_dir,
        running_server("--data-dir", data_dir, env=ENV) as base,
        sync_playwright() as playwright,
    ):
        seeded = seed(base, Path(data_dir), markup=False)
        seed_groups(base, seeded.admin_key)
        seed_for_screenshots(base, Path(data_dir), *SIGNED_IN)
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for pages, login in ((PAGES, None), (SIGNED_IN_PAGES, SIGNED_IN)):
            context = browser.new_context(base_url=base, viewport={"width": 1280, "height": 860})
            if login is not None:
                answer = context.request.post(
                    "/api/v1/session", data={"login": login[0], "password": login[1]}
                )
                assert answer.ok, answer.text()
            page = context.new_page()
            for name, (path, charts) in pages.items():
                if wanted and name not in wanted:
                    continue
                page.goto(path)
                if charts:
                    wait_ready(page)
                page.wait_for_timeout(600)
                page.screenshot(path=OUT / name)
                print(OUT / name)
            context.close()
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1:])
