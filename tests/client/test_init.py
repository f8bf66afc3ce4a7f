"""``tuneplane.init()`` / ``log()`` / ``alert()`` / ``finish()`` in real Python processes
against a real server: a plain script, resume and its modes, the context manager, ranks."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import time
import uuid
from typing import Any

import pytest

from tests.client.runs import PROJECT, Server, runner_env


def script(server: Server, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter, with the server's URL and the admin key."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=runner_env(TUNEPLANE_URL=server.base, TUNEPLANE_API_KEY=server.key, **env),
        capture_output=True,
        text=True,
        timeout=90,
    )


def points(server: Server, run: str, metric: str) -> list[tuple[int, float]]:
    page = server.get(f"/api/v1/projects/{PROJECT}/runs/{run}/points/{metric}", limit=10_000)
    return [(p["step"], p["value"]) for p in page["points"]]


def metric_names(server: Server, run: str) -> set[str]:
    return {m["metric"] for m in server.get(f"/api/v1/projects/{PROJECT}/runs/{run}/metrics")}


def fresh() -> str:
    return f"init-{uuid.uuid4().hex[:10]}"


def test_a_plain_script_reports_with_init_log_alert_finish(server: Server) -> None:
    run = fresh()
    done = script(
        server,
        f"""
        import tuneplane
        r = tuneplane.init(project="{PROJECT}", name="{run}", config={{"lr": 0.001}})
        assert r.reporting, r
        assert r.attempt == 1 and not r.resumed, r
        for i in range(5):
            tuneplane.log({{"train/loss": 1.0 / (i + 1)}})
        tuneplane.log({{"train/loss": 0.5}}, step=2)  # a correction
        assert tuneplane.alert("reward collapsed", "below 0.1", level="error", step=4)
        assert not tuneplane.alert("")  # breaks the title rule: refused, not raised
        tuneplane.finish()
        tuneplane.log({{"train/loss": 9.0}})  # after finish: nothing, no error
        """,
    )
    assert done.returncode == 0, done.stderr
    assert f"reporting {PROJECT}/{run} (attempt 1)" in done.stderr
    found = server.run(run)
    assert (found["status"], found["exit_code"], found["config"]) == (
        "succeeded",
        None,
        {"lr": 0.001},
    )
    assert found["attempt_configs"] == []
    assert points(server, run, "train/loss") == [
        (0, 1.0),
        (1, 0.5),
        (2, 0.5),
        (3, 0.25),
        (4, 0.2),
    ]
    alerts = server.get(f"/api/v1/projects/{PROJECT}/runs/{run}/alerts")
    items = alerts["alerts"] if isinstance(alerts, dict) else alerts
    assert [(a["title"], a["text"], a["level"], a["step"]) for a in items] == [
        ("reward collapsed", "below 0.1", "error", 4)
    ]


RESUME = """
import tuneplane
r = tuneplane.init(project="{project}", name="{run}", config={config}, resume="{mode}")
for i in range({steps}):
    tuneplane.log({{"loss": float(i)}})
tuneplane.finish()
print("resumed" if r.resumed else "created", r.attempt)
"""


def resume(
    server: Server, run: str, config: dict[str, Any], steps: int, mode: str = "allow"
) -> Any:
    code = RESUME.format(project=PROJECT, run=run, config=config, steps=steps, mode=mode)
    return script(server, code)


def test_a_resumed_run_continues_its_steps_and_records_a_differing_config(server: Server) -> None:
    run = fresh()
    first = resume(server, run, {"lr": 1}, 5)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["created", "1"], first.stderr
    same = resume(server, run, {"lr": 1}, 2)
    assert same.stdout.split() == ["resumed", "2"], same.stderr
    assert "config" not in same.stderr
    changed = resume(server, run, {"lr": 2}, 3)
    assert changed.returncode == 0, changed.stderr
    assert changed.stdout.split() == ["resumed", "3"], changed.stderr
    said = [line for line in changed.stderr.splitlines() if "config" in line]
    assert said == [
        f"tuneplane: run {PROJECT}/{run} keeps the config it was created with; attempt 3's "
        "own config differs and is recorded on the attempt"
    ]
    # Automatic steps continued after each attempt's last: nothing was overwritten.
    assert points(server, run, "loss") == [
        (step, float(value)) for step, value in enumerate([0, 1, 2, 3, 4, 0, 1, 0, 1, 2])
    ]
    found = server.run(run)
    assert found["config"] == {"lr": 1}
    assert found["attempt_configs"] == [{"attempt": 3, "config": {"lr": 2}}]


def test_resume_modes_refuse_clearly(server: Server) -> None:
    run = fresh()
    missing = resume(server, run, {}, 1, mode="must")
    assert missing.returncode == 1
    assert (
        f"tuneplane.client.errors.ResumeRefused: run {PROJECT}/{run} does not exist "
        "(resume='must')" in missing.stderr
    )
    assert resume(server, run, {}, 1, mode="never").stdout.split() == ["created", "1"]
    again = resume(server, run, {}, 1, mode="never")
    assert again.returncode == 1
    assert f"ResumeRefused: run {PROJECT}/{run} already exists (resume='never')" in again.stderr
    assert resume(server, run, {}, 1, mode="must").stdout.split() == ["resumed", "2"]
    assert server.run(run)["attempt"] == 2  # the refused never started an attempt


def test_the_context_manager_fails_the_attempt_on_an_exception(server: Server) -> None:
    run = fresh()
    done = script(
        server,
        f"""
        import tuneplane
        with tuneplane.init(project="{PROJECT}", name="{run}") as r:
            r.log({{"loss": 1.0}})
            raise RuntimeError("diverged")
        """,
    )
    assert done.returncode == 1
    assert "RuntimeError: diverged" in done.stderr
    found = server.run(run)
    assert (found["status"], found["exit_code"]) == ("failed", 1)
    assert points(server, run, "loss") == [(0, 1.0)]

    ok = fresh()
    done = script(server, f'import tuneplane\nwith tuneplane.init("{PROJECT}", "{ok}"):\n  pass\n')
    assert done.returncode == 0, done.stderr
    assert server.run(ok)["status"] == "succeeded"


def test_an_unreachable_server_leaves_training_running(server: Server) -> None:
    done = script(
        server,
        f"""
        import tuneplane
        r = tuneplane.init(project="{PROJECT}", name="x", server="http://127.0.0.1:9")
        tuneplane.log({{"loss": 1.0}})
        tuneplane.finish()
        print(r.reporting)
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False"], done.stderr
    assert f"telemetry is off for {PROJECT}/x: could not create the run" in done.stderr


