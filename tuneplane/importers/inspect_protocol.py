"""An Inspect AI log's protocol evidence: what the round's digests are taken over, and the
events sent beside its outcomes.

The settings digest is taken over the protocol (:func:`protocol`): the task and its
arguments, dataset, plan, scorers, limits and Inspect's version, never the model, which is
the checkpoint's name. The ``inspect/task`` event carries the task's description and a digest
of each part of the protocol, so two rounds whose settings digests differ say which part;
an ``inspect/sample`` event per trial carries every scorer's value, as Inspect's log viewer
shows them beside the verdict.
"""

from __future__ import annotations

import math
from typing import Any, Final

from tuneplane.contract.declared import canonical_digest
from tuneplane.importers.inspect_files import LogFile
from tuneplane.importers.inspect_text import value_text

TASK_EVENT: Final = "inspect/task"
SAMPLE_EVENT: Final = "inspect/sample"
#: A text score value kept in the sample event (``"C"``, ``"P"``…); a longer one is often
#: the model's own words, and is only named.
_SCORE_TEXT_MAX_CHARS: Final = 32
#: Characters of each descriptive field of the task event: its 30 fields stay well within
#: an observation's 16 KiB.
_EVENT_TEXT_MAX_CHARS: Final = 256
#: EvalConfig keys that say how a run was displayed, logged, parallelized or cleaned up, or
#: when it stops: not how a sample is evaluated, so left out of the protocol.
_RUN_ONLY: Final = frozenset(
    {
        "sandbox_cleanup",
        "sandbox_prebuilt",
        "score_display",
        "fail_on_error",
        "continue_on_fail",
        "debug_errors",
        "notification",
        "sentinel",
        "acp_server",
        "trace",
    }
)


def _dump(model: Any) -> Any:
    return None if model is None else model.model_dump(mode="json", exclude_none=True)


def protocol(log: Any) -> dict[str, Any]:
    """What the settings digest is taken over: the task, its arguments, dataset, plan
    (solvers and generation settings), scorers and limits, and Inspect's version. Left out:
    the model, its arguments and base URL (the checkpoint's), the run's IDs and times,
    and settings of display, logging, concurrency and cleanup (:data:`_RUN_ONLY`)."""
    spec = log.eval
    config = _dump(spec.config) or {}
    dataset = _dump(spec.dataset) or {}
    roles = {
        role: [[m.model, _dump(m.config)] for m in (ms if isinstance(ms, list) else [ms])]
        for role, ms in (spec.model_roles or {}).items()
    }
    return {
        "task": spec.task,
        "task_version": spec.task_version,
        "task_args": spec.task_args,
        "solver": spec.solver,
        "solver_args": spec.solver_args,
        "dataset": {k: v for k, v in dataset.items() if k != "location"},
        "plan": _dump(log.plan),
        "scorers": [_dump(s) for s in spec.scorers or []],
        "config": {
            k: v
            for k, v in config.items()
            if not k.startswith(("log_", "max_")) and k not in _RUN_ONLY
        },
        "generate_config": _dump(spec.model_generate_config),
        "model_roles": roles,
        "sandbox": _dump(spec.sandbox),
        "inspect_ai": (spec.packages or {}).get("inspect_ai"),
    }


def _input_text(value: Any) -> object:
    return value if isinstance(value, str) else [[m.role, m.text] for m in value]


def digests(log: Any, planned: list[str] | None, protocol_: dict[str, Any]) -> dict[str, str]:
    """The round's digests that the log can attest; the rest left out (shown missing)."""
    found = {
        "settings": canonical_digest(protocol_),
        "verifier": canonical_digest(protocol_["scorers"]),
    }
    if planned is None:
        return found
    found["cohort"] = canonical_digest({"task": log.eval.task, "trials": sorted(planned)})
    samples = {str(s.id): s for s in log.samples or []}
    wanted = [str(i) for i in log.eval.dataset.sample_ids]
    if all(i in samples for i in wanted):
        rows = [[i, _input_text(samples[i].input), samples[i].target] for i in sorted(wanted)]
        found["dataset"] = canonical_digest({"task": log.eval.task, "samples": rows})
    return found


def task_event(
    file: LogFile, protocol_: dict[str, Any], scorer: str | None, reported: int, expected: int
) -> dict[str, Any]:
    """The ``inspect/task`` event: the round's protocol evidence, with a digest of each
    part of the protocol, so two rounds whose settings digests differ say which part."""
    spec, log = file.log.eval, file.log
    steps = [step.solver for step in (log.plan.steps if log.plan else [])]
    optional: dict[str, object] = {
        "version": spec.task_version,
        "inspect_ai": protocol_["inspect_ai"],
        "dataset": spec.dataset.name,
        "dataset_location": spec.dataset.location,
        "dataset_samples": spec.dataset.samples,
        "solver": ", ".join(steps) or spec.solver,
        "scorers": ", ".join(s.name for s in spec.scorers or []),
        "verdict": scorer,
        "revision": spec.revision.commit if spec.revision else None,
    }
    fields: dict[str, Any] = {
        "task": value_text(spec.task),
        "log": value_text(file.path.rpartition("/")[2]),
        "status": value_text(log.status),
        "epochs": spec.config.epochs or 1,
        "trials_planned": expected,
        "trials_reported": reported,
    }
    for name, value in optional.items():
        if isinstance(value, int) and not isinstance(value, bool):
            fields[name] = value
        elif value is not None and value != "":
            fields[name] = value_text(value, _EVENT_TEXT_MAX_CHARS)
    for part, value in protocol_.items():
        fields[f"settings.{part}"] = canonical_digest(value)[:16]
    return {"type": "event", "name": TASK_EVENT, "fields": fields}


def _kept(value: object) -> bool:
    if isinstance(value, bool | int | float):
        return math.isfinite(float(value))
    return isinstance(value, str) and len(value) <= _SCORE_TEXT_MAX_CHARS


def sample_event(sample: Any, tid: str) -> dict[str, Any]:
    """The ``inspect/sample`` event of a trial: every scorer's value (numbers, booleans and
    short codes; longer text is named in ``not_kept``), the limit it hit, its times and
    the tokens its models used."""
    fields: dict[str, Any] = {"trial_id": tid, "sample_id": value_text(sample.id, 256)}
    fields["epoch"] = sample.epoch
    not_kept: list[str] = []
    for name, score in list((sample.scores or {}).items())[:16]:
        if _kept(score.value):
            fields[f"score.{name}"[:128]] = score.value
        else:
            not_kept.append(name)
    if not_kept:
        fields["not_kept"] = value_text(", ".join(not_kept), _EVENT_TEXT_MAX_CHARS)
    if sample.limit is not None:
        fields["limit"] = value_text(f"{sample.limit.type} {sample.limit.limit}", 256)
    for name in ("total_time", "working_time"):
        if getattr(sample, name) is not None:
            fields[name] = getattr(sample, name)
    usage = list((sample.model_usage or {}).values())
    if usage:
        fields["input_tokens"] = sum(u.input_tokens for u in usage)
        fields["output_tokens"] = sum(u.output_tokens for u in usage)
    return {"type": "event", "name": SAMPLE_EVENT, "fields": fields}
