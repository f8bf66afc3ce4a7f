"""Reading an lm-eval output directory: one ``results_<time>.json`` and the
``samples_<task>_<time>.jsonl`` files written beside it by the same run
(``lm_eval --output_path DIR --log_samples``).

lm-eval writes one sample record per (filter, document): a task with two filters repeats
each ``doc_id``, so a record's key is ``(doc_id, filter)``. A samples file has no task
name or version: the task comes from the file's name, its version and population from the
results file. A samples file whose last line was cut short (the writer stopped, or a copy
did) keeps its complete lines: the cut line is skipped with a warning and the document it
held shows as not reported. Any other line that is not a record is a problem.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from tuneplane.contract.limits import (
    IMPORT_LM_EVAL_RESULTS_MAX_BYTES,
    IMPORT_LM_EVAL_SAMPLE_LINE_MAX_BYTES,
)
from tuneplane.importers.bounded import FileTooLarge, bounded_lines, read_bounded
from tuneplane.importers.problems import ImportRefused, Problem

RESULTS_PREFIX: Final = "results_"
_SHA256: Final = re.compile(r"[0-9a-f]{64}")
#: The protocol evidence each record carries (files of older lm-eval versions lack it).
HASHES: Final = ("doc_hash", "prompt_hash", "target_hash")
#: Record keys that are no metric value.
_RECORD_KEYS: Final = frozenset(
    {"doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter", "metrics"}
    | set(HASHES)
)


@dataclass(frozen=True, slots=True)
class Record:
    """One sample line: a document's record under one filter."""

    line: int
    doc_id: int
    filter: str
    values: dict[str, Any]
    hashes: dict[str, str]
    arguments: object
    resps: object


@dataclass(slots=True)
class Samples:
    """A task's samples file, read: its records in file order."""

    file: str
    records: list[Record] = field(default_factory=list)
    lines: int = 0
    cut_line: int | None = None


@dataclass(frozen=True, slots=True)
class Run:
    """One lm-eval run: its results file, parsed, and each leaf task's samples (None when
    the task has no samples file: lm_eval ran without ``--log_samples``)."""

    results_file: str
    results: dict[str, Any]
    tasks: tuple[str, ...]
    samples: dict[str, Samples | None]
    warnings: tuple[str, ...]


def _results_file(path: Path) -> Path:
    """The one results file ``path`` is or holds (lm_eval puts it in a subdirectory named
    after the model, so one level down is looked at too)."""
    if path.is_file():
        return path
    if not path.is_dir():
        raise ImportRefused([Problem(str(path), "", "does not exist")])
    found = sorted(path.glob(f"{RESULTS_PREFIX}*.json")) or sorted(
        path.glob(f"*/{RESULTS_PREFIX}*.json")
    )
    if not found:
        raise ImportRefused(
            [Problem(str(path), "", f"holds no {RESULTS_PREFIX}*.json (nor do its subdirectories)")]
        )
    if len(found) > 1:
        names = ", ".join(str(p.relative_to(path)) for p in found[:4])
        raise ImportRefused(
            [
                Problem(
                    str(path),
                    "",
                    f"holds {len(found)} results files ({names}…): one lm_eval run at a "
                    "time, so name the results file to import instead of the directory",
                )
            ]
        )
    return found[0]


def _load_results(file: Path) -> dict[str, Any]:
    try:
        data = read_bounded(file, IMPORT_LM_EVAL_RESULTS_MAX_BYTES, "an lm-eval results file")
        document = json.loads(data)
    except OSError as exc:
        raise ImportRefused([Problem(str(file), "", f"cannot be read: {exc.strerror}")]) from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ImportRefused([Problem(str(file), "", f"is not JSON: {exc}")]) from exc
    problems = []
    if not isinstance(document, dict):
        problems.append(Problem(str(file), "", "must be an lm-eval results object"))
    else:
        for key in ("results", "n-samples"):
            if not isinstance(document.get(key), dict):
                problems.append(
                    Problem(str(file), key, "required: an object by task (written by lm-eval 0.4)")
                )
    if problems:
        raise ImportRefused(problems)
    return document  # type: ignore[no-any-return]


