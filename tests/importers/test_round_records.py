"""What an import's declaration records beside its digests, end to end: ``tuneplane import
harbor --upload`` in a real job against a real server names the planned trial that never
ran, and records the protocol settings its settings digest was taken over (redacted)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from tests.client.runs import PROJECT, Server
from tests.importers.cohort import DATAGEN, TWIN_COHORT, plan, write_plan
from tests.importers.jobs import job
from tests.importers.test_import import FIXTURE_TRIALS, TWIN_TRIALS
from tests.shared_fixtures import real_fixture
from tuneplane.contract.declared import canonical_digest
from tuneplane.importers.snapshot import read_snapshot


@pytest.mark.parametrize(
    ("root", "trials"),
    [
        pytest.param(DATAGEN, FIXTURE_TRIALS, marks=real_fixture, id="real"),
        pytest.param(TWIN_COHORT, TWIN_TRIALS, id="twin"),
    ],
)
def test_an_import_names_its_never_run_trial_and_records_its_settings(
    server: Server, tmp_path: Path, root: Path, trials: list[dict[str, Any]]
) -> None:
    settings = {"agent": "claude-code", "timeout_multiplier": 1.0, "hf_token": "secret"}
    plan_file = write_plan(tmp_path, plan(trials, settings=settings))
    out = tmp_path / "snapshot.json"
    command = ["import", "harbor", "--plan", plan_file, "--root", str(root),
               "--out", str(out), "--upload"]  # fmt: skip
    run = f"records-{tmp_path.name}"
    done = job(server, run, "$TUNEPLANE " + shlex.join(command))
    assert done.returncode == 0, done.stderr
    snapshot = read_snapshot(str(out))
    population = snapshot.document["population"]
    assert population["planned_trials"] == sorted(f"{t['task']}-r{t['repeat']}" for t in trials)
    protocol = population["protocol"]
    assert protocol["settings"] == {**settings, "hf_token": "[redacted]"}
    # The digest is taken over the settings as given; only the record is redacted.
    given = {**protocol, "settings": settings}
    assert population["digests"]["settings"] == canonical_digest(given)
    read = server.get(f"/api/v1/projects/{PROJECT}/runs/{run}/evaluation/{snapshot.round_id}")
    assert read["planned_not_reported"] == {"trial_ids": ["never_ran-r0"], "reason": None}
    (stored,) = server.get(f"/api/v1/projects/{PROJECT}/runs/{run}/observations", type="population")
    assert stored["protocol"] == protocol
    assert "secret" not in str(stored)
