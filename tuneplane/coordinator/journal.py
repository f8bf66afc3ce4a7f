"""What an execution writes about itself beside Harbor's trial directories, rewritten
whole (a temporary file, then a rename) after every trial, so a process killed mid-run
still leaves the evidence of the trials before it.

``execution.json``::

    {"format": "tuneplane-eval-execution", "version": 1, "state": "stopped",
     "started_at": …, "finished_at": …, "harbor_version": "0.25.0", "python": "3.12.1",
     "deadline_seconds": 1800.0, "planned": 4, "started": 2,
     "trials": [{"trial_id": …, "task": …, "repeat": 0, "directory": "trials/…",
                 "execution": "completed", "started_at": …, "finished_at": …,
                 "exception_type": null, "error_type": null}, …]}

``execution-errors.json``: ``{"errors": [{"trial_id", "task", "repeat", "error_type",
"exception_type", "message"}]}``, where ``error_type`` is one of the coordinator's
:data:`ERROR_TYPES`.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

EXECUTION_FILE: Final = "execution.json"
ERRORS_FILE: Final = "execution-errors.json"
IMPORT_PLAN_FILE: Final = "import-plan.json"
SNAPSHOT_FILE: Final = "snapshot.json"
PLAN_COPY_FILE: Final = "plan.json"

#: The coordinator's error types: each one stops further trials.
DEADLINE: Final = "TrialDeadlineExceeded"
TRIAL_EXCEPTION: Final = "TrialException"
HARBOR_ERROR: Final = "HarborError"
INTERRUPTED: Final = "Interrupted"
ERROR_TYPES: Final = {
    DEADLINE: "the coordinator's per-trial deadline passed: the trial was cancelled and "
    "Harbor's own cleanup waited for",
    TRIAL_EXCEPTION: "Harbor recorded an exception in the trial's result.json "
    "(exception_type names it; an agent or verifier timeout is one)",
    HARBOR_ERROR: "Harbor's API raised instead of returning a trial result",
    INTERRUPTED: "the coordinator received SIGTERM or SIGINT: the trial was cancelled and "
    "the partial evidence saved",
}

Execution = Literal["not_started", "running", "completed", "stopped", "interrupted"]
State = Literal["running", "complete", "stopped", "interrupted"]


def now() -> str:
    return datetime.now(UTC).isoformat()


@dataclass(slots=True)
class TrialRecord:
    trial_id: str
    task: str
    repeat: int
    directory: str
    execution: Execution = "not_started"
    started_at: str | None = None
    finished_at: str | None = None
    #: Harbor's ``exception_info.exception_type`` of the trial's result, when it has one.
    exception_type: str | None = None
    error_type: str | None = None
    message: str | None = None


@dataclass(slots=True)
class Journal:
    out: Path
    deadline_seconds: float
    harbor_version: str
    python: str
    trials: list[TrialRecord]
    state: State = "running"
    started_at: str = field(default_factory=now)
    finished_at: str | None = None

    @property
    def started(self) -> set[str]:
        return {t.trial_id for t in self.trials if t.execution != "not_started"}

    def errors(self) -> list[dict[str, Any]]:
        return [
            {
                "trial_id": t.trial_id,
                "task": t.task,
                "repeat": t.repeat,
                "error_type": t.error_type,
                "exception_type": t.exception_type,
                "message": t.message,
            }
            for t in self.trials
            if t.error_type is not None
        ]

    def save(self) -> None:
        document = {
            "format": "tuneplane-eval-execution",
            "version": 1,
            "state": self.state,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "harbor_version": self.harbor_version,
            "python": self.python,
            "deadline_seconds": self.deadline_seconds,
            "planned": len(self.trials),
            "started": len(self.started),
            "trials": [asdict(t) for t in self.trials],
        }
        write_json(self.out / EXECUTION_FILE, document)
        write_json(self.out / ERRORS_FILE, {"errors": self.errors()})


def write_json(path: Path, document: object) -> None:
    temporary = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(document, handle, ensure_ascii=False, indent=1, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
