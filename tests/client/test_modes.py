"""W&B's disabled mode and its group variable, with real processes against a real server:
``TUNEPLANE_MODE=disabled`` (or ``init(mode="disabled")``) makes every call a working no-op
that touches neither the network nor the disk; ``TUNEPLANE_RUN_GROUP`` (else
``WANDB_RUN_GROUP``) is the group of a run ``init()`` or ``tuneplane run`` creates."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest

import tuneplane
from tests.client.runs import PROJECT, Server, runner_env
from tests.client.test_init import script

# Every call of the SDK a training script makes, in a process whose sockets refuse to
# connect and whose file opens are recorded: a disabled run must need neither.
DISABLED_SCRIPT = """
import builtins, os, socket, sys, threading
opened, connected = [], []
real_open = builtins.open
def watched_open(file, mode="r", *args, **kwargs):
    if any(flag in mode for flag in "wax+"):
        opened.append(str(file))
    return real_open(file, mode, *args, **kwargs)
def refuse(self, address):
    connected.append(address)
    raise OSError("no network here")
socket.socket.connect = refuse
builtins.open = watched_open
import tuneplane
run = tuneplane.init({arguments})
assert run.disabled and not run.reporting, run
run.config.update({{"batch": 32}})
run.config["seed"] = 1
run.summary["best/acc"] = 0.9
run.summary.update({{"best/loss": 0.1}})
for step in range(5):
    run.log({{"train/loss": 1.0 / (step + 1)}})
    tuneplane.log({{"train/reward": float(step)}}, step=step)
tuneplane.report({{"x": 1.0}})
assert tuneplane.alert("reward collapsed", "low", level="error") is False
assert run.alert("again") is False
assert tuneplane.event("note", {{"x": 1}}) is False
with tuneplane.init(project="second", name="r2", mode="disabled") as inner:
    inner.log({{"m": 1.0}})
    assert inner.disabled
run.finish()
tuneplane.finish()
print(dict(run.config), dict(run.summary))
print("threads", threading.active_count(), "opened", opened, "connected", connected)
"""


def _disabled(server: Server, arguments: str, **env: str) -> subprocess.CompletedProcess[str]:
    return script(server, DISABLED_SCRIPT.format(arguments=arguments), **env)


def _assert_nothing_happened(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # nothing to say: the user asked for it
    config, activity = done.stdout.splitlines()
    assert config == "{'lr': 0.1, 'batch': 32, 'seed': 1} {'best/acc': 0.9, 'best/loss': 0.1}"
    assert activity == "threads 1 opened [] connected []"


def test_tuneplane_mode_disabled_makes_every_call_a_working_no_op(
    server: Server, tmp_path: Path
) -> None:
    run = f"off-{uuid.uuid4().hex[:8]}"
    spool = tmp_path / "spool"
    arguments = f'project="{PROJECT}", name="{run}", config={{"lr": 0.1}}'
    done = _disabled(server, arguments, TUNEPLANE_MODE="disabled", TUNEPLANE_SPOOL_DIR=str(spool))
    _assert_nothing_happened(done)
    assert not spool.exists()
    gone = httpx.get(
        f"{server.base}/api/v1/projects/{PROJECT}/runs/{run}",
        headers={"Authorization": f"Bearer {server.key}"},
        timeout=10,
    )
    assert gone.status_code == 404
    # W&B's disabled init() needs no project either.
    bare = _disabled(server, 'config={"lr": 0.1}', TUNEPLANE_MODE="disabled")
    _assert_nothing_happened(bare)


def test_init_mode_disabled_wins_over_the_environment(server: Server) -> None:
    run = f"off-{uuid.uuid4().hex[:8]}"
    arguments = f'project="{PROJECT}", name="{run}", config={{"lr": 0.1}}, mode="disabled"'
    _assert_nothing_happened(_disabled(server, arguments, TUNEPLANE_MODE="online"))
    with pytest.raises(ValueError, match="mode must be one of online, offline, disabled"):
        tuneplane.init(project=PROJECT, name=run, mode="off")  # type: ignore[arg-type]


def test_tuneplane_run_disabled_runs_the_command_untracked(server: Server) -> None:
    run = f"off-{uuid.uuid4().hex[:8]}"
    code = "import tuneplane; r = tuneplane.init(); r.log({'m': 1.0}); print('trained', r.disabled)"
    done = subprocess.run(
        [sys.executable, "-m", "tuneplane.cli", "run", "--server", server.base,
         "--data-dir", str(server.data_dir), "--project", PROJECT, "--run", run,
         "--", sys.executable, "-c", code],
        env=runner_env(TUNEPLANE_MODE="disabled"), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("trained True\n", "")
    gone = httpx.get(
        f"{server.base}/api/v1/projects/{PROJECT}/runs/{run}",
        headers={"Authorization": f"Bearer {server.key}"},
        timeout=10,
    )
    assert gone.status_code == 404


def test_the_group_comes_from_the_environment(server: Server) -> None:
    runs = [f"grp-{uuid.uuid4().hex[:8]}" for _ in range(4)]
    code = f"""
        import tuneplane
        tuneplane.init(project="{PROJECT}", name="{runs[0]}").finish()
        tuneplane.init(project="{PROJECT}", name="{runs[1]}", group="given").finish()
        """
    done = script(server, code, TUNEPLANE_RUN_GROUP="sweep-3", WANDB_RUN_GROUP="wandb")
    assert done.returncode == 0, done.stderr
    assert [server.run(run)["group"] for run in runs[:2]] == ["sweep-3", "given"]
    # W&B's variable alone: its free text mapped as other tools' groups are.
    code = f'import tuneplane; tuneplane.init(project="{PROJECT}", name="{runs[2]}").finish()'
    done = script(server, code, WANDB_RUN_GROUP="lr sweep #2")
    assert done.returncode == 0, done.stderr
    assert server.run(runs[2])["group"] == "lr-sweep--2"
    # Ours is strict, as init(group=) is: the variable is named.
    bad = script(server, code, TUNEPLANE_RUN_GROUP="has space")
    assert bad.returncode == 1
    assert "ValueError: TUNEPLANE_RUN_GROUP='has space': must be 1-128 letters" in bad.stderr
    # Under tuneplane run: the runner creates the run, with the variable's group.
    runner = subprocess.run(
        [sys.executable, "-m", "tuneplane.cli", "run", "--server", server.base,
         "--data-dir", str(server.data_dir), "--project", PROJECT, "--run", runs[3],
         "--", sys.executable, "-c", "pass"],
        env=runner_env(TUNEPLANE_RUN_GROUP="seeds"), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert runner.returncode == 0, runner.stderr
    assert server.run(runs[3])["group"] == "seeds"


def test_init_mode_offline_journals_for_sync(server: Server, tmp_path: Path) -> None:
    run = f"off-{uuid.uuid4().hex[:8]}"
    spool = tmp_path / "spool"
    code = f"""
        import tuneplane
        with tuneplane.init(project="{PROJECT}", name="{run}", mode="offline") as r:
            r.log({{"m": 1.0}})
        """
    done = script(server, code, TUNEPLANE_SPOOL_DIR=str(spool), TUNEPLANE_MODE="online")
    assert done.returncode == 0, done.stderr
    assert f"journaling {PROJECT}/{run} offline" in done.stderr
    assert len(list(spool.rglob("run.json"))) == 1
    gone = httpx.get(
        f"{server.base}/api/v1/projects/{PROJECT}/runs/{run}",
        headers={"Authorization": f"Bearer {server.key}"},
        timeout=10,
    )
    assert gone.status_code == 404