def leaf_tasks(file: str, results: dict[str, Any]) -> tuple[list[str], list[Problem]]:
    """The tasks that have documents (groups only aggregate their subtasks), each with
    its effective population checked."""
    groups = results.get("group_subtasks")
    grouping = {k for k, v in groups.items() if v} if isinstance(groups, dict) else set()
    tasks = [task for task in results["results"] if task not in grouping]
    problems: list[Problem] = []
    for task in tasks:
        counts = results["n-samples"].get(task)
        effective = counts.get("effective") if isinstance(counts, dict) else None
        if not isinstance(effective, int) or isinstance(effective, bool) or effective < 0:
            problems.append(
                Problem(
                    file,
                    f"n-samples.{task}.effective",
                    "required: the nonnegative number of documents evaluated (the "
                    "population, after any --limit)",
                )
            )
    return tasks, problems


def _hashes(where: Problem, raw: dict[str, Any], problems: list[Problem]) -> dict[str, str]:
    found: dict[str, str] = {}
    for name in HASHES:
        value = raw.get(name)
        if value is None:
            continue
        if isinstance(value, str) and _SHA256.fullmatch(value):
            found[name] = value
        else:
            problems.append(Problem(where.file, f"{where.field}.{name}", "must be a SHA-256"))
    return found


def _record(file: str, line: int, raw: object, problems: list[Problem]) -> Record | None:
    where = Problem(file, f"line {line}", "")
    if not isinstance(raw, dict):
        problems.append(Problem(file, where.field, "must be a JSON object (a sample record)"))
        return None
    doc_id = raw.get("doc_id")
    if not isinstance(doc_id, int) or isinstance(doc_id, bool) or doc_id < 0:
        problems.append(Problem(file, f"{where.field}.doc_id", "required: a nonnegative integer"))
        return None
    name = raw.get("filter", "none")
    if not isinstance(name, str) or not name:
        problems.append(Problem(file, f"{where.field}.filter", "must be the filter's name"))
        return None
    metrics = raw.get("metrics")
    if isinstance(metrics, list) and all(isinstance(m, str) for m in metrics):
        values = {m: raw[m] for m in metrics if m in raw}
    else:  # records written before the list existed: every other key is a metric
        values = {k: v for k, v in raw.items() if k not in _RECORD_KEYS}
    hashes = _hashes(where, raw, problems)
    return Record(line, doc_id, name, values, hashes, raw.get("arguments"), raw.get("resps"))


def read_samples(file: Path, warnings: list[str], problems: list[Problem]) -> Samples:
    """The records of one samples file, read a line at a time; a last line cut short is
    skipped (a warning), a line over its limit is a problem that ends the reading."""
    samples = Samples(str(file))
    try:
        _read_lines(file, samples, warnings, problems)
    except FileTooLarge as exc:
        problems.append(exc.problem)
    except OSError as exc:
        problems.append(Problem(str(file), "", f"cannot be read: {exc.strerror}"))
    return samples


def _read_lines(file: Path, samples: Samples, warnings: list[str], problems: list[Problem]) -> None:
    seen: dict[tuple[int, str], int] = {}
    lines = bounded_lines(file, IMPORT_LM_EVAL_SAMPLE_LINE_MAX_BYTES, "an lm-eval samples line")
    for number, text, ended in lines:
        samples.lines = number
        if not text.strip():
            continue
        try:
            raw = json.loads(text)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            if not ended:
                samples.cut_line = number
                warnings.append(
                    f"{file}: line {number}: cut short (no end of line, not a whole record): "
                    "skipped; the document it held is shown as not reported"
                )
            else:
                problems.append(Problem(str(file), f"line {number}", f"is not JSON: {exc}"))
            continue
        record = _record(str(file), number, raw, problems)
        if record is None:
            continue
        key = (record.doc_id, record.filter)
        if key in seen:
            problems.append(
                Problem(
                    str(file),
                    f"line {number}",
                    f"doc_id {record.doc_id} under filter {record.filter!r} again (first on "
                    f"line {seen[key]}): one record per document and filter",
                )
            )
            continue
        seen[key] = number
        samples.records.append(record)


def read_run(path: str) -> Run:
    """The run at ``path`` (an output directory, or its results file), every file read
    and checked; :class:`ImportRefused` naming every problem."""
    file = _results_file(Path(path))
    results = _load_results(file)
    tasks, problems = leaf_tasks(str(file), results)
    stamp = file.name.removeprefix(RESULTS_PREFIX).removesuffix(".json")
    warnings: list[str] = []
    samples: dict[str, Samples | None] = {}
    for task in tasks:
        found = file.parent / f"samples_{task}_{stamp}.jsonl"
        samples[task] = read_samples(found, warnings, problems) if found.is_file() else None
    if problems:
        raise ImportRefused(problems)
    return Run(str(file), results, tuple(tasks), samples, tuple(warnings))
