"""``tuneplane import lm-eval``: an lm-eval run's records, one snapshot per task.

Each task is an evaluation round: its population is the task's effective ``n-samples``
(which reflects ``--limit``), its task name and version come from ``results_*.json``, and
each document (``doc_id``) is one trial, attempt 0. The trial's verdict comes from one
metric under one filter — the first ``metric,filter`` the results file lists for the task,
which is the figure lm-eval reports first: exactly 0 or 1 (or false/true) is ``failure`` /
``success``, anything else is kept as the value and the trial is ``unscored``. Every
filter's metric values and the document, prompt and target hashes go beside it in an
``lm-eval/sample`` event; what a record lacks is listed there as missing, and documents
without any record are not reported (missing coverage), never failures.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from tuneplane.contract.declared import canonical_digest, recorded
from tuneplane.contract.limits import OBSERVATION_MAX_FIELDS, OBSERVATION_STRING_MAX_CHARS
from tuneplane.contract.trajectories import evaluation_text_cap, selection_rank
from tuneplane.importers.lm_eval_files import HASHES, Record, Run, Samples, read_run
from tuneplane.importers.problems import ImportRefused, Problem
from tuneplane.importers.snapshot import (
    Snapshot,
    assemble,
    check_snapshot,
    round_prefix,
)
from tuneplane.importers.text import Redactor, RedactorFailed, kept_text

SAMPLE_EVENT: Final = "lm-eval/sample"
TASK_EVENT: Final = "lm-eval/task"
#: ``progress(done, total)`` after each task read.
Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class LmEvalImport:
    """The snapshots of one lm-eval run, by task, and what was skipped on the way."""

    snapshots: dict[str, Snapshot]
    warnings: tuple[str, ...]


def trial_id(doc_id: int) -> str:
    return f"doc-{doc_id}"


def _text(value: object, limit: int = OBSERVATION_STRING_MAX_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text[:limit]


def verdict_key(results: dict[str, Any], task: str) -> tuple[str, str] | None:
    """``(metric, filter)`` of the task's first figure in the results file."""
    for key in results["results"].get(task, {}):
        metric, comma, name = key.partition(",")
        if comma and not metric.endswith("_stderr"):
            return metric, name
    return None


def _outcome(
    records: list[Record], key: tuple[str, str] | None, lower_is_better: bool
) -> tuple[str, float | None, str, str]:
    """``(status, reward, reason, reason code)`` of one document (docs/import.md)."""
    if key is None:
        why = "the results file names no metric for this task"
        return "unscored", None, why, "no_metric"
    metric, name = key
    record = next((r for r in records if r.filter == name), None)
    if record is None or metric not in record.values:
        return "unscored", None, f"no {metric} value under filter {name!r}", "no_value"
    value = record.values[metric]
    number = float(value) if isinstance(value, int | float) else None
    if number is not None and not math.isfinite(number):
        number = None
    if isinstance(value, bool) or number in (0.0, 1.0):
        if lower_is_better:
            why = f"{metric} is binary but lower is better: no verdict"
            return "unscored", number, why, "lower_is_better"
        status = "success" if float(value) == 1.0 else "failure"
        return status, float(value), f"{metric},{name} = {value}", "binary_value"
    why = f"{metric},{name} = {_text(value, 80)}: not binary"
    return "unscored", number, why, "non_binary_value"


def _sample_fields(records: list[Record], filters: list[str]) -> dict[str, Any]:
    """The ``lm-eval/sample`` event's fields: hashes, every filter's metric values, and
    what is missing (room is kept for the round ID the snapshot adds)."""
    doc_id = records[0].doc_id
    fields: dict[str, Any] = {"trial_id": trial_id(doc_id), "doc_id": doc_id}
    missing: list[str] = []
    for name in HASHES:
        found = next((r.hashes[name] for r in records if name in r.hashes), None)
        if found is None:
            missing.append(name)
        else:
            fields[name] = found
    present = {r.filter for r in records}
    missing += [f"filter {name}" for name in filters if name not in present]
    non_numbers: list[str] = []
    left_out = 0
    for record in records:
        for metric, value in record.values.items():
            key = f"{metric},{record.filter}"
            if not (isinstance(value, int | float) and math.isfinite(float(value))):
                non_numbers.append(key)
            elif len(fields) < OBSERVATION_MAX_FIELDS - 4:
                fields[key] = value
            else:
                left_out += 1
    if missing:
        fields["missing"] = _text(", ".join(missing))
    if non_numbers:  # per-document inputs of corpus metrics (often text): not kept
        fields["not_numbers"] = _text(", ".join(non_numbers))
    if left_out:
        fields["values_left_out"] = left_out
    return fields


