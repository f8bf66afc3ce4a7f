"""The run page's Diagnosis panel in a real browser against a real server, on SQLite and
PostgreSQL: a failed attempt's findings with the lines and points they cite (as text, and
linked to the log view and the chart), a re-run by an owner, none offered to a viewer, a
diagnosis that finishes after the page opened, a run without one showing nothing, and a
diagnosis saying that the log it read was cut."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Dialog, Locator, Page, expect

from tests.conftest import scratch_postgres
from tests.dashboard.seed import SDK_PROJECT, XSS, post_logs, post_scalars, start_sdk_run
from tests.serving import running_server
from tuneplane.server import admin
from tuneplane.server.settings import Settings

PASSWORD = "correct horse battery"
OWNER, VIEWER = "olga", "vic"
# A user's own line that names the failure, with markup in it: cited, and shown as text.
HOSTILE = f"step 41: sample {XSS} hit CUDA out of memory, skipping the batch"
OOM_LINE = (
    "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB. GPU 0 "
    "has a total capacity of 79.15 GiB of which 1.20 GiB is free. Including non-PyTorch "
    "memory, this process has 77.94 GiB memory in use. Of the allocated memory 74.12 GiB is "
    "allocated by PyTorch, and 2.30 GiB is reserved by PyTorch but unallocated. If reserved "
    "but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:"
    "True to avoid fragmentation."
)
TRACEBACK = [
    "[rank0]: Traceback (most recent call last):",
    '[rank0]:   File "/home/ada/sft/train_sft.py", line 88, in <module>',
    "[rank0]:     main()",
    '[rank0]:   File "/home/ada/sft/train_sft.py", line 81, in main',
    "[rank0]:     trainer.train()",
    '[rank0]:   File "/opt/venv/lib/python3.11/site-packages/transformers/trainer.py", '
    "line 2245, in train",
    "[rank0]:     return inner_training_loop(",
    '[rank0]:   File "/opt/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", '
    "line 1751, in _wrapped_call_impl",
    "[rank0]:     return self._call_impl(*args, **kwargs)",
    OOM_LINE,
]
OUTPUT = [
    "loading checkpoint shards: 100%|##########| 4/4 [00:09<00:00,  2.31s/it]",
    "{'loss': 1.9321, 'grad_norm': 3.41, 'learning_rate': 2e-05, 'epoch': 0.01}",
    HOSTILE,
]


@dataclass
class World:
    base: str
    admin_key: str
    errors: list[str] = field(default_factory=list)
    contexts: list[BrowserContext] = field(default_factory=list)

    def open(self, browser: Browser, login: str = OWNER) -> Page:
        """A browser of its own, signed in as ``login``."""
        context = browser.new_context(base_url=self.base, viewport={"width": 1400, "height": 1000})
        context.set_default_timeout(10_000)
        self.contexts.append(context)
        answer = context.request.post(
            "/api/v1/session", data={"login": login, "password": PASSWORD}
        )
        assert answer.ok, answer.text()
        page = context.new_page()
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)

        def on_dialog(dialog: Dialog) -> None:  # an alert() from a log line, say
            self.errors.append(f"dialog: {dialog.message}")
            dialog.dismiss()

        page.on("dialog", on_dialog)
        return page

    def start(self, run: str) -> str:
        """A run of the project with an attempt that is running: its ingest token."""
        token = start_sdk_run(self.base, self.admin_key, run)
        self.status(token, {"status": "running"})
        return token

    def status(self, token: str, body: dict[str, object]) -> None:
        answer = httpx.post(
            f"{self.base}/api/v1/ingest/status",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
        )
        assert answer.status_code == 200, answer.text

    def fail(self, token: str) -> None:
        """The attempt's output (the traceback on stderr) and its end: exit code 1."""
        post_logs(self.base, token, 0, OUTPUT)
        post_logs(self.base, token, len(OUTPUT), TRACEBACK, stream="stderr")
        self.status(token, {"status": "failed", "exit_code": 1})


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    data = tmp_path_factory.mktemp(f"diagnosis-{request.param}")
    with ExitStack() as stack:
        url = stack.enter_context(scratch_postgres()) if request.param == "postgresql" else None
        settings = Settings.from_env({}, data_dir=str(data), database_url=url)
        for login in (OWNER, VIEWER):
            admin.add_user(settings, login, PASSWORD, admin=False)
        args = ["--data-dir", str(data), *(["--database-url", url] if url else [])]
        base = stack.enter_context(running_server(*args))
        world = World(base, (data / "admin.key").read_text().strip())
        world.start("first")  # the project exists from its first run on
        key = {"Authorization": f"Bearer {world.admin_key}"}
        project = f"{base}/api/v1/projects/{SDK_PROJECT}"
        for login, role in ((OWNER, "owner"), (VIEWER, "viewer")):
            put = httpx.put(f"{project}/members/{login}", json={"role": role}, headers=key)
            assert put.is_success, put.text
        access = httpx.patch(f"{project}/access", json={"visibility": "private"}, headers=key)
        assert access.is_success, access.text
        yield world