TORCH_JOB = """
import sys, tuneplane
import torch.distributed as dist
dist.init_process_group("gloo")
r = tuneplane.init(project="{project}", name="{run}", per_rank={per_rank})
for step in range(3):
    tuneplane.log({{"loss": float(10 * dist.get_rank() + step)}})
dist.barrier()
tuneplane.finish()
dist.destroy_process_group()
"""


def torchrun(server: Server, run: str, per_rank: bool, tmp: Any, runner: bool) -> Any:
    job = tmp / "job.py"
    job.write_text(TORCH_JOB.format(project=PROJECT, run=run, per_rank=per_rank))
    command = [shutil.which("torchrun") or "torchrun", "--nproc_per_node", "2", str(job)]
    if runner:
        command = [
            sys.executable, "-m", "tuneplane.cli", "run", "--server", server.base,
            "--project", PROJECT, "--run", run, "--", *command,
        ]  # fmt: skip
    env = runner_env(TUNEPLANE_URL=server.base, TUNEPLANE_API_KEY=server.key)
    env.pop("RANK", None)
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)


def test_under_torchrun_only_rank_0_reports(server: Server, tmp_path: Any) -> None:
    run = fresh()
    done = torchrun(server, run, False, tmp_path, runner=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("rank 1 of 2 does not report (only rank 0 reports)") == 1
    assert metric_names(server, run) == {"loss"}
    assert points(server, run, "loss") == [(0, 0.0), (1, 1.0), (2, 2.0)]
    assert server.run(run)["status"] == "succeeded"


def test_per_rank_reports_every_rank_into_its_own_series(server: Server, tmp_path: Any) -> None:
    run = fresh()
    done = torchrun(server, run, True, tmp_path, runner=True)
    assert done.returncode == 0, done.stderr
    assert metric_names(server, run) == {"loss@rank0", "loss@rank1"}
    assert points(server, run, "loss@rank0") == [(0, 0.0), (1, 1.0), (2, 2.0)]
    assert points(server, run, "loss@rank1") == [(0, 10.0), (1, 11.0), (2, 12.0)]
    assert server.run(run)["status"] == "succeeded"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"RANK": "x"}, "RANK='x': must be a nonnegative integer"),
        ({"RANK": "2", "WORLD_SIZE": "2"}, "RANK=2 must be below"),
    ],
)
def test_bad_rank_variables_are_named(server: Server, env: dict[str, str], message: str) -> None:
    done = script(server, f'import tuneplane\ntuneplane.init("{PROJECT}", "{fresh()}")', **env)
    assert done.returncode == 1
    assert message in done.stderr


