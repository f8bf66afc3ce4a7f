"""``tuneplane run``: options, exit codes, signals, and a server that is down or goes away.
Processes are real: the runner, the training command, ``tuneplane serve``."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.client import training_job
from tests.client.runs import PROJECT, Server, runner_command, runner_env, tuneplane_run
from tests.client.world import dead_url, proxy
from tuneplane.client.runner import RunnerOptions, UsageError, child_environment, exit_code

# --- options ----------------------------------------------------------------------------------


def build(**overrides: object) -> RunnerOptions:
    arguments: dict[str, object] = {
        "project": "demo",
        "run": "grpo-7",
        "command": ["--", "python", "train.py"],
        "environ": {},
    }
    arguments.update(overrides)
    return RunnerOptions.build(**arguments)  # type: ignore[arg-type]


def test_options_from_flags_and_environment(tmp_path: Path) -> None:
    (tmp_path / "admin.key").write_text("tpk_from_file\n")
    options = build(environ={"TUNEPLANE_DIR": str(tmp_path), "TUNEPLANE_FLUSH_TIMEOUT": "2.5"})
    assert options.command == ("python", "train.py")
    assert options.server == "http://127.0.0.1:8000"
    assert options.api_key == "tpk_from_file"
    assert options.flush_timeout == 2.5
    assert "tpk_" not in repr(options)

    env = {"TUNEPLANE_URL": "http://tp:9000/", "TUNEPLANE_API_KEY": "tpk_env"}
    options = build(environ=env, config='{"lr": 1e-5}')
    assert (options.server, options.api_key, options.config) == (
        "http://tp:9000",
        "tpk_env",
        {"lr": 1e-5},
    )
    assert build(environ=env, server="http://other:1").server == "http://other:1"
    config = tmp_path / "config.json"
    config.write_text('{"model": "qwen"}')
    assert build(config=f"@{config}").config == {"model": "qwen"}
    assert build(data_dir=str(tmp_path / "nowhere")).api_key is None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"project": "bad\tproject"}, "--project"),
        ({"run": ""}, "--run"),
        ({"command": ["--"]}, "no command"),
        ({"config": "{nope"}, "not valid JSON"),
        ({"config": "[1, 2]"}, "JSON object"),
        ({"config": '{"x": "' + "y" * 70_000 + '"}'}, "at most 65536"),
        ({"config": "@/does/not/exist"}, "cannot read"),
    ],
)
def test_usage_errors(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        build(**overrides)


def test_exit_codes_follow_the_shell() -> None:
    assert [exit_code(c) for c in (0, 3, -15, -9, -2)] == [0, 3, 143, 137, 130]


def test_the_command_gets_the_job_environment_and_never_a_stale_one() -> None:
    options = build()
    outer = {"PATH": "/bin", "TUNEPLANE_JOB_TOKEN": "tpi_outer", "TUNEPLANE_JOB_ATTEMPT": "9",
             "TUNEPLANE_JOB_ATTEMPT_KEY": "outer-key"}  # fmt: skip
    env = child_environment(outer, options, None)
    assert env == {"PATH": "/bin", "PYTHONUNBUFFERED": "1"}


def test_usage_error_exits_2_before_running_anything(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    done = subprocess.run(
        [sys.executable, "-m", "tuneplane.cli", "run", "--project", "p\tq", "--run", "r", "--",
         sys.executable, "-c", f"open({str(marker)!r}, 'w')"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "tuneplane run: --project" in done.stderr
    assert not marker.exists()


# --- without a server -------------------------------------------------------------------------


def test_server_down_the_command_still_runs_with_its_exit_code(tmp_path: Path) -> None:
    started = time.monotonic()
    done = tuneplane_run(dead_url(), tmp_path, "untracked", "20", "3")
    assert time.monotonic() - started < 20
    assert done.returncode == 3
    assert done.stdout == b"\n".join(training_job.expected_stdout(20))
    stderr = done.stderr.decode(errors="replace")
    assert "tuneplane: warning: telemetry is off for this run" in stderr
    assert "Running the command anyway" in stderr
    # The command was told nothing, so its reports say once that they go nowhere.
    assert stderr.count("tuneplane: metrics and events are not reported") == 1


def test_a_command_that_cannot_start_exits_127(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tuneplane.cli", "run", "--server", dead_url(),
         "--data-dir", str(tmp_path), "--project", "p", "--run", "r", "--", "/no/such/command"],
        capture_output=True, text=True, timeout=60, env=runner_env(),
    )  # fmt: skip
    assert done.returncode == 127
    assert "cannot start '/no/such/command'" in done.stderr


# --- with a server ----------------------------------------------------------------------------


@pytest.fixture
def server(sqlite_server: Server) -> Server:
    return sqlite_server


def test_each_run_is_a_new_attempt_and_a_failure_is_reported(server: Server) -> None:
    for attempt, code in ((1, 0), (2, 3)):
        done = tuneplane_run(server.base, server.data_dir, "resumed", "5", str(code))
        assert done.returncode == code
        assert f"(attempt {attempt})" in done.stderr.decode()
    run = server.run("resumed")
    assert (run["attempt"], run["status"], run["exit_code"]) == (2, "failed", 3)
    lines = server.get("/api/v1/projects/e2e/runs/resumed/logs", limit=5000)["lines"]
    assert {line["attempt"] for line in lines} == {1, 2}
    for attempt in (1, 2):
        seqs = [line["seq"] for line in lines if line["attempt"] == attempt]
        assert sorted(seqs) == list(range(len(seqs)))  # numbered from 0 in each attempt


def test_a_resumed_run_s_automatic_steps_continue_after_its_last(server: Server) -> None:
    code = textwrap.dedent(
        """
        import tuneplane
        for _ in range(3):
            tuneplane.report({"train/loss": 0.5})
        """
    )
    for _ in range(2):
        done = subprocess.run(
            [
                sys.executable, "-m", "tuneplane.cli", "run", "--server", server.base,
                "--data-dir", str(server.data_dir), "--project", PROJECT, "--run", "continued",
                "--", sys.executable, "-c", code,
            ],
            env=runner_env(), capture_output=True, text=True, timeout=90,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    page = server.get(f"/api/v1/projects/{PROJECT}/runs/continued/points/train/loss")
    # The second attempt's steps follow the first's, rather than correcting them.
    assert [p["step"] for p in page["points"]] == list(range(6))


def test_a_refused_key_or_config_leaves_the_command_running(server: Server) -> None:
    done = tuneplane_run(
        server.base, server.data_dir, "keyless", "5", "0", TUNEPLANE_API_KEY="tpk_no"
    )
    assert done.returncode == 0
    # The server's own words, not only its status.
    said = "the server refused the API key (401: authorization: the API key is not valid"
    assert said in done.stderr.decode()

    command = runner_command(server.base, server.data_dir, "configured", "5", "0")
    command.insert(command.index("--project"), '--config={"lr": 1}')
    first = subprocess.run(command, env=runner_env(), capture_output=True, timeout=60)
    assert first.returncode == 0
    changed = [arg.replace('"lr": 1', '"lr": 2') for arg in command]
    second = subprocess.run(changed, env=runner_env(), capture_output=True, timeout=60)
    assert second.returncode == 0
    stderr = second.stderr.decode()
    assert "telemetry is off" in stderr
    assert "409" in stderr
    assert server.run("configured")["config"] == {"lr": 1}


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_is_passed_on_and_the_attempt_cancelled(
    server: Server, sig: signal.Signals, code: int
) -> None:
    run = f"signalled-{sig.name.lower()}"
    process = subprocess.Popen(
        runner_command(server.base, server.data_dir, run, "0", "0", "wait"),
        env=runner_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    with process:
        assert process.stdout.readline() == b"ready\n"
        server.wait_until_running(run)
        process.send_signal(sig)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == code, stderr.decode()
    found = server.run(run)
    assert (found["status"], found["exit_code"]) == ("cancelled", -sig.value)


def test_the_server_going_away_costs_telemetry_not_training(server: Server, tmp_path: Path) -> None:
    """The server is reachable while the runner sets up, then gone (the proxy cuts every
    connection) while the job trains: the job finishes, and the loss is summed up."""
    gate = tmp_path / "go"
    with proxy(server.base, lambda request: "cut" if gate.exists() else "pass") as url:
        process = subprocess.Popen(
            runner_command(url, server.data_dir, "orphaned", "200", "0", f"gate={gate}"),
            env=runner_env(TUNEPLANE_FLUSH_TIMEOUT="1"),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        with process:
            server.wait_until_running("orphaned")
            gate.touch()  # from now on the server is unreachable: train
            started = time.monotonic()
            stdout, stderr = process.communicate(timeout=60)
    assert time.monotonic() - started < 20
    assert process.returncode == 0
    assert stdout == b"\n".join(training_job.expected_stdout(200))
    lines = stderr.decode(errors="replace").splitlines()
    assert "tuneplane: 0 of 600 points delivered (600 dropped: server unreachable)" in lines
    # The job's own lines, and the two its reporter wrote to stderr about the loss.
    logs = len(training_job.expected_stdout(200)) + len(training_job.expected_stderr(200)) + 2
    assert (
        f"tuneplane: 0 of {logs} log lines delivered ({logs} dropped: server unreachable)" in lines
    )
    assert any("could not report status 'succeeded'" in line for line in lines)
    assert server.run("orphaned")["status"] == "running"  # the last word that arrived
