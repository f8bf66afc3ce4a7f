"""Secrets by name through a real server process and a real job on the local engine: the job
gets the value from the server's environment, and the value is in no stored config, check
record, API answer or database file; a secret the server lacks fails the readiness check,
naming it, and the submission starts nothing."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.launch.test_submit import PROJECT, Server
from tests.serving import running_server
from tuneplane.contract.settings import SettingError
from tuneplane.launch.recipes import load_recipes

VALUE = "hf_s3cr3t-value-that-must-stay-in-the-job-only"
JOB = """
import hashlib, os
import tuneplane

tuneplane.report({"train/loss": 1.0}, step=0)
print("secret digest", hashlib.sha256(os.environ["TP_TEST_TOKEN"].encode()).hexdigest())
"""
RECIPE = f"""
engine = "local"
command = ["python", "job.py"]
secrets = ["TP_TEST_TOKEN"]

[source]
path = "src"

[runtime]
python = "{sys.prefix}"
"""


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[Server]:
    recipes = tmp_path / "recipes"
    (recipes / "src").mkdir(parents=True)
    (recipes / "src" / "job.py").write_text(JOB)
    (recipes / "with_secret.toml").write_text(RECIPE)
    (recipes / "missing_secret.toml").write_text(
        RECIPE.replace('["TP_TEST_TOKEN"]', '["TP_TEST_TOKEN", "TP_NOT_SET"]')
    )
    env = {
        "TUNEPLANE_DIR": str(tmp_path / "data"),
        "TUNEPLANE_RECIPES_DIR": str(recipes),
        "TP_TEST_TOKEN": VALUE,
    }
    with running_server("--database-url", database_url, env=env) as base:
        opened = Server.opened(base, tmp_path / "data")
        yield opened
        opened.http.close()


def test_the_job_gets_the_secret_and_nothing_keeps_it(
    server: Server, database_url: str, tmp_path: Path
) -> None:
    answers = []
    preview = server.http.post(
        f"/api/v1/projects/{PROJECT}/launch/preview", json={"recipe": "with_secret"}
    )
    checks = {c["name"]: c for c in preview.json()["checks"]}
    assert checks["secrets"]["status"] == "passed", checks
    assert "TP_TEST_TOKEN" in checks["secrets"]["reason"]
    launched = server.launch({"recipe": "with_secret", "run": "secret-run"})
    assert launched.status_code == 201, launched.text
    job = server.wait(launched.json()["job"]["id"], "succeeded", "failed")
    assert job["state"] == "succeeded", job
    digest = hashlib.sha256(VALUE.encode()).hexdigest()
    assert f"secret digest {digest}" in server.logs("secret-run")
    run = server.run("secret-run")
    assert run["config"]["tuneplane_launch"]["checks"][-1]["name"] == "secrets"
    recipe = server.http.get("/api/v1/recipes/with_secret")
    assert recipe.json()["secrets"] == ["TP_TEST_TOKEN"]
    answers += [preview.text, launched.text, recipe.text, str(run)]
    answers += [server.http.get(f"/api/v1/projects/{PROJECT}/launch/jobs").text]
    answers += [server.http.get(f"/api/v1/projects/{PROJECT}/runs/secret-run/logs").text]
    for answer in answers:
        assert VALUE not in answer
    if database_url.startswith("sqlite"):  # the store's own bytes, write-ahead log and all
        for file in (tmp_path / "data").rglob("*"):
            if file.is_file():
                assert VALUE.encode() not in file.read_bytes(), file


def test_a_missing_secret_fails_the_check_naming_it(server: Server) -> None:
    body = {"recipe": "missing_secret", "run": "never"}
    preview = server.http.post(f"/api/v1/projects/{PROJECT}/launch/preview", json=body)
    checks = {c["name"]: c for c in preview.json()["checks"]}
    assert preview.json()["ready"] is False
    assert checks["secrets"] == {
        "name": "secrets",
        "title": "Secrets by name",
        "status": "failed",
        "reason": "not set in the server's environment: TP_NOT_SET",
    }
    refused = server.launch(body)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["details"] == [
        {"field": "checks.secrets", "rule": checks["secrets"]["reason"]}
    ]
    assert server.jobs() == []
    assert server.http.get(f"/api/v1/projects/{PROJECT}/runs/never").status_code == 404


def test_a_recipe_naming_a_setting_or_a_bad_name_does_not_load(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    bad = RECIPE.replace('["TP_TEST_TOKEN"]', '["TUNEPLANE_DATABASE_URL", "1X", "A", "A"]')
    (tmp_path / "bad.toml").write_text(bad)
    with pytest.raises(SettingError) as refused:
        load_recipes(tmp_path)
    assert list(refused.value.problems) == [
        f"{tmp_path / 'bad.toml'}: secrets[0]: TUNEPLANE_DATABASE_URL: TUNEPLANE_* variables "
        "are the server's settings and the job's attempt, never a job's secret",
        f"{tmp_path / 'bad.toml'}: secrets[1]: must be an environment variable name "
        "(letters, digits and _, not starting with a digit, at most 128)",
        f"{tmp_path / 'bad.toml'}: secrets: names a secret twice",
    ]
