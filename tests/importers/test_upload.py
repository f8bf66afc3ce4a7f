"""Uploads end to end: a real server, a real ``tuneplane run`` job running ``tuneplane
import … --upload``, and what the server's API says arrived."""

from __future__ import annotations

import shlex
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.client.runs import PROJECT, Server, runner_env
from tests.client.world import Fate, proxy
from tests.importers.cohort import (
    DATAGEN,
    TWIN_COHORT,
    make_trial,
    plan,
    trial_result,
    write_plan,
)
from tests.importers.jobs import body, events, job, rounds, trajectories, trials
from tests.importers.lm_eval_runs import LMEH, TWIN_RUN, record, results, write_run
from tests.importers.test_import import FIXTURE_TRIALS, TWIN_TRIALS
from tests.shared_fixtures import real_fixture
from tuneplane.contract.observations import CHECKPOINT_EVENT
from tuneplane.importers.snapshot import read_snapshot


@dataclass(frozen=True)
class Cohort:
    """Harbor trial directories, the plan's trials, and what arrives of them."""

    root: Path
    trials: list[dict[str, Any]]
    statuses: dict[str, str]
    #: The trials whose text a trace limit of 2 uploads.
    sampled: list[str]

    @property
    def events(self) -> int:
        """The declaration, the checkpoint and each trial's result."""
        return 2 + len(self.statuses)


REAL = Cohort(
    DATAGEN,
    FIXTURE_TRIALS,
    {
        "draft_dp_96443054-r0": "success",
        "etl_checkpoint_resume_bug-r0": "failure",
        "fix-async-worker-queue-r0": "failure",
    },
    ["draft_dp_96443054-r0", "etl_checkpoint_resume_bug-r0"],
)
TWIN = Cohort(
    TWIN_COHORT,
    TWIN_TRIALS,
    {"csv_dedupe-r0": "success", "log_rotation_race-r0": "failure"},
    ["csv_dedupe-r0", "log_rotation_race-r0"],
)


def harbor_script(tmp_path: Path, *extra: str, cohort: Cohort) -> tuple[str, Path]:
    plan_file = write_plan(tmp_path, plan(cohort.trials))
    out = tmp_path / "snapshot.json"
    command = [
        "import", "harbor", "--plan", plan_file, "--root", str(cohort.root),
        "--out", str(out), "--trace-limit", "2", *extra,
    ]  # fmt: skip
    return "$TUNEPLANE " + shlex.join(command), out


def assert_the_fixture_round_arrived(
    server: Server, run: str, out: Path, attempt: int, cohort: Cohort
) -> None:
    round_id = read_snapshot(str(out)).round_id
    found = rounds(server, run, attempt)
    assert list(found) == [round_id]
    counts = found[round_id]["counts"]
    expected, reported = len(cohort.trials), len(cohort.statuses)
    assert found[round_id]["expected"] == expected
    successes = list(cohort.statuses.values()).count("success")
    assert (counts["success"], counts["failure"], counts["reported"]) == (
        successes,
        reported - successes,
        reported,
    )
    assert found[round_id]["not_yet_reported"]["value"] == expected - reported
    page = trials(server, run, round_id, attempt)
    assert {t: page[t]["status"] for t in page} == cohort.statuses
    index = trajectories(server, run, round_id, attempt)
    assert sorted(item["trial_id"] for item in index) == cohort.sampled
    for item in index:
        stored = body(server, run, item)
        assert stored["messages"], item
        assert stored["capture_policy"] == "sampled"
        assert stored["complete"] is False
        # Not declared complete, yet nothing was cut: the index says so.
        assert item["truncated"] is False
        assert item["message_count"] == item["total_messages"]
    checkpoint = [e for e in events(server, run, CHECKPOINT_EVENT) if e["attempt"] == attempt]
    assert [e["fields"]["checkpoint"] for e in checkpoint] == ["org/model@step-100"]


@pytest.mark.parametrize(
    "cohort", [pytest.param(REAL, marks=real_fixture, id="real"), pytest.param(TWIN, id="twin")]
)
def test_an_import_uploads_inside_tuneplane_run_and_again_adds_nothing(
    server: Server, tmp_path: Path, cohort: Cohort
) -> None:
    run = f"harbor-upload-{tmp_path.name}"
    script, out = harbor_script(tmp_path, "--upload", cohort=cohort)
    again = f"$TUNEPLANE import upload {shlex.quote(str(out))}"
    done = job(server, run, f"{script} && {again}")
    assert done.returncode == 0, done.stderr
    assert_the_fixture_round_arrived(server, run, out, attempt=1, cohort=cohort)
    first, second = [line for line in done.stderr.splitlines() if "delivered:" in line]
    n, texts = cohort.events, len(cohort.sampled)
    assert f"{n} events ({n} new, 0 already there), {texts} trajectories" in first, first
    assert f"{n} events (0 new, {n} already there), {texts} trajectories" in second, second


