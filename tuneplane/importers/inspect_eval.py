"""``tuneplane import inspect``: Inspect AI logs, one evaluation round per log.

Each sample of a log is a trial and each epoch a repeat: trial ``<sample>-r<epoch - 1>``.
Its verdict comes from the task's first scorer, and only when that score is binary
(:func:`verdict`); anything else is kept unscored with why. A sample that errored is an
``infra_error`` with its message, and each error Inspect retried (``retry_on_error``) is an
earlier attempt of the trial. The population is the samples Inspect planned times the
epochs, so samples a stopped evaluation never reached are missing coverage, never
failures. The task's name, version, dataset, plan (solvers) and scorers are the round's
protocol evidence (:mod:`tuneplane.importers.inspect_protocol`), never the model, which is
the checkpoint's name, so two models evaluated under one protocol compare.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from tuneplane.contract.declared import recorded
from tuneplane.contract.ids import derived_trial_id, id_characters, id_problem
from tuneplane.contract.limits import ID_MAX_CHARS, OBSERVATION_STRING_MAX_CHARS
from tuneplane.contract.trajectories import evaluation_text_cap, selection_rank
from tuneplane.importers.inspect_files import LogFile, find_logs, read_log
from tuneplane.importers.inspect_protocol import digests, protocol, sample_event, task_event
from tuneplane.importers.inspect_text import messages, value_text
from tuneplane.importers.problems import ImportRefused, Problem
from tuneplane.importers.snapshot import (
    Snapshot,
    assemble,
    check_snapshot,
    round_prefix,
)
from tuneplane.importers.text import Redactor, RedactorFailed, kept_text

#: ``progress(done, total)`` after each log read.
Progress = Callable[[int, int], None]
#: A sample ID keeps this many characters in a trial ID (room for ``-r<epoch>``).
_SAMPLE_KEY_MAX: Final = ID_MAX_CHARS - 12
_ERROR_TYPE: Final = re.compile(r"([A-Za-z_][A-Za-z0-9_.]*)\(")


@dataclass(frozen=True, slots=True)
class InspectImport:
    """The snapshots of the logs read, by file name, and what was said on the way."""

    snapshots: dict[str, Snapshot]
    warnings: tuple[str, ...]


def sample_key(sample_id: object) -> str:
    """A sample's ID as the start of a trial ID: itself when it is one, else its ID
    characters and 8 hex digits of its SHA-256 (two IDs that differ only there stay two)."""
    text = str(sample_id)
    if id_problem(text) is None and len(text) <= _SAMPLE_KEY_MAX:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    base = id_characters(text).strip("-")[: _SAMPLE_KEY_MAX - 9].strip("-")
    return f"{base or 'sample'}-{digest}"


def trial_id(sample_id: object, epoch: int) -> str:
    """The trial of a sample's epoch: the sample is the task, the epoch its repeat."""
    return derived_trial_id(sample_key(sample_id), epoch - 1)


def _binary(value: object) -> bool | None:
    """True / False for a binary score (docs/import.md), None for anything else."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return value == 1
    if isinstance(value, str):
        if value == "C" or value.lower() == "correct":
            return True
        if value == "I" or value.lower() == "incorrect":
            return False
    return None


def verdict(
    scorer: str | None, scores: dict[str, Any] | None
) -> tuple[str, float | None, str, str]:
    """``(status, reward, reason, reason code)`` of a sample from its scorer's value."""
    if scorer is None:
        return "unscored", None, "the task has no scorer", "no_scorer"
    score = (scores or {}).get(scorer)
    if score is None:
        return "unscored", None, f"no {scorer} score", "no_score"
    value = score.value
    passed = _binary(value)
    shown = value_text(value, 80)
    if passed is not None:
        return ("success" if passed else "failure"), float(passed), f"{scorer} = {shown}", ""
    number = float(value) if isinstance(value, int | float) else None
    reward = number if number is not None and math.isfinite(number) else None
    return "unscored", reward, f"{scorer} = {shown}: not binary", "non_binary_score"