@pytest.fixture
def opened(world: World) -> Iterator[World]:
    """The world; the browsers a test opened are closed after it, which then fails on any
    script error or dialog they met."""
    yield world
    for context in world.contexts:
        context.close()
    world.contexts.clear()
    errors, world.errors[:] = list(world.errors), []
    assert errors == []


def run_page(run: str) -> str:
    return f"/projects/{SDK_PROJECT}/runs/{run}"


def finding(page: Page, code: str) -> Locator:
    return page.locator(f'.diagnosis .finding[data-code="{code}"]')


def test_a_failed_run_shows_its_findings_and_what_they_cite_as_text(
    browser: Browser, opened: World
) -> None:
    token = opened.start("oom")
    loss = {"series": [{"name": "train/loss", "steps": [1, 2], "values": [1.93, 1.71]}],
            "invalid": [{"name": "train/loss", "steps": [3], "kinds": ["nan"]}]}  # fmt: skip
    post_scalars(opened.base, token, loss)
    opened.fail(token)
    page = opened.open(browser)
    page.goto(run_page("oom"))

    panel = page.locator(".diagnosis")
    expect(panel.locator(".diagnosis-state")).to_have_text(re.compile(r"^done: 3 findings"))
    meta = panel.locator(".diagnosis-meta")
    expect(meta).to_contain_text("Attempt 1, diagnosed when the attempt failed")
    oom = finding(page, "cuda_oom")
    expect(oom.locator(".finding-title")).to_have_text("The GPU ran out of memory")
    expect(oom.locator(".confidence")).to_have_text("certain")
    expect(oom.locator(".finding-next")).to_contain_text("Lower the per-device batch size")
    # Both lines that say so are cited, the user's line with its markup as text.
    expect(oom.locator(".citation-text")).to_have_text([HOSTILE, OOM_LINE])
    assert page.locator("main img").count() == 0
    assert "null" not in panel.inner_text()
    exception = finding(page, "python_exception")
    expect(exception.locator(".finding-detail")).to_contain_text(
        "in main (/home/ada/sft/train_sft.py, line 81)"
    )

    # The metric points the NaN finding rests on: series, step and value, linked to its chart.
    points = finding(page, "nan_loss").locator(".citation-metric")
    expect(points).to_have_count(2)
    expect(points.locator(".citation-series")).to_have_text(["train/loss", "train/loss"])
    expect(points.locator(".citation-step")).to_have_text(["step 2", "step 3"])
    expect(points.locator(".citation-value")).to_have_text(["1.71", "NaN/inf"])
    expect(points.nth(1).locator("a")).to_have_attribute(
        "href", f"/projects/{SDK_PROJECT}/runs/oom?metric=train%2Floss"
    )

    # A cited line opens the Logs tab at that line.
    oom.locator(".citation-log").first.get_by_role("link", name="in the log").click()
    expect(page).to_have_url(re.compile(r"\?tab=logs$"))
    cited = page.locator(".log-line.cited")
    expect(cited.locator(".ln-text")).to_have_text(HOSTILE)
    expect(cited).to_be_in_viewport()
    expect(page.locator('input[name="follow"]')).not_to_be_checked()


def test_an_owner_runs_the_diagnosis_again_and_a_viewer_is_not_offered_it(
    browser: Browser, opened: World
) -> None:
    opened.fail(opened.start("again"))
    owner = opened.open(browser)
    owner.goto(run_page("again"))
    expect(finding(owner, "cuda_oom")).to_be_visible()
    expect(owner.locator(".diagnosis-picker")).to_have_count(0)  # one diagnosis: no picker

    owner.get_by_role("button", name="Run diagnosis again").click()
    picker = owner.locator(".diagnosis-picker")
    expect(picker.locator("option")).to_have_count(2)
    expect(owner.locator(".diagnosis-head")).to_contain_text("2 diagnoses")
    expect(owner.locator(".diagnosis-meta")).to_contain_text("diagnosed again on request")
    expect(picker.locator("option:checked")).to_contain_text("attempt 1 · re-run")
    expect(finding(owner, "cuda_oom")).to_be_visible()
    listed = httpx.get(
        f"{opened.base}/api/v1/projects/{SDK_PROJECT}/runs/again/diagnoses",
        headers={"Authorization": f"Bearer {opened.admin_key}"},
    ).json()["diagnoses"]
    assert [d["trigger"] for d in listed] == ["rerun", "failed"]

    # The earlier one is there to pick.
    picker.select_option(index=1)
    expect(owner.locator(".diagnosis-meta")).to_contain_text("diagnosed when the attempt failed")

    viewer = opened.open(browser, VIEWER)
    viewer.goto(run_page("again"))
    expect(finding(viewer, "cuda_oom").locator(".citation-text").first).to_have_text(HOSTILE)
    expect(viewer.locator(".diagnosis-picker option")).to_have_count(2)
    expect(viewer.get_by_role("button", name=re.compile("Run diagnosis"))).to_have_count(0)


