"""``tuneplane eval run`` driving the real Harbor 0.25.0 (in its Python 3.12 virtual
environment, re-executed from this 3.11 CLI through TUNEPLANE_HARBOR_PYTHON) on the CPU,
with the sandbox and the agent's model substituted (tests/coordinator/world.py): Harbor's
trial lifecycle, timeouts, verifier and result files are its own."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.client.runs import PROJECT, Server
from tests.coordinator.cohort import (
    cli_env,
    eval_run,
    read,
    statuses,
    uploaded_execution,
    write_plan,
    write_task,
)
from tests.coordinator.venv import ROOT
from tests.importers.jobs import job, rounds, trajectories, trials

pytestmark = pytest.mark.harbor


def test_a_fully_scored_cohort_with_model_failures_exits_0(
    harbor_python: Path, tmp_path: Path
) -> None:
    plan = write_plan(tmp_path, ["hello-a", "world-b"], {"world-b": "wrong"}, repeats=2)
    out = tmp_path / "out"
    done = eval_run(
        "--plan", str(plan), "--out", str(out), "--trace-limit", "3",
        harbor_python=harbor_python,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "evaluation complete: all 4 planned trials have an outcome" in done.stderr
    assert statuses(out) == {
        "hello-a-r0": "success",
        "hello-a-r1": "success",
        "world-b-r0": "failure",
        "world-b-r1": "failure",
    }
    execution = read(out, "execution.json")
    assert execution["state"] == "complete"
    assert execution["python"].startswith("3.12.")  # Harbor ran under its own Python
    assert execution["harbor_version"] == "0.25.0"
    assert [t["execution"] for t in execution["trials"]] == ["completed"] * 4
    assert read(out, "execution-errors.json") == {"errors": []}
    assert read(out, "plan.json") == read(tmp_path, "plan.json")
    snapshot = read(out, "snapshot.json")
    assert snapshot["population"]["expected"] == 4
    assert len(snapshot["trajectories"]) == 3
    # The protocol's settings come from the TrialConfig that ran, Harbor's defaults filled in.
    settings = read(out, "import-plan.json")["settings"]
    assert settings["trial_config"]["agent"]["import_path"].endswith(":ScriptedAgent")
    assert settings["trial_config"]["timeout_multiplier"] == 1.0
    assert settings["automatic_retries"] == 0
    # The checkpoint's model reached the agent, and is no part of the settings.
    assert "model_name" not in settings["trial_config"]["agent"]
    result = read(out / "trials" / "hello-a-r0", "result.json")
    assert result["config"]["agent"]["model_name"] == "scripted/step-1"
    for trial in ("hello-a-r0", "world-b-r1"):
        assert (out / "trials" / trial / "result.json").is_file()
    # The importer reads the same directories into the same snapshot.
    again = tmp_path / "imported.json"
    imported = subprocess.run(
        [sys.executable, "-m", "tuneplane.cli", "import", "harbor", "--plan",
         str(out / "import-plan.json"), "--root", str(out), "--out", str(again),
         "--trace-limit", "3"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    assert read(tmp_path, "imported.json") == snapshot


def test_a_trial_that_times_out_or_crashes_is_its_outcome_and_the_next_trial_runs(
    harbor_python: Path, tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks"
    write_task(tasks, "crash-a")
    write_task(tasks, "deadline-b")
    write_task(tasks, "timeout-c", agent_timeout=2.0)
    write_task(tasks, "verifier-d", verifier_timeout=1.0, slow=True)
    write_task(tasks, "hello-e")
    answers = {"crash-a": "crash", "deadline-b": "sleep", "timeout-c": "sleep"}
    names = ["crash-a", "deadline-b", "timeout-c", "verifier-d", "hello-e"]
    # The deadline only the sleeping agent without a timeout of its own reaches (a loaded
    # machine is slow, not stuck).
    plan = write_plan(tmp_path, names, answers, deadline=30)
    out = tmp_path / "out"
    done = eval_run(
        "--plan", str(plan), "--out", str(out), harbor_python=harbor_python, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert statuses(out) == {
        "crash-a-r0": "unscored",  # an unknown exception: unscored even with a reward
        "deadline-b-r0": "unscored",
        "timeout-c-r0": "failure",  # an agent timeout keeps the verifier's verdict
        "verifier-d-r0": "infra_error",
        "hello-e-r0": "success",
    }
    assert "evaluation complete: all 5 planned trials have an outcome (1 failure, " in done.stderr
    errors = read(out, "execution-errors.json")["errors"]
    assert [(e["trial_id"], e["error_type"], e["exception_type"]) for e in errors] == [
        ("crash-a-r0", "TrialException", "RuntimeError"),
        ("deadline-b-r0", "TrialDeadlineExceeded", "CancelledError"),
        ("timeout-c-r0", "TrialException", "AgentTimeoutError"),
        ("verifier-d-r0", "TrialException", "VerifierTimeoutError"),
    ]
    execution = read(out, "execution.json")
    assert execution["state"] == "complete"
    assert [t["execution"] for t in execution["trials"]] == ["completed"] * 5
    # Harbor's own cleanup ran: every trial's result.json was written by its finalization.
    for name in names:
        assert (out / "trials" / f"{name}-r0" / "result.json").is_file()


def _wait_for(signal_file: Path, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not signal_file.exists():
        assert process.poll() is None, process.communicate()[1]
        assert time.monotonic() < deadline, "the second trial's agent never started"
        time.sleep(0.1)


def test_sigterm_mid_run_saves_the_partial_evidence_and_resume_runs_the_rest(
    harbor_python: Path, tmp_path: Path
) -> None:
    signal_file = tmp_path / "agent-started"
    plan = write_plan(
        tmp_path, ["alpha-a", "beta-b", "gamma-c"], {"beta-b": "wait-for-signal"}, deadline=120
    )
    out = tmp_path / "out"
    command = [sys.executable, "-m", "tuneplane.cli", "eval", "run", "--plan", str(plan),
               "--out", str(out)]  # fmt: skip
    env = cli_env(harbor_python, TUNEPLANE_TEST_SIGNAL_FILE=str(signal_file))
    process = subprocess.Popen(
        command, env=env, cwd=ROOT, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL
    )
    try:
        _wait_for(signal_file, process)
        process.send_signal(signal.SIGTERM)  # the same process: the CLI exec'd Harbor's Python
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 128 + signal.SIGTERM, stderr
    assert statuses(out) == {"alpha-a-r0": "success", "beta-b-r0": "unscored"}
    assert read(out, "execution.json")["state"] == "interrupted"
    errors = read(out, "execution-errors.json")["errors"]
    assert [(e["trial_id"], e["error_type"]) for e in errors] == [("beta-b-r0", "Interrupted")]
    partial = read(out, "snapshot.json")
    assert partial["population"]["expected"] == 3
    assert not (out / "trials" / "gamma-c-r0").exists()
    first = (out / "trials" / "alpha-a-r0" / "result.json").read_bytes()

    # The model that hung answers now (the signal file exists): resume runs the rest only.
    done = eval_run(
        "--plan", str(plan), "--out", str(out), "--resume",
        harbor_python=harbor_python, TUNEPLANE_TEST_SIGNAL_FILE=str(signal_file),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "resuming: 2 of 3 trials to run" in done.stderr
    assert "trial alpha-a-r0" not in done.stderr
    assert (out / "trials" / "alpha-a-r0" / "result.json").read_bytes() == first
    execution = read(out, "execution.json")
    assert execution["state"] == "complete"
    assert execution["resumes"] == 1
    assert [(t["trial_id"], t["retry"], t["execution"]) for t in execution["trials"]] == [
        ("alpha-a-r0", 0, "completed"),
        ("beta-b-r0", 0, "interrupted"),
        ("beta-b-r0", 1, "completed"),
        ("gamma-c-r0", 0, "completed"),
    ]
    # The cut-short run stays the trial's first attempt; the resumed one is its current.
    snapshot = read(out, "snapshot.json")
    assert [(t["trial_id"], t["trial_attempt"], t["status"]) for t in snapshot["trials"]] == [
        ("alpha-a-r0", 0, "success"),
        ("beta-b-r0", 0, "unscored"),
        ("beta-b-r0", 1, "success"),
        ("gamma-c-r0", 0, "success"),
    ]
    assert (out / "retry-1" / "beta-b-r0" / "result.json").is_file()
    # One execution, one round: the partial snapshot and the complete one name the same.
    assert snapshot["round_id"] == partial["round_id"]
    assert snapshot["content_hash"] != partial["content_hash"]


def test_every_trial_configuration_is_validated_by_harbor_before_anything_starts(
    harbor_python: Path, tmp_path: Path
) -> None:
    plan = write_plan(tmp_path, ["alpha-a"])
    config = read(tmp_path, "plan.json")
    config["trial_config"]["timeout_multiplier"] = "fast"
    config["trial_config"]["agent"]["import_path"] = "tests.coordinator.world:NoSuchAgent"
    plan.write_text(json.dumps(config))
    done = eval_run(
        "--plan", str(plan), "--out", str(tmp_path / "out"), harbor_python=harbor_python
    )
    assert done.returncode == 2, done.stderr
    assert "trial_config.timeout_multiplier: Input should be a valid number" in done.stderr
    assert "Harbor's TrialConfig" in done.stderr
    assert not (tmp_path / "out").exists()
    config["trial_config"]["timeout_multiplier"] = 1.0
    plan.write_text(json.dumps(config))
    done = eval_run(
        "--plan", str(plan), "--out", str(tmp_path / "out"), harbor_python=harbor_python
    )
    assert done.returncode == 2, done.stderr
    assert "trial_config.agent: Harbor cannot load it" in done.stderr
    assert not (tmp_path / "out").exists()


def test_upload_inside_tuneplane_run_lands_the_round(
    harbor_python: Path, server: Server, tmp_path: Path
) -> None:
    run = f"eval-run-{tmp_path.name}"
    plan = write_plan(tmp_path, ["hello-a", "world-b"], {"world-b": "wrong"})
    out = tmp_path / "out"
    script = "$TUNEPLANE eval run " + shlex.join(
        ["--plan", str(plan), "--out", str(out), "--trace-limit", "1", "--upload"]
    )
    done = job(
        server, run, script,
        TUNEPLANE_HARBOR_PYTHON=str(harbor_python), PYTHONPATH=str(ROOT),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    round_id = read(out, "snapshot.json")["round_id"]
    found = rounds(server, run)
    assert list(found) == [round_id]
    assert found[round_id]["expected"] == 2
    counts = found[round_id]["counts"]
    assert (counts["success"], counts["failure"], counts["reported"]) == (1, 1, 2)
    page = trials(server, run, round_id)
    assert {t: page[t]["status"] for t in page} == {
        "hello-a-r0": "success",
        "world-b-r0": "failure",
    }
    assert [item["trial_id"] for item in trajectories(server, run, round_id)] == ["hello-a-r0"]
    assert f"round {round_id} delivered: 4 events (4 new, 0 already there)" in done.stderr


def test_a_resumed_execution_uploads_into_the_round_its_partial_snapshot_went_to(
    harbor_python: Path, sqlite_server: Server, tmp_path: Path
) -> None:
    run = f"eval-resume-{tmp_path.name}"
    signal_file = tmp_path / "agent-started"
    plan = write_plan(
        tmp_path, ["alpha-a", "beta-b", "gamma-c"], {"beta-b": "wait-for-signal"}, deadline=120
    )
    out = tmp_path / "out"
    arguments = shlex.join(["--plan", str(plan), "--out", str(out)])
    # In one job (one execution attempt): the execution is stopped by SIGTERM, its saved
    # partial snapshot uploaded by hand, then the execution resumed and uploaded.
    script = f"""
