"""What an execution writes about itself beside Harbor's trial directories, rewritten
whole (a temporary file, then a rename) when a trial starts and after it ends, so a process
killed mid-run still leaves the evidence of the trials before it, and ``--resume`` knows
which trials are finished.

``execution.json``::

    {"format": "tuneplane-eval-execution", "version": 1, "state": "interrupted",
     "execution_id": "<32 hex digits>", "resumes": 0,
     "started_at": …, "finished_at": …, "harbor_version": "0.25.0", "python": "3.12.1",
     "deadline_seconds": 1800.0, "planned": 4, "started": 2,
     "trials": [{"trial_id": …, "task": …, "repeat": 0, "retry": 0, "directory": "trials/…",
                 "execution": "completed", "started_at": …, "finished_at": …,
                 "exception_type": null, "error_type": null, "message": null}, …]}

``trials`` holds one record per run of a trial: a trial cut short (interrupted, or running
when the process died) is run again by ``--resume`` as its next ``retry``, in a directory
of its own (``retry-<n>/<trial_id>``), and the cut-short run stays its earlier attempt.

``execution-errors.json``: ``{"errors": [{"trial_id", "task", "repeat", "retry",
"error_type", "exception_type", "message"}]}``, where ``error_type`` is one of the
coordinator's :data:`ERROR_TYPES`.
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

#: The coordinator's error types. Each is the outcome of its trial only, and the next
#: trial runs, except ``Interrupted``: a signal stops the execution (``--resume`` goes on).
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

FORMAT: Final = "tuneplane-eval-execution"
#: A trial's run: ``completed`` whatever its outcome (an agent timeout or crash, a verifier
#: error and the deadline included), ``interrupted`` by a signal, ``running`` when the
#: process died during it.
Execution = Literal["not_started", "running", "completed", "interrupted"]
#: ``complete`` once every planned trial has a completed run.
State = Literal["running", "complete", "interrupted"]
_EXECUTIONS: Final = ("not_started", "running", "completed", "interrupted")


def now() -> str:
    return datetime.now(UTC).isoformat()


def trial_directory(trial_id: str, retry: int) -> str:
    """A run's directory beneath the output directory: ``trials/<trial_id>`` for the first,
    ``retry-<n>/<trial_id>`` for a resumed one (Harbor names it after the trial)."""
    return f"trials/{trial_id}" if retry == 0 else f"retry-{retry}/{trial_id}"


class JournalUnreadable(Exception):
    """``execution.json`` is missing or is not an execution's journal; the message says why."""


@dataclass(slots=True)
class TrialRecord:
    trial_id: str
    task: str
    repeat: int
    retry: int
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
    #: Names this execution whatever its resumes: its round ID is made from it, so every
    #: snapshot of it, partial or complete, is one round.
    execution_id: str
    #: One record per run of a trial, in plan order and then by retry.
    trials: list[TrialRecord]
    state: State = "running"
    started_at: str = field(default_factory=now)
    finished_at: str | None = None
    resumes: int = 0

    @property
    def started(self) -> set[str]:
        return {t.trial_id for t in self.trials if t.execution != "not_started"}

    @property
    def planned(self) -> int:
        return len({t.trial_id for t in self.trials})

    def current(self) -> dict[str, TrialRecord]:
        """Each trial's latest run."""
        return {t.trial_id: t for t in self.trials}  # in retry order: the last one wins

    def unfinished(self) -> list[str]:
        """The trials whose latest run did not complete, in plan order."""
        return [i for i, t in self.current().items() if t.execution != "completed"]

    def next_run(self, trial_id: str) -> TrialRecord | None:
        """The run to make of ``trial_id``: None once it completed; its not-started
        record; else a new record, the next retry (a run cut short keeps its directory,
        as evidence of what happened in it)."""
        latest = self.current()[trial_id]
        if latest.execution == "completed":
            return None
        if latest.execution == "not_started" and not (self.out / latest.directory).exists():
            return latest
        if latest.execution == "not_started":  # started, but died before it was saved
            latest.execution = "running"
        retry = latest.retry + 1
        record = TrialRecord(
            trial_id, latest.task, latest.repeat, retry, trial_directory(trial_id, retry)
        )
        self.trials.insert(self.trials.index(latest) + 1, record)
        return record

    def errors(self) -> list[dict[str, Any]]:
        return [
            {
                "trial_id": t.trial_id,
                "task": t.task,
                "repeat": t.repeat,
                "retry": t.retry,
                "error_type": t.error_type,
                "exception_type": t.exception_type,
                "message": t.message,
            }
            for t in self.trials
            if t.error_type is not None
        ]

    def save(self) -> None:
        document = {
            "format": FORMAT,
            "version": 1,
            "state": self.state,
            "execution_id": self.execution_id,
            "resumes": self.resumes,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "harbor_version": self.harbor_version,
            "python": self.python,
            "deadline_seconds": self.deadline_seconds,
            "planned": self.planned,
            "started": len(self.started),
            "trials": [asdict(t) for t in self.trials],
        }
        write_json(self.out / EXECUTION_FILE, document)
        write_json(self.out / ERRORS_FILE, {"errors": self.errors()})

    @classmethod
    def load(cls, out: Path) -> Journal:
        """The journal an earlier execution saved in ``out``, or
        :class:`JournalUnreadable` saying why it cannot be continued."""
        path = out / EXECUTION_FILE
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise JournalUnreadable(f"{path} cannot be read: {exc.strerror}") from exc
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise JournalUnreadable(f"{path} is not JSON: {exc}") from exc
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise JournalUnreadable(f"{path} is not an execution's journal ({FORMAT})")
        try:
            trials = [_record(item) for item in document["trials"]]
            return cls(
                out,
                float(document["deadline_seconds"]),
                str(document["harbor_version"]),
                str(document["python"]),
                _text(document["execution_id"]),
                trials,
                "running",
                str(document["started_at"]),
                None,
                int(document.get("resumes", 0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise JournalUnreadable(f"{path} is not a journal this version reads: {exc}") from exc


def _text(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{value!r} is not a nonempty string")
    return value


def _record(item: dict[str, Any]) -> TrialRecord:
    if item["execution"] not in _EXECUTIONS:
        raise ValueError(f"unknown execution {item['execution']!r}")
    retry = int(item["retry"])
    trial_id = _text(item["trial_id"])
    if item["directory"] != trial_directory(trial_id, retry):
        raise ValueError(f"{item['directory']!r} is not the directory of {trial_id} retry {retry}")
    return TrialRecord(**{**item, "trial_id": trial_id, "retry": retry})


def write_json(path: Path, document: object) -> None:
    temporary = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(document, handle, ensure_ascii=False, indent=1, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
