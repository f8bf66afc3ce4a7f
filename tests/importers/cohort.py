"""Trial directories and import plans written into a test's tmp_path, and the fixtures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.shared_fixtures import FIXTURES, TWINS

DATAGEN = FIXTURES / "harbor" / "xdotli-harbor-datagen"
GOLDEN = (
    FIXTURES / "atif" / "harbor-framework-harbor-via-xuanZH424-evolving-skills" / "tests" / "golden"
)
#: The twin cohort (tests/fixtures/harbor/cohort): a failed trial renamed after its run.
TWIN_COHORT = TWINS / "harbor" / "cohort"
TWIN_TRIAL = "log_rotation_race/renamed_2025-12-01"
TWIN_TASK = "log_rotation_race"
#: The fixtures' trial directories (two of them renamed after the run, as real ones are).
ETL = "etl_checkpoint_resume_bug/example_runs/run_2025-11-19__14-39-23"
DRAFT = (
    "auth_token_race_condition/example_runs/successful_run_2025-11-19/draft_dp_96443054__fSr5gkt"
)
ASYNC = (
    "fix_async_worker_queue/example_runs/partial_success_2025-11-19/fix-async-worker-queue__gPApBGF"
)

DIGESTS = {
    name: str(n) * 64 for n, name in enumerate(("dataset", "verifier", "runtime", "harness"), 1)
}


def plan(trials: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {
        "plan_version": 1,
        "round": "val",
        "checkpoint": {"name": "org/model@step-100"},
        "digests": dict(DIGESTS),
        "trials": trials,
        **fields,
    }


def write_plan(tmp_path: Path, document: object, name: str = "import-plan.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


def trial_result(
    task: str = "t",
    *,
    rewards: dict[str, Any] | None = None,
    exception: str | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A Harbor TrialResult with the fields the importer reads (naive timestamps, as the
    Nov-2025 files have)."""
    return {
        "id": "592eaeb5-4a8a-4c44-a9ea-73fb152239aa",
        "task_name": task,
        "trial_name": f"{task}__abcdefg",
        "verifier_result": None if rewards is None else {"rewards": rewards},
        "exception_info": None
        if exception is None
        else {
            "exception_type": exception,
            "exception_message": "boom",
            "exception_traceback": "Traceback ...",
            "occurred_at": "2025-11-19T14:41:11.685565",
        },
        "started_at": "2025-11-19T14:39:23.715998",
        "finished_at": "2025-11-19T14:44:32.109078",
        **fields,
    }


def make_trial(
    root: Path,
    directory: str,
    result: dict[str, Any] | None = None,
    *,
    reward_txt: str | None = None,
    reward_json: object = None,
    trajectory: dict[str, Any] | None = None,
) -> Path:
    path = root / directory
    path.mkdir(parents=True, exist_ok=True)
    if result is not None:
        (path / "result.json").write_text(json.dumps(result, indent=4))
    if reward_txt is not None or reward_json is not None:
        (path / "verifier").mkdir(exist_ok=True)
    if reward_txt is not None:
        (path / "verifier" / "reward.txt").write_text(reward_txt)
    if reward_json is not None:
        (path / "verifier" / "reward.json").write_text(json.dumps(reward_json))
    if trajectory is not None:
        (path / "agent").mkdir(exist_ok=True)
        (path / "agent" / "trajectory.json").write_text(json.dumps(trajectory))
    return path


def atif(steps: list[dict[str, Any]], version: str = "ATIF-v1.6", **fields: Any) -> dict[str, Any]:
    return {
        "schema_version": version,
        "session_id": "s1",
        "agent": {"name": "terminus-2", "version": "2.0.0"},
        "steps": steps,
        **fields,
    }
