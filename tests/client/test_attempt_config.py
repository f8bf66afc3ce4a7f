"""A config declared after the attempt started: ``init(config=…)`` and ``TuneplaneCallback``
under ``tuneplane run`` (the real runner, the real transformers Trainer on the CPU), and
``POST /api/v1/ingest/config`` itself on both engines."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import httpx

from tests.client.runs import PROJECT, Server, runner_env
from tests.client.test_transformers import TRAIN
from tuneplane.contract.ids import id_for_name


def _run_under_runner(
    server: Server, run: str, code: str, *flags: str
) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable, "-m", "tuneplane.cli", "run", "--server", server.base,
        "--data-dir", str(server.data_dir), "--project", PROJECT, "--run", run, *flags,
        "--", sys.executable, "-c", textwrap.dedent(code),
    ]  # fmt: skip
    return subprocess.run(
        command, env=runner_env(), capture_output=True, text=True, timeout=180, check=False
    )


def _trainer(server: Server, tmp_path: Path, run: str, *flags: str) -> dict[str, object]:
    code = TRAIN.format(
        output=str(tmp_path), run_name="ignored", project=PROJECT, body="trainer.train()"
    )
    done = _run_under_runner(server, run, code, *flags)
    assert done.returncode == 0, done.stderr
    assert "is recorded on attempt 1" in done.stderr
    return server.run(run)


def test_the_trainer_s_config_becomes_the_run_s_under_the_runner(
    sqlite_server: Server, tmp_path: Path
) -> None:
    run = f"cfg-{uuid.uuid4().hex[:8]}"
    found = _trainer(sqlite_server, tmp_path, run)
    config = found["config"]
    assert isinstance(config, dict)
    assert config["training_args"]["learning_rate"] == 1e-3
    assert config["model_config"]["n_embd"] == 16
    # The attempt recorded the same config, so no attempt is listed as differing.
    assert found["attempt_configs"] == []
    assert found["status"] == "succeeded"


def test_a_runner_config_stays_the_run_s_and_the_trainer_s_is_the_attempt_s(
    sqlite_server: Server, tmp_path: Path
) -> None:
    run = f"cfg-{uuid.uuid4().hex[:8]}"
    found = _trainer(sqlite_server, tmp_path, run, "--config", '{"recipe": "sft"}')
    assert found["config"] == {"recipe": "sft"}
    (listed,) = found["attempt_configs"]  # type: ignore[misc]
    assert listed["attempt"] == 1
    assert listed["config"]["training_args"]["learning_rate"] == 1e-3


def test_init_config_under_the_runner(sqlite_server: Server) -> None:
    run = f"cfg-{uuid.uuid4().hex[:8]}"
    done = _run_under_runner(
        sqlite_server,
        run,
        """
        import tuneplane
        with tuneplane.init(config={"lr": 0.5, "layers": [1, 2]}) as r:
            r.log({"train/loss": 1.0})
        """,
    )
    assert done.returncode == 0, done.stderr
    assert "config is recorded on attempt 1 and as the run's config" in done.stderr
    assert sqlite_server.run(run)["config"] == {"lr": 0.5, "layers": [1, 2]}


def test_the_route_writes_once_per_attempt(server: Server) -> None:
    run = f"cfg-{uuid.uuid4().hex[:8]}"
    token = server.start_attempt(run)
    url = f"{server.base}/api/v1/ingest/config"
    auth = {"Authorization": f"Bearer {token}"}

    def post(body: object) -> httpx.Response:
        return httpx.post(url, json=body, headers=auth, timeout=10)

    first = post({"config": {"lr": 1}})
    assert first.status_code == 200, first.text
    assert first.json() == {"attempt": 1, "recorded": {"attempt": True, "run": True}}
    again = post({"config": {"lr": 1}})
    assert again.status_code == 200
    assert again.json()["recorded"] == {"attempt": False, "run": False}
    other = post({"config": {"lr": 2}})
    assert other.status_code == 409, other.text
    assert "written once" in other.json()["error"]["message"]
    for bad, field in (({}, "config"), ({"config": []}, "config"), ({"config": {}}, "config")):
        refused = post(bad)
        assert refused.status_code == 422, refused.text
        assert field in refused.text
    found = server.run(run)
    assert found["config"] == {"lr": 1}
    assert found["attempt_configs"] == []
    # An ingest token writes its own attempt only: a user key is not one.
    as_user = httpx.post(
        url, json={"config": {"x": 1}}, headers={"Authorization": f"Bearer {server.key}"}
    )
    assert as_user.status_code in (401, 403)
    assert id_for_name(run) == run
