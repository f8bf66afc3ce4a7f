"""NeMo-RL step files delivered end to end: ``tuneplane import nemo-rl --upload`` inside a
``tuneplane run`` job, and ``tuneplane run --follow-nemo-rl`` while a stand-in training
writes its step files, each against a real server on SQLite and PostgreSQL."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from tests.client.runs import PROJECT, Server, runner_env
from tests.importers import nemo_rl_training
from tests.importers.jobs import job, rounds, trials
from tests.importers.nemo_rl_logs import write_train_step, write_val_step

NAN = float("nan")


def rollouts(server: Server, run: str) -> list[dict[str, Any]]:
    page = server.get(
        f"/api/v1/projects/{PROJECT}/runs/{run}/trajectories",
        scope="training",
        attempt=1,
        limit=500,
    )
    items: list[dict[str, Any]] = page["items"]
    return items


def by_step(items: list[dict[str, Any]]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for item in items:
        counts[item["step"]] = counts.get(item["step"], 0) + 1
    return counts


def test_an_import_uploads_each_step_once_however_often_it_runs(
    server: Server, tmp_path: Path
) -> None:
    logs = tmp_path / "logs" / "exp_001"
    write_train_step(logs, 1, [NAN if i % 7 == 0 else (i % 4) / 3 for i in range(50)])
    write_train_step(logs, 2, None, count=5)
    write_val_step(logs, 2, [1.0, 0.0, NAN])
    run = f"nemo-{uuid.uuid4().hex[:8]}"
    command = f"$TUNEPLANE import nemo-rl {shlex.quote(str(tmp_path / 'logs'))} --upload --out "
    script = " && ".join(
        [command + shlex.quote(str(tmp_path / "a")), command + shlex.quote(str(tmp_path / "b"))]
    )
    done = job(server, run, script)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("training step 1 delivered: 32 rollouts") == 2
    items = rollouts(server, run)
    assert by_step(items) == {1: 32, 2: 5}
    assert {i["category"] for i in items if i["step"] == 1} == {
        "low_reward",
        "invalid_reward",
        "representative",
    }
    assert {i["category"] for i in items if i["step"] == 2} == {"invalid_reward"}
    assert all(i["category"] != "failure" for i in items)
    assert all(i["collection_policy"] is None for i in items)
    ((round_id, found_round),) = rounds(server, run).items()
    assert round_id.startswith("nemo-rl-val-step2-")
    found = trials(server, run, round_id)
    assert {t: found[t]["status"] for t in found} == dict.fromkeys(
        ("idx-0", "idx-1", "idx-2"), "unscored"
    )
    assert [found[t]["reason_code"] for t in ("idx-0", "idx-1", "idx-2")] == [
        "reward_only", "reward_only", "no_reward"
    ]  # fmt: skip
    # What the log has is shown: 2 of 3 samples have a reward, whose mean is 0.5; what it
    # lacks, a verdict, withholds the success rate and the scoring coverage (not 0%).
    assert found_round["verdicts"] is False
    coverage = found_round["reward_coverage"]
    assert (coverage["numerator"], coverage["denominator"]) == (2, 3)
    assert found_round["mean_reward"] == {"value": 0.5, "numerator": 1.0, "denominator": 2}
    for figure in ("success_rate", "scoring_coverage"):
        assert found_round[figure]["value"] is None
        assert found_round[figure]["codes"] == ["no_verdicts"]
        assert "no success or failure verdicts" in found_round[figure]["reason"]


def test_the_follower_imports_completed_steps_while_training_runs(
    server: Server, tmp_path: Path
) -> None:
    run = f"follow-{uuid.uuid4().hex[:8]}"
    logs = tmp_path / "logs"
    logs.mkdir()
    write_train_step(logs / "exp_001", 1, [1.0, 0.0])  # an earlier run's: not followed
    steps, seconds = 4, 0.75
    command = [
        sys.executable, "-m", "tuneplane.cli", "run",
        "--server", server.base, "--data-dir", str(server.data_dir),
        "--project", PROJECT, "--run", run, "--follow-nemo-rl", str(logs),
        "--", sys.executable, nemo_rl_training.__file__, str(logs), str(steps), str(seconds),
        "3",
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(
        command,
        env=runner_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 3, done.stderr
    took = float(done.stdout.rsplit("training took ", 1)[1].split()[0])
    assert took < steps * seconds + 1.0  # the training itself was not slowed
    assert elapsed < took + 15
    assert "nemo-rl: 5 step files imported, 131 texts queued" in done.stderr, done.stderr
    items = rollouts(server, run)
    assert by_step(items) == {1: 32, 2: 32, 3: 32, 4: 32}
    assert all(i["category"] != "failure" for i in items)
    (round_id,) = rounds(server, run)
    assert round_id.startswith("nemo-rl-val-step2-")


def test_the_follower_says_so_when_telemetry_is_off(tmp_path: Path) -> None:
    command = [
        sys.executable, "-m", "tuneplane.cli", "run",
        "--server", "http://127.0.0.1:9", "--project", PROJECT, "--run", "off",
        "--follow-nemo-rl", str(tmp_path),
        "--", sys.executable, nemo_rl_training.__file__, str(tmp_path), "1", "0", "0",
    ]  # fmt: skip
    done = subprocess.run(
        command,
        env=runner_env(TUNEPLANE_API_KEY="tpk_none"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "no step files are followed" in done.stderr
