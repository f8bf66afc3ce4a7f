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

from tests.client.runs import Server
from tests.coordinator.cohort import (
    cli_env,
    eval_run,
    read,
    statuses,
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
    assert "evaluation complete: all 4 planned trials scored" in done.stderr
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


@pytest.mark.parametrize(
    ("behaviour", "error_type", "exception_type", "status"),
    [
        ("sleep", "TrialDeadlineExceeded", "CancelledError", "unscored"),
        ("crash", "TrialException", "RuntimeError", "unscored"),
        ("right-slow-verifier", "TrialException", "VerifierTimeoutError", "infra_error"),
    ],
)
def test_an_exception_or_timeout_stops_further_trials_and_keeps_the_denominator(
    harbor_python: Path,
    tmp_path: Path,
    behaviour: str,
    error_type: str,
    exception_type: str,
    status: str,
) -> None:
    write_task(tmp_path / "tasks", "broken-b", verifier_timeout=1.0, slow=True)
    answer = "right" if behaviour.startswith("right") else behaviour
    if behaviour.startswith("right"):
        tasks = ["alpha-a", "broken-b", "gamma-c"]
    else:
        tasks = ["alpha-a", "beta-b", "gamma-c"]
    middle = tasks[1]
    # The deadline only the sleeping agent reaches (a loaded machine is slow, not stuck).
    plan = write_plan(tmp_path, tasks, {middle: answer}, deadline=30 if answer == "sleep" else 300)
    out = tmp_path / "out"
    started = time.monotonic()
    done = eval_run("--plan", str(plan), "--out", str(out), harbor_python=harbor_python)
    assert done.returncode == 1, done.stderr
    assert time.monotonic() - started < 240
    # The trial before ran, the one that broke is in the evidence, the one after never ran.
    assert statuses(out) == {"alpha-a-r0": "success", f"{middle}-r0": status}
    snapshot = read(out, "snapshot.json")
    assert snapshot["population"]["expected"] == 3
    assert not (out / "trials" / "gamma-c-r0").exists()
    errors = read(out, "execution-errors.json")["errors"]
    assert [(e["trial_id"], e["error_type"], e["exception_type"]) for e in errors] == [
        (f"{middle}-r0", error_type, exception_type)
    ]
    execution = read(out, "execution.json")
    assert execution["state"] == "stopped"
    assert [t["execution"] for t in execution["trials"]] == ["completed", "stopped", "not_started"]
    # Harbor's own cleanup ran: the trial's result.json was written by its finalization.
    assert (out / "trials" / f"{middle}-r0" / "result.json").is_file()
    assert f"stopped at trial {middle}-r0 ({error_type}); 1 of 3 planned trials not run" in (
        done.stderr
    )


def test_sigterm_mid_run_saves_the_partial_evidence(harbor_python: Path, tmp_path: Path) -> None:
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
        deadline = time.monotonic() + 60
        while not signal_file.exists():
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() < deadline, "the second trial's agent never started"
            time.sleep(0.1)
        process.send_signal(signal.SIGTERM)  # the same process: the CLI exec'd Harbor's Python
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 128 + signal.SIGTERM, stderr
    assert statuses(out) == {"alpha-a-r0": "success", "beta-b-r0": "unscored"}
    assert read(out, "execution.json")["state"] == "interrupted"
    errors = read(out, "execution-errors.json")["errors"]
    assert [(e["trial_id"], e["error_type"]) for e in errors] == [("beta-b-r0", "Interrupted")]
    assert read(out, "snapshot.json")["population"]["expected"] == 3
    assert not (out / "trials" / "gamma-c-r0").exists()


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