def _error(error: Any) -> tuple[str, str]:
    """``(error_type, message)`` of an Inspect ``EvalError`` (its message is the
    exception's repr, ``RuntimeError('…')``)."""
    message = str(error.message or "the sample failed")
    found = _ERROR_TYPE.match(message)
    return (found[1] if found else "SampleError"), message[:OBSERVATION_STRING_MAX_CHARS]


def _result(
    tid: str, attempt: int, status: str, reward: float | None, why: tuple[str, str, str | None]
) -> dict[str, Any]:
    reason, code, error_type = why
    result: dict[str, Any] = {
        "type": "trial",
        "trial_id": tid,
        "trial_attempt": attempt,
        "status": status,
        "eligible": False,  # held-out evaluation evidence, never a training decision
        "reward": reward,
        "error_type": error_type,
    }
    if status in ("unscored", "infra_error"):  # why it has no verdict travels with it
        result["reason_code"] = code
        result["reason"] = reason[:OBSERVATION_STRING_MAX_CHARS]
    return result


def _attempts(sample: Any, scorer: str | None) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The trial's attempts (each error Inspect retried, then the sample as logged), each
    with its evidence."""
    tid = trial_id(sample.id, sample.epoch)
    base = {"trial_id": tid, "sample_id": str(sample.id), "epoch": sample.epoch}
    attempts = []
    for retry, error in enumerate(sample.error_retries or []):
        error_type, message = _error(error)
        result = _result(tid, retry, "infra_error", None, (message, "sample_error", error_type))
        attempts.append(
            (
                result,
                {**base, "retry": retry, "status": "infra_error", "reason": message, "notes": []},
            )
        )
    retry = len(attempts)
    why: tuple[str, str, str | None]
    if sample.error is not None:
        error_type, message = _error(sample.error)
        status, reward, why = "infra_error", None, (message, "sample_error", error_type)
    elif sample.invalidation is not None:
        status, reward = "unscored", None
        why = ("the sample's result was invalidated in Inspect", "invalidated", None)
    else:
        status, reward, reason, code = verdict(scorer, sample.scores)
        why = (reason, code, None)
    evidence = {
        **base,
        "retry": retry,
        "status": status,
        "reason": why[0],
        "scores": {k: value_text(s.value, 200) for k, s in (sample.scores or {}).items()},
        "notes": [] if sample.limit is None else [f"hit its {sample.limit.type} limit"],
        "limit": None if sample.limit is None else f"{sample.limit.type} {sample.limit.limit}",
        "total_time": sample.total_time,
        "working_time": sample.working_time,
    }
    attempts.append((_result(tid, retry, status, reward, why), evidence))
    return attempts


def _planned(log: Any) -> list[str] | None:
    """The planned trial IDs (every sample Inspect was to run, times the epochs), when the
    log names the samples."""
    ids = log.eval.dataset.sample_ids
    if ids is None:
        return None
    epochs = log.eval.config.epochs or 1
    return [trial_id(sample, epoch) for sample in ids for epoch in range(1, epochs + 1)]


def _trajectories(
    finals: dict[str, tuple[Any, int]], cap: int, redactor: Redactor | None
) -> list[dict[str, Any]]:
    """The text of the ``cap`` trials of lowest selection rank (the ones the server keeps),
    each its last attempt's conversation, in trial order."""
    chosen = sorted(finals, key=selection_rank)[: max(cap, 0)]
    documents = []
    for tid in sorted(chosen):
        sample, attempt = finals[tid]
        fields = kept_text(messages(sample), redactor)
        documents.append(
            {"scope": "evaluation", "trial_id": tid, "trial_attempt": attempt, **fields}
        )
    return documents


def _expected(file: LogFile, planned: list[str] | None, warnings: list[str]) -> int:
    if planned is not None:
        return len(planned)
    results = file.log.results
    if results is not None and results.total_samples:
        return int(results.total_samples)
    warnings.append(f"{file.path}: names no planned samples: the population is the samples in it")
    return len(file.log.samples or [])


def _cohort_problems(file: LogFile, planned: list[str] | None, seen: list[str]) -> list[Problem]:
    problems = []
    doubles = sorted(t for t, n in Counter(seen).items() if n > 1)
    if doubles:
        problems.append(Problem(file.path, "samples", f"two samples make trial {doubles[0]!r}"))
    if planned is not None:
        strangers = sorted(set(seen) - set(planned))
        if strangers:
            problems.append(
                Problem(
                    file.path,
                    "samples",
                    f"{len(strangers)} samples the evaluation did not plan, e.g. {strangers[0]!r}",
                )
            )
    return problems