def _requests(arguments: object) -> list[tuple[object, object]]:
    """The requests of a record: ``{"gen_args_0": {"arg_0", "arg_1"}, …}`` (0.4.x) or
    ``[[arg_0, arg_1], …]``."""
    if isinstance(arguments, dict):  # gen_args_10 after gen_args_9
        items = [arguments[key] for key in sorted(arguments, key=lambda k: (len(k), k))]
        return [
            (i.get("arg_0"), i.get("arg_1")) if isinstance(i, dict) else (i, None) for i in items
        ]
    if isinstance(arguments, list):
        return [
            (a[0], a[1] if len(a) > 1 else None) if isinstance(a, list) and a else (a, None)
            for a in arguments
        ]
    return []


def messages(record: Record) -> list[dict[str, Any]]:
    """A record as a conversation: each request's prompt (with the continuation scored,
    for log-likelihood requests) as the user's message, each of the model's responses to
    it as the assistant's (a response that is no text, e.g. ``[log-likelihood, is
    greedy]``, as its JSON)."""
    resps = record.resps if isinstance(record.resps, list) else []
    conversation: list[dict[str, Any]] = []
    for index, (prompt, extra) in enumerate(_requests(record.arguments)):
        text = prompt if isinstance(prompt, str) else json.dumps(prompt, ensure_ascii=False)
        if isinstance(extra, str):
            text += extra
        conversation.append({"role": "user", "content": text})
        answers = resps[index] if index < len(resps) else []
        for answer in answers if isinstance(answers, list) else [answers]:
            content = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
            conversation.append({"role": "assistant", "content": content})
    return conversation


def _task_config(results: dict[str, Any], task: str) -> dict[str, Any] | None:
    """The task's configuration without what lm-eval copies into it from the model's
    arguments (``metadata`` holds ``model``, ``base_url``…: the checkpoint's, not the
    protocol's), keeping the task's own version."""
    configs = results.get("configs")
    config = configs.get(task) if isinstance(configs, dict) else None
    if not isinstance(config, dict):
        return None
    copy = {k: v for k, v in config.items() if k != "metadata"}
    metadata = config.get("metadata")
    if isinstance(metadata, dict) and "version" in metadata:
        copy["metadata"] = {"version": metadata["version"]}
    return copy


def _digests(
    results: dict[str, Any], task: str, by_doc: dict[int, list[Record]], expected: int
) -> dict[str, str]:
    """The round's declared digests: those the files can attest, the rest left out
    (shown as missing). Documents, targets and the cohort need a record of every
    document of the population."""
    digests: dict[str, str] = {}
    every = len(by_doc) == expected
    documents = []
    for doc_id, records in sorted(by_doc.items()):
        hashes = {name: r.hashes[name] for r in records for name in r.hashes}
        documents.append([doc_id, hashes.get("doc_hash"), hashes.get("target_hash")])
    if every and all(d[1] and d[2] for d in documents):
        digests["dataset"] = canonical_digest({"task": task, "documents": documents})
    if every:
        digests["cohort"] = canonical_digest({"task": task, "doc_ids": sorted(by_doc)})
    config = _task_config(results, task)
    if config is not None:
        scoring = {k: config.get(k) for k in ("output_type", "metric_list", "filter_list")}
        digests["verifier"] = canonical_digest(scoring)
        digests["settings"] = canonical_digest(_protocol(results, task, config))
    return digests


def _protocol(results: dict[str, Any], task: str, config: dict[str, Any]) -> dict[str, Any]:
    """What the settings digest is taken over (the declaration records it too)."""
    run_config = _object(results, "config")
    n_shot = results.get("n-shot")
    return {
        "task": config,
        "n-shot": n_shot.get(task) if isinstance(n_shot, dict) else None,
        "gen_kwargs": run_config.get("gen_kwargs"),
        "fewshot_as_multiturn": results.get("fewshot_as_multiturn"),
        "system_instruction_sha": results.get("system_instruction_sha"),
        "chat_template_applied": results.get("chat_template") is not None,
        "lm_eval_version": results.get("lm_eval_version"),
    }