$TUNEPLANE eval run {arguments} --upload &
pid=$!
while [ ! -e {shlex.quote(str(signal_file))} ]; do sleep 0.1; done
kill -TERM $pid
wait $pid
echo "first: $?" >&2
$TUNEPLANE import upload {shlex.quote(str(out / "snapshot.json"))} || exit 9
$TUNEPLANE eval run {arguments} --resume --upload
"""
    done = job(
        sqlite_server, run, script,
        TUNEPLANE_HARBOR_PYTHON=str(harbor_python), PYTHONPATH=str(ROOT),
        TUNEPLANE_TEST_SIGNAL_FILE=str(signal_file),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "first: 143" in done.stderr
    round_id = read(out, "snapshot.json")["round_id"]
    found = rounds(sqlite_server, run)
    assert list(found) == [round_id]
    counts = found[round_id]["counts"]
    assert (counts["success"], counts["reported"], found[round_id]["expected"]) == (3, 3, 3)
    history = sqlite_server.get(
        f"/api/v1/projects/{PROJECT}/runs/{run}/evaluation/{round_id}/trials/beta-b-r0",
        attempt=1,
    )
    assert [(a["trial_attempt"], a["status"]) for a in history["attempts"]] == [
        (1, "success"),
        (0, "unscored"),
    ]
    # What the partial upload had already delivered was not stored twice.
    assert f"round {round_id} delivered: 6 events (2 new, 4 already there)" in done.stderr


def test_two_checkpoints_of_one_protocol_compare_in_the_matched_view(
    harbor_python: Path, sqlite_server: Server, tmp_path: Path
) -> None:
    # The scripted model of step 2 gets world-b wrong; the plans differ only in their
    # checkpoint (its name and the model the agent is given).
    answers = {"scripted/step-2:world-b": "wrong"}
    found = {}
    for step in (1, 2):
        base = tmp_path / f"step-{step}"
        base.mkdir()
        plan = write_plan(base, ["hello-a", "world-b"], answers, step=step)
        run = f"eval-ckpt-{step}-{tmp_path.name}"
        snapshot = uploaded_execution(sqlite_server, harbor_python, plan, base / "out", run)
        round_id = snapshot["round_id"]
        found[step] = (run, round_id, rounds(sqlite_server, run)[round_id])
    (run_1, round_1, declared_1), (run_2, round_2, declared_2) = found[1], found[2]
    assert declared_1["digests"] == declared_2["digests"]
    matched = sqlite_server.get(
        "/api/v1/evaluation/matched",
        left=f"{PROJECT}/{run_1}/{round_1}",
        right=f"{PROJECT}/{run_2}/{round_2}",
    )
    assert matched["difference"]["shown"] is True, matched["difference"]
    assert matched["difference"]["exact"] == {"numerator": -1, "denominator": 2}
    assert matched["transitions"]["success_to_failure"] == 1