def log_snapshot(
    file: LogFile, *, text_samples: int | None = None, redactor: Redactor | None = None
) -> tuple[Snapshot, list[str]]:
    """The snapshot of one log and its warnings; :class:`ImportRefused` naming what is
    wrong. ``text_samples`` is the job's ``TUNEPLANE_JOB_VAL_UPLOAD_SAMPLES`` (None: every
    trial of a round of at most 128, else 32)."""
    log, warnings = file.log, []
    if log.status != "success":
        warnings.append(
            f"{file.path}: the evaluation's status is {log.status!r}: the trials it did not "
            "report are shown as not reported"
        )
    spec = log.eval
    scorer = spec.scorers[0].name if spec.scorers else None
    planned = _planned(log)
    samples = sorted(log.samples or [], key=lambda s: trial_id(s.id, s.epoch))
    seen = [trial_id(s.id, s.epoch) for s in samples]
    problems = _cohort_problems(file, planned, seen)
    expected = _expected(file, planned, warnings)
    if problems:
        raise ImportRefused(problems)
    trials, evidence, finals = [], [], {}
    for sample in samples:
        attempts = _attempts(sample, scorer)
        trials += [result for result, _ in attempts]
        evidence += [note for _, note in attempts]
        finals[attempts[-1][0]["trial_id"]] = (sample, attempts[-1][0]["trial_attempt"])
    try:
        cap = evaluation_text_cap(expected, text_samples)
        trajectories = _trajectories(finals, cap, redactor)
    except RedactorFailed as exc:
        raise ImportRefused([Problem(file.path, "", str(exc))]) from exc
    protocol_ = protocol(log)
    population: dict[str, Any] = {
        "type": "population",
        "expected": expected,
        "digests": digests(log, planned, protocol_),
        "task": {"name": value_text(spec.task), "version": value_text(spec.task_version)},
        **recorded(protocol_, planned, expected),
    }
    if text_samples is not None:
        population["text_samples"] = text_samples
    snapshot = assemble(
        source="inspect",
        round_prefix=round_prefix(spec.task, "inspect"),
        population=population,
        checkpoint={"name": value_text(spec.model)},
        trials=trials,
        trajectories=trajectories,
        evidence=evidence,
        events=[
            task_event(file, protocol_, scorer, len(samples), expected),
            *(sample_event(sample, tid) for tid, (sample, _) in finals.items()),
        ],
    )
    # What is written is exactly what the server takes: checked as the upload will be.
    return check_snapshot(file.path, snapshot.document), warnings


def snapshot_name(path: str) -> str:
    """The snapshot file of a log: ``inspect-<its name in ID characters>.json``, a name
    Inspect never lists as a log (its ``.json`` logs' names start with their time)."""
    stem = path.rpartition("/")[2].rpartition(".")[0]
    return f"inspect-{id_characters(stem)}.json"


def import_inspect(
    path: str,
    *,
    text_samples: int | None = None,
    redactor: Redactor | None = None,
    progress: Progress | None = None,
) -> InspectImport:
    """The snapshots of the Inspect logs at ``path`` (a log file, or a directory Inspect
    lists logs in), one per log; :class:`ImportRefused` naming every problem of every log."""
    files = find_logs(path)
    snapshots: dict[str, Snapshot] = {}
    problems: list[Problem] = []
    warnings: list[str] = []
    for done, name in enumerate(files, 1):
        try:
            snapshot, said = log_snapshot(
                read_log(name), text_samples=text_samples, redactor=redactor
            )
        except ImportRefused as refused:
            problems += refused.problems
        else:
            warnings += said
            if snapshot_name(name) in snapshots:
                problems.append(
                    Problem(name, "", "another log's name makes the same snapshot name")
                )
            snapshots[snapshot_name(name)] = snapshot
        if progress is not None:
            progress(done, len(files))
    if problems:
        raise ImportRefused(problems)
    return InspectImport(snapshots, tuple(warnings))