def _version(results: dict[str, Any], task: str) -> str | None:
    versions = results.get("versions")
    version = versions.get(task) if isinstance(versions, dict) else None
    if isinstance(version, bool) or not isinstance(version, int | float | str):
        return None
    return str(version)  # written as a number (3.0) by lm-eval 0.4


def checkpoint(results: dict[str, Any]) -> dict[str, str]:
    """The model evaluated: ``model_name`` (in newer files), else the ``pretrained`` or
    ``model`` of the model arguments, with their ``revision``. Nothing else of the model
    arguments is read: they may hold endpoints and keys."""
    config = _object(results, "config")
    arguments = config.get("model_args")
    if isinstance(arguments, str):
        pairs = (item.partition("=") for item in arguments.split(","))
        arguments = {key.strip(): value.strip() for key, _, value in pairs}
    arguments = arguments if isinstance(arguments, dict) else {}
    name = results.get("model_name") or arguments.get("pretrained") or arguments.get("model")
    if not isinstance(name, str) or not name:
        name = f"unknown ({config.get('model') or 'no model named in the results file'})"
    revision = arguments.get("revision")
    if isinstance(revision, str) and revision and "@" not in name:
        name = f"{name}@{revision}"
    return {"name": _text(name)}


def _object(document: dict[str, Any], key: str) -> dict[str, Any]:
    """``document[key]`` when it is an object, else an empty one (older files lack it)."""
    value = document.get(key)
    return value if isinstance(value, dict) else {}


def _filters(results: dict[str, Any], task: str, records: list[Record]) -> list[str]:
    """The task's filters: those its figures name, in order, then any other a record has."""
    names = [k.partition(",")[2] for k in results["results"].get(task, {}) if "," in k]
    names += [r.filter for r in records]
    return [n for n in dict.fromkeys(names) if n]


def _task_event(
    run: Run, task: str, samples: Samples | None, documents: int, key: tuple[str, str] | None
) -> dict[str, Any]:
    """The ``lm-eval/task`` event: the round's provenance, with what is missing named."""
    results = run.results
    counts = results["n-samples"][task]
    hashes = results.get("task_hashes")
    task_hash = hashes.get(task) if isinstance(hashes, dict) else None
    config = _object(results, "config")
    fields: dict[str, Any] = {
        "task": _text(task),
        "n_samples_effective": counts["effective"],
        "documents_with_records": documents,
    }
    optional = {
        "version": _version(results, task),
        "n_samples_original": counts.get("original"),
        "limit": config.get("limit"),
        "verdict": None if key is None else _text(",".join(key)),
        "task_hash": task_hash if isinstance(task_hash, str) else None,
        "lm_eval_version": results.get("lm_eval_version"),
        "samples_file": None if samples is None else _text(samples.file.rpartition("/")[2]),
        "samples_lines": None if samples is None else samples.lines,
        "cut_line_skipped": None if samples is None else samples.cut_line,
    }
    for name, value in optional.items():
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            fields[name] = _text(value) if isinstance(value, str) else value
    missing = [n for n in ("version", "task_hash", "samples_file") if n not in fields]
    if missing:
        fields["missing"] = ", ".join(missing)
    return {"type": "event", "name": TASK_EVENT, "fields": fields}


def _trajectories(
    by_doc: dict[int, list[Record]], cap: int, redactor: Redactor | None
) -> list[dict[str, Any]]:
    """The text of the ``cap`` documents of lowest selection rank (the ones the server
    keeps), in document order."""
    chosen = sorted(by_doc, key=lambda doc: selection_rank(trial_id(doc)))[: max(cap, 0)]
    documents = []
    for doc_id in sorted(chosen):
        fields = kept_text(messages(by_doc[doc_id][0]), redactor)
        documents.append(
            {"scope": "evaluation", "trial_id": trial_id(doc_id), "trial_attempt": 0, **fields}
        )
    return documents