def test_any_name_people_give_is_a_run_with_that_display_name(server: Server) -> None:
    """``qwen2.5-sft``, spaces and ``=`` (W&B and Trackio accept them): the run gets the ID
    contract.ids.id_for_name derives, keeps the name as its display name, and a second
    ``init()`` with the same name resumes the same run."""
    name = f"qwen2.5-sft lr=1e-5 {uuid.uuid4().hex[:6]}"
    code = f"""
        import tuneplane
        for _ in range(2):
            r = tuneplane.init(project="Init {PROJECT}.v2", name={name!r})
            assert r.reporting, r
            tuneplane.log({{"loss": 0.5}})
            tuneplane.finish()
        print(r.name)
        """
    done = script(server, code)
    assert done.returncode == 0, done.stderr
    from tuneplane.contract.ids import id_for_name

    run, project = id_for_name(name), id_for_name(f"Init {PROJECT}.v2", fallback="project")
    assert done.stdout.split() == [run]
    found = server.get(f"/api/v1/projects/{project}/runs/{run}")
    (listed,) = [p for p in server.get("/api/v1/projects") if p["project"] == project]
    assert listed["display_name"] == f"Init {PROJECT}.v2"
    assert (found["display_name"], found["attempt"], found["status"]) == (name, 2, "succeeded")
    # A name no rule can keep is said once on stderr; training goes on, under its ID.
    odd = script(
        server,
        f"""
        import tuneplane
        r = tuneplane.init(project="{PROJECT}", name="tab\\there")
        assert r.reporting, r
        tuneplane.finish()
        """,
    )
    assert odd.returncode == 0, odd.stderr
    assert "name 'tab\\there': must be 1-256 characters" in odd.stderr
    assert server.run(id_for_name("tab\there"))["display_name"] is None


def test_a_second_init_finishes_the_first_run(server: Server) -> None:
    first, second = fresh(), fresh()
    done = script(
        server,
        f"""
        import tuneplane
        tuneplane.init(project="{PROJECT}", name="{first}")
        tuneplane.log({{"loss": 1.0}})
        tuneplane.init(project="{PROJECT}", name="{second}")  # a notebook's next cell
        tuneplane.log({{"loss": 2.0}})
        tuneplane.finish()
        """,
    )
    assert done.returncode == 0, done.stderr
    assert f"finishing {PROJECT}/{first} first" in done.stderr
    assert server.run(first)["status"] == "succeeded"
    assert points(server, first, "loss") == [(0, 1.0)]
    assert points(server, second, "loss") == [(0, 2.0)]


def _log_lines(server: Server, run: str) -> list[tuple[str, str]]:
    lines = server.get(f"/api/v1/projects/{PROJECT}/runs/{run}/logs")["lines"]
    return [(line["stream"], line["text"]) for line in lines]


def _diagnosis(server: Server, run: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        found = server.get(f"/api/v1/projects/{PROJECT}/runs/{run}/diagnoses")["diagnoses"]
        done = [d for d in found if d["state"] != "running"]
        if done or time.monotonic() > deadline:
            assert done, found
            return dict(done[0])
        time.sleep(0.2)


def test_a_crash_inside_init_is_in_the_log_and_diagnosed(server: Server) -> None:
    """The console (a tqdm-like bar drawn with \\r is one line, its last state) and the
    exception that left the block reach the attempt's log before its failed status, so the
    failure is diagnosed as it is under ``tuneplane run``."""
    run = fresh()
    done = script(
        server,
        f"""
        import sys
        import tuneplane
        class OutOfMemoryError(RuntimeError):
            pass
        with tuneplane.init(project="{PROJECT}", name="{run}"):
            print("step 1 loss 2.3")
            for percent in range(0, 101, 10):
                print(f"\\rtraining: {{percent}}%", end="", file=sys.stderr, flush=True)
            print(file=sys.stderr)
            raise OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        """,
    )
    assert done.returncode == 1
    assert "CUDA out of memory" in done.stderr  # Python still prints it
    found = server.run(run)
    assert (found["status"], found["exit_code"]) == ("failed", 1)
    lines = _log_lines(server, run)
    assert ("stdout", "step 1 loss 2.3") in lines
    assert [t for s, t in lines if "training" in t] == ["training: 100%"]
    assert lines[-1] == (
        "stderr",
        "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    )
    assert any(t == "Traceback (most recent call last):" for _, t in lines)
    assert "cuda_oom" in [f["code"] for f in _diagnosis(server, run)["findings"]]


@pytest.mark.parametrize(
    ("ending", "status", "exit_code"),
    [
        ("pass", "succeeded", None),
        ("sys.exit(3)", "failed", 3),
        ("raise ValueError('bad batch')", "failed", 1),
    ],
)
def test_a_script_that_never_calls_finish_ends_its_run_as_it_ended(
    server: Server, ending: str, status: str, exit_code: int | None
) -> None:
    run = fresh()
    done = script(
        server,
        f"""
        import sys
        import tuneplane
        tuneplane.init(project="{PROJECT}", name="{run}", console="off")
        tuneplane.log({{"loss": 1.0}})
        {ending}
        """,
    )
    assert done.returncode == (exit_code or 0), done.stderr
    found = server.run(run)
    assert (found["status"], found["exit_code"]) == (status, exit_code)
    lines = _log_lines(server, run)
    if "ValueError" in ending:
        assert lines[-1] == ("stderr", "ValueError: bad batch")  # console="off": only this
    else:
        assert lines == []