def test_a_diagnosis_appears_when_it_finishes_and_a_run_without_one_shows_nothing(
    browser: Browser, opened: World
) -> None:
    token = opened.start("live")
    post_logs(opened.base, token, 0, ["step 1 loss 2.000"])
    page = opened.open(browser)
    page.goto(run_page("live"))
    expect(page.locator(".run-head .status")).to_have_text(re.compile("^running"))
    expect(page.locator(".live-line .live-state")).to_have_text("live")
    # A running run without a diagnosis: no panel, no empty box.
    expect(page.locator(".diagnosis")).to_be_hidden()
    assert page.locator(".diagnosis").inner_text() == ""

    post_logs(opened.base, token, 1, OUTPUT[2:])
    post_logs(opened.base, token, 2, TRACEBACK, stream="stderr")
    opened.status(token, {"status": "failed", "exit_code": 1})
    expect(finding(page, "cuda_oom")).to_be_visible()
    expect(page.locator(".diagnosis-state")).to_have_text(re.compile(r"^done: 2 findings"))

    # A run that succeeded is not diagnosed: nothing is shown.
    done = opened.start("fine")
    opened.status(done, {"status": "succeeded", "exit_code": 0})
    page.goto(run_page("fine"))
    expect(page.locator(".run-head .status")).to_have_text(re.compile("^succeeded"))
    expect(page.locator(".live-line .live-state")).to_have_text("live")
    expect(page.locator(".diagnosis")).to_be_hidden()


RENDER = """async () => {
    const { diagnosisBody } = await import("/static/diagnosis/findings.js");
    const ref = { project: "lab", run: "r" };
    const failed = diagnosisBody(
        { id: 7, attempt: 2, trigger: "rerun", state: "failed", findings: null,
          error: "TimeoutError: the diagnosis took longer than 60 s", created_at: 1 },
        ref, { attempt: 2 });
    const explained = diagnosisBody(
        { id: 8, attempt: 1, trigger: "failed", state: "done", findings: [], created_at: 1,
          explanation: { state: "done", model: "qwen-7b", text: "<b>OOM</b> at step 41." } },
        ref, { attempt: 2 });
    return {
        failed: failed.querySelector(".diagnosis-state").textContent,
        state: explained.querySelector(".diagnosis-state").textContent,
        meta: explained.querySelector(".diagnosis-meta").textContent,
        title: explained.querySelector(".explanation-title").textContent,
        note: explained.querySelector(".explanation .muted").textContent,
        text: explained.querySelector(".explanation-text").textContent,
        bold: explained.querySelectorAll("b").length,
    };
}"""


def test_a_failed_diagnosis_and_a_written_explanation_are_told_apart(
    browser: Browser, opened: World
) -> None:
    page = opened.open(browser)
    page.goto("/")
    shown = page.evaluate(RENDER)
    assert shown["failed"] == (
        "The diagnosis itself failed: TimeoutError: the diagnosis took longer than 60 s. "
        "This is not the run's failure: the run's status is what the job reported."
    )
    assert shown["state"].startswith("done: no rule recognised this failure")
    assert shown["meta"].endswith("(the run is now on attempt 2)")
    assert shown["title"] == "Written explanation by a language model"
    assert shown["note"] == (
        "qwen-7b, from the same evidence. It is not one of the rule findings above and may be "
        "wrong."
    )
    assert (shown["text"], shown["bold"]) == ("<b>OOM</b> at step 41.", 0)


def test_a_diagnosis_says_when_the_log_it_read_was_cut(browser: Browser, opened: World) -> None:
    token = opened.start("gaps")
    post_logs(opened.base, token, 0, OUTPUT)
    # Seven lines the job numbered never reach the server.
    post_logs(opened.base, token, len(OUTPUT) + 7, TRACEBACK, stream="stderr")
    opened.status(token, {"status": "failed", "exit_code": 1})
    page = opened.open(browser)
    page.goto(run_page("gaps"))
    expect(finding(page, "cuda_oom")).to_be_visible()
    expect(page.locator(".diagnosis .diagnosis-cut")).to_have_text(
        "The evidence was cut: 7 lines the job printed never reached the server. The findings "
        "rest on what was read."
    )
    # A whole log: nothing said.
    opened.fail(opened.start("whole"))
    page.goto(run_page("whole"))
    expect(finding(page, "cuda_oom")).to_be_visible()
    expect(page.locator(".diagnosis .diagnosis-cut")).to_have_count(0)