def test_outside_tuneplane_run_an_upload_says_to_run_it_there(tmp_path: Path) -> None:
    script, out = harbor_script(tmp_path, "--upload", cohort=TWIN)
    command = shlex.split(
        script.replace("$TUNEPLANE", shlex.join([sys.executable, "-m", "tuneplane.cli"]))
    )
    done = subprocess.run(command, env=runner_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "under `tuneplane run" in lines[0]
    assert not out.exists()
    upload = subprocess.run(
        [sys.executable, "-m", "tuneplane.cli", "import", "upload", str(out)],
        env=runner_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert upload.returncode == 2
    assert "under `tuneplane run" in upload.stderr


def test_a_server_gone_mid_way_fails_the_upload_and_import_upload_completes_it(
    server: Server, tmp_path: Path
) -> None:
    run = f"harbor-cut-{tmp_path.name}"
    script, out = harbor_script(tmp_path, "--upload", cohort=TWIN)
    failed = tmp_path / "failed"

    def fate(request: bytes) -> Fate:
        # Gone after the events arrived, and back once the first command has given up.
        if request.startswith(b"POST /api/v1/ingest/trajectories") and not failed.exists():
            return "cut"
        return "pass"

    retry = f"$TUNEPLANE import upload {shlex.quote(str(out))}"
    with proxy(server.base, fate) as url:
        done = job(server, run, f"{script}; echo $? > {failed}; {retry}", url=url)
    assert done.returncode == 0, done.stderr
    assert failed.read_text().strip() == "1", done.stderr
    refusal = next(line for line in done.stderr.splitlines() if "not delivered" in line)
    assert "2 of 2 trajectories not delivered (2 server unreachable)" in refusal, refusal
    assert f"`tuneplane import upload {out} --project {PROJECT} --run {run} " in refusal
    assert "retries it in execution attempt 1" in refusal
    # The retry added the trajectories and nothing twice, in the same execution.
    assert "4 events (0 new, 4 already there), 2 trajectories" in done.stderr
    assert_the_fixture_round_arrived(server, run, out, attempt=1, cohort=TWIN)


def test_the_retry_a_failed_upload_prints_lands_in_the_same_execution_attempt(
    server: Server, tmp_path: Path
) -> None:
    run = f"harbor-retry-{tmp_path.name}"
    script, out = harbor_script(tmp_path, "--upload", cohort=TWIN)

    def fate(request: bytes) -> Fate:  # the blob store, say, refuses every trajectory
        return "cut" if request.startswith(b"POST /api/v1/ingest/trajectories") else "pass"

    with proxy(server.base, fate) as url:
        first = job(server, run, script, url=url)
    assert first.returncode == 1, first.stderr
    refusal = next(line for line in first.stderr.splitlines() if "not delivered" in line)
    command = refusal.split("`")[1]
    assert command.startswith(f"tuneplane import upload {out} --project {PROJECT} --run {run} ")
    assert "retries it in execution attempt 1, run outside `tuneplane run`" in refusal
    # Run as printed, later, outside any job, with the user's API key.
    argv = [sys.executable, "-m", "tuneplane.cli", *shlex.split(command)[1:]]
    env = runner_env(TUNEPLANE_URL=server.base, TUNEPLANE_API_KEY=server.key)
    again = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert f"delivering to {PROJECT}/{run}, execution attempt 1" in again.stderr
    assert "4 events (0 new, 4 already there), 2 trajectories" in again.stderr
    assert_the_fixture_round_arrived(server, run, out, attempt=1, cohort=TWIN)
    # The round was completed where it was, not delivered again into a new attempt.
    answer = server.get(f"/api/v1/projects/{PROJECT}/runs/{run}/evaluation")
    assert answer["execution_attempts"] == [1]


def test_a_superseded_token_fails_the_upload_and_a_new_job_completes_it(
    server: Server, tmp_path: Path
) -> None:
    run = f"harbor-superseded-{tmp_path.name}"
    script, out = harbor_script(tmp_path, "--upload", cohort=TWIN)
    restarted = threading.Event()

    def fate(request: bytes) -> Fate:
        # The job is restarted elsewhere just as its trajectories are sent.
        if request.startswith(b"POST /api/v1/ingest/trajectories") and not restarted.is_set():
            restarted.set()
            server.start_attempt(run)
        return "pass"

    with proxy(server.base, fate) as url:
        first = job(server, run, script, url=url)
    assert first.returncode == 1, first.stderr
    assert "2 of 2 trajectories not delivered" in first.stderr, first.stderr
    round_id = read_snapshot(str(out)).round_id
    assert rounds(server, run, 1)[round_id]["counts"]["reported"] == len(TWIN.statuses)
    assert trajectories(server, run, round_id, 1) == []
    again = job(server, run, f"$TUNEPLANE import upload {shlex.quote(str(out))}")
    assert again.returncode == 0, again.stderr
    assert_the_fixture_round_arrived(server, run, out, attempt=3, cohort=TWIN)


@dataclass(frozen=True)
class LmEvalRun:
    """An lm-eval output directory cut to three documents, and what arrives of it."""

    directory: Path
    task: dict[str, str]
    expected: int
    #: Successes and failures among the three.
    verdicts: tuple[int, int]
    #: How its first text begins.
    question: str


LM_EVAL_RUNS = [
    pytest.param(
        LmEvalRun(LMEH, {"name": "gsm8k", "version": "3.0"}, 1319, (0, 3), "Question: Jen and"),
        marks=real_fixture,
        id="real",
    ),
    pytest.param(
        LmEvalRun(
            TWIN_RUN, {"name": "arithmetic_2dm", "version": "1.0"}, 2000, (2, 1), "Question: What"
        ),
        id="twin",
    ),
]


@pytest.mark.parametrize("cut", LM_EVAL_RUNS)
def test_lm_eval_uploads_after_lm_eval_in_the_same_job(
    server: Server, tmp_path: Path, cut: LmEvalRun
) -> None:
    run = f"lm-eval-upload-{tmp_path.name}"
    mine = write_run(
        tmp_path / "lm-eval-out" / "org__m",
        results({"arith": 200}),
        {"arith": [record(i, float(i % 3 == 0)) for i in range(200)]},
    )
    first, second = tmp_path / "fixture-snapshots", tmp_path / "arith-snapshots"
    script = " && ".join(
        [
            f"$TUNEPLANE import lm-eval {shlex.quote(str(cut.directory))} --out {first} --upload",
            f"$TUNEPLANE import lm-eval {shlex.quote(str(mine.parent))} --out {second} --upload",
            f"$TUNEPLANE import upload {first} {second}",
        ]
    )
    done = job(server, run, script)
    assert done.returncode == 0, done.stderr
    cut_round = read_snapshot(str(first / f"{cut.task['name']}.json")).round_id
    arith = read_snapshot(str(second / "arith.json")).round_id
    found = rounds(server, run)
    assert sorted(found) == sorted([cut_round, arith])
    assert found[cut_round]["expected"] == cut.expected
    assert found[cut_round]["task"] == cut.task
    fixture_counts = found[cut_round]["counts"]
    assert (fixture_counts["success"], fixture_counts["failure"]) == cut.verdicts
    assert fixture_counts["reported"] == 3
    assert found[cut_round]["not_yet_reported"]["value"] == cut.expected - 3
    counts = found[arith]["counts"]
    assert (counts["success"], counts["failure"], counts["reported"]) == (67, 133, 200)
    assert found[arith]["scoring_coverage"]["value"] == 1.0
    assert sorted(found[arith]["digests"]) == ["cohort", "dataset", "settings", "verifier"]
    page = trials(server, run, arith)
    assert (page["doc-3"]["status"], page["doc-4"]["status"]) == ("success", "failure")
    # 200 documents keep 32 texts; the fixture's three all keep theirs.
    assert len(trajectories(server, run, arith)) == 32
    (item, *_) = trajectories(server, run, cut_round)
    stored = body(server, run, item)
    assert stored["messages"][0]["content"].startswith(cut.question)
    # The replay of both snapshots added nothing.
    replay = [line for line in done.stderr.splitlines() if "delivered:" in line][2:]
    assert len(replay) == 2
    assert all("(0 new," in line for line in replay), replay


def test_why_a_trial_is_not_scored_arrives_with_it(server: Server, tmp_path: Path) -> None:
    root = tmp_path / "root"
    make_trial(root, "agree", trial_result("agree", rewards={"reward": 1}), reward_txt="1\n")
    make_trial(root, "differ", trial_result("differ", rewards={"reward": 1}), reward_txt="0\n")
    make_trial(root, "slow", trial_result("slow", exception="VerifierTimeoutError"))
    cohort = [
        {"task": t, "repeat": 0, "attempts": [{"retry": 0, "directory": t}]}
        for t in ("agree", "differ", "slow")
    ]
    out = tmp_path / "snapshot.json"
    command = ["import", "harbor", "--plan", write_plan(tmp_path, plan(cohort))]
    command += ["--root", str(root), "--out", str(out), "--upload"]
    run = f"harbor-reasons-{tmp_path.name}"
    done = job(server, run, "$TUNEPLANE " + shlex.join(command))
    assert done.returncode == 0, done.stderr
    round_id = read_snapshot(str(out)).round_id
    differ = "result.json's reward 1 differs from verifier/reward.txt's 0"
    expected = {
        "agree-r0": ("success", None, None, None),
        "differ-r0": ("unscored", None, "reward_mismatch", differ),
        "slow-r0": (
            "infra_error",
            "VerifierTimeoutError",
            "verifier_timeout",
            "the verifier timed out",
        ),
    }
    page = trials(server, run, round_id)
    assert {
        t: (page[t]["status"], page[t]["error_type"], page[t]["reason_code"], page[t]["reason"])
        for t in page
    } == expected
    history = server.get(
        f"/api/v1/projects/{PROJECT}/runs/{run}/evaluation/{round_id}/trials/differ-r0"
    )
    (attempt,) = history["attempts"]
    assert (attempt["reason_code"], attempt["reason"]) == ("reward_mismatch", differ)
