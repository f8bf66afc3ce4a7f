"""What ``tuneplane eval run`` records beside its round's digests, with the real Harbor
0.25.0: the settings it hashed (the TrialConfig that ran, without the checkpoint), so two
rounds whose settings digests differ name the keys that differ, and its planned trial IDs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.client.runs import PROJECT, Server
from tests.coordinator.cohort import uploaded_execution, write_plan

pytestmark = pytest.mark.harbor


def test_two_protocols_name_their_differing_settings_keys(
    harbor_python: Path, sqlite_server: Server, tmp_path: Path
) -> None:
    sides = {}
    for step, answers, deadline in ((1, {}, 300.0), (2, {"world-b": "wrong"}, 200.0)):
        base = tmp_path / f"step-{step}"
        base.mkdir()
        plan = write_plan(base, ["hello-a", "world-b"], answers, step=step, deadline=deadline)
        run = f"eval-keys-{step}-{tmp_path.name}"
        snapshot = uploaded_execution(sqlite_server, harbor_python, plan, base / "out", run)
        sides[step] = (run, snapshot["population"])
    (run_1, left), (run_2, right) = sides[1], sides[2]
    # What was hashed is recorded: the TrialConfig that ran, never the checkpoint.
    assert left["protocol"]["settings"]["trial_config"]["agent"]["kwargs"] == {"answers": {}}
    for recorded in (left, right):
        text = json.dumps(recorded["protocol"])
        assert "scripted/step-" not in text
        assert "scripted/model@" not in text
    assert left["planned_trials"] == ["hello-a-r0", "world-b-r0"]
    spec = {
        "left": f"{PROJECT}/{run_1}/{left['round_id']}",
        "right": f"{PROJECT}/{run_2}/{right['round_id']}",
    }
    matched = sqlite_server.get("/api/v1/evaluation/matched", **spec)
    keys = matched["settings_differences"]
    assert keys["compared"] is True
    assert keys["verified"] == {"left": True, "right": True}
    changed = {d["path"]: (d["change"], d["left"], d["right"]) for d in keys["differences"]}
    assert changed == {
        "settings.deadline_seconds": ("changed", "300.0", "200.0"),
        "settings.trial_config.agent.kwargs.answers": ("removed", "{}", None),
        "settings.trial_config.agent.kwargs.answers.world-b": ("added", None, '"wrong"'),
    }
    reasons = [
        c["reason"]
        for c in matched["difference"]["conditions"]
        if c["code"] == "settings_digest_mismatch"
    ]
    assert reasons == [f"settings digests differ: {', '.join(sorted(changed))}"]
    for run, population in sides.values():
        read_round = sqlite_server.get(
            f"/api/v1/projects/{PROJECT}/runs/{run}/evaluation/{population['round_id']}"
        )
        assert read_round["planned_not_reported"] == {"trial_ids": [], "reason": None}