def _outcomes(
    run: Run, task: str, by_doc: dict[int, list[Record]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Per document: its trial result, its ``lm-eval/sample`` event and its evidence."""
    key = verdict_key(run.results, task)
    better = run.results.get("higher_is_better")
    task_better = better.get(task) if isinstance(better, dict) else None
    lower = key is not None and isinstance(task_better, dict) and task_better.get(key[0]) is False
    filters = _filters(run.results, task, [r for rs in by_doc.values() for r in rs])
    trials, events, evidence = [], [], []
    for doc_id, records in sorted(by_doc.items()):
        status, reward, reason, code = _outcome(records, key, lower)
        result: dict[str, Any] = {
            "type": "trial",
            "trial_id": trial_id(doc_id),
            "trial_attempt": 0,
            "status": status,
            "eligible": False,  # held-out evaluation evidence, never a training decision
            "reward": reward,
            "error_type": None,
        }
        if status == "unscored":  # why it has no verdict travels with it to the server
            result.update(reason_code=code, reason=reason[:OBSERVATION_STRING_MAX_CHARS])
        trials.append(result)
        events.append(
            {"type": "event", "name": SAMPLE_EVENT, "fields": _sample_fields(records, filters)}
        )
        evidence.append(
            {
                "trial_id": trial_id(doc_id),
                "doc_id": doc_id,
                "status": status,
                "reason": reason,
                "lines": [r.line for r in records],
                "notes": [],
            }
        )
    return trials, events, evidence


def task_snapshot(
    run: Run, task: str, *, text_samples: int | None = None, redactor: Redactor | None = None
) -> Snapshot:
    """The snapshot of one task of ``run``; :class:`ImportRefused` naming what is wrong.
    ``text_samples`` is the job's ``TUNEPLANE_JOB_VAL_UPLOAD_SAMPLES`` (None: the round's
    own rule, every trial of at most 128, else 32)."""
    samples = run.samples[task]
    expected = int(run.results["n-samples"][task]["effective"])
    by_doc: dict[int, list[Record]] = {}
    for record in samples.records if samples is not None else []:
        by_doc.setdefault(record.doc_id, []).append(record)
    if samples is not None and len(by_doc) > expected:
        raise ImportRefused(
            [
                Problem(
                    samples.file,
                    "",
                    f"holds {len(by_doc)} documents, more than the {expected} of "
                    f"n-samples.{task}.effective in {run.results_file}",
                )
            ]
        )
    trials, events, evidence = _outcomes(run, task, by_doc)
    try:
        trajectories = _trajectories(by_doc, evaluation_text_cap(expected, text_samples), redactor)
    except RedactorFailed as exc:
        raise ImportRefused([Problem(samples.file if samples else task, "", str(exc))]) from exc
    population: dict[str, Any] = {
        "type": "population",
        "expected": expected,
        "digests": _digests(run.results, task, by_doc, expected),
        "task": {"name": task, **({"version": v} if (v := _version(run.results, task)) else {})},
    }
    config = _task_config(run.results, task)
    if config is not None:
        population |= recorded(_protocol(run.results, task, config), None, expected)
    if text_samples is not None:
        population["text_samples"] = text_samples
    key = verdict_key(run.results, task)
    snapshot = assemble(
        source="lm-eval",
        round_prefix=round_prefix(task, "lm-eval"),
        population=population,
        checkpoint=checkpoint(run.results),
        trials=trials,
        trajectories=trajectories,
        evidence=evidence,
        events=[_task_event(run, task, samples, len(by_doc), key), *events],
    )
    # What is written is exactly what the server takes: checked as the upload will be.
    return check_snapshot(f"{run.results_file} ({task})", snapshot.document)


def import_lm_eval(
    path: str,
    *,
    text_samples: int | None = None,
    redactor: Redactor | None = None,
    progress: Progress | None = None,
) -> LmEvalImport:
    """The snapshots of the lm-eval run at ``path`` (an output directory holding one
    ``results_*.json``, or that file), one per task; :class:`ImportRefused` naming every
    problem of every file."""
    run = read_run(path)
    snapshots: dict[str, Snapshot] = {}
    problems: list[Problem] = []
    for done, task in enumerate(run.tasks, 1):
        try:
            snapshots[task] = task_snapshot(run, task, text_samples=text_samples, redactor=redactor)
        except ImportRefused as refused:
            problems += refused.problems
        if progress is not None:
            progress(done, len(run.tasks))
    if problems:
        raise ImportRefused(problems)
    warnings = list(run.warnings)
    warnings += [
        f"{run.results_file}: {task}: no samples file"
        for task, s in run.samples.items()
        if s is None
    ]
    return LmEvalImport(snapshots, tuple(warnings))


def named_snapshots(imported: LmEvalImport) -> dict[str, Snapshot]:
    """Each task's snapshot by its file name, ``<task>.json``."""
    names = {task: f"{round_prefix(task, 'lm-eval')}.json" for task in imported.snapshots}
    if len(set(names.values())) < len(names):
        raise ImportRefused([Problem("--out", "", "two tasks' names make the same file name")])
    return {names[task]: snapshot for task, snapshot in imported.snapshots.items()}
