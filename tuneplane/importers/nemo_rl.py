"""``tuneplane import nemo-rl``: NeMo-RL 0.7 step files as training rollouts and
validation rounds (the files: :mod:`tuneplane.importers.nemo_rl_files`).

Training (``train_data_step{N}.jsonl``): a step's rollouts are put in three categories —
``invalid_reward`` (no reward in the file, or NaN, infinite or null), ``low_reward`` (a
finite reward at or below the step's lower quartile and below the step's best reward: the
finite rewards sorted, the one at position ``floor((n - 1) / 4)``; so a step whose rewards
are all equal has none) and ``representative`` (the rest). At most 32 are kept
(``ROLLOUT_SAMPLES_PER_STEP``), taken in turn from each category: the lowest rewards first
among low ones, and among the others an order fixed by a hash of step and ``idx`` (a
uniform sample that every import repeats). No rollout is ever a ``failure``: NeMo-RL's logs
classify none. Policy versions are left unknown: the file's step is when a rollout was
logged, which does not prove which policy generated it (asynchronous GRPO).

The training file holds each message's text without its role, so roles are not known: the
last text is labelled ``assistant`` (a NeMo-RL rollout ends with the policy's generation)
and every earlier one ``user``. A text that is not a string (multimodal content) is kept as
its JSON. Each text is cut at 64 Ki characters (saying so inside it) and a conversation at
1,024 messages or about 1 MiB; a cut rollout is declared ``complete: false``.

Validation (``val_data_step{N}.jsonl``) is an evaluation, not training: each file is one
evaluation round (``nemo-rl-val-step{N}``) whose population is the file's samples, one
trial per ``idx``, every trial ``unscored`` with its reward kept as the value (the file says
what the environment paid, not whether an answer failed). The round declares that it gives
no verdicts (``verdicts: false``), so the server shows its reward coverage and mean
reward and withholds the success rate and scoring coverage with their reason, never 0%;
each trial says why it is unscored (``reward_only``, or ``no_reward`` for a NaN or null).
Its messages keep their roles; a role outside the contract's (NeMo-RL's ``environment``) is
sent as ``tool`` with that name.
Text is kept for every trial of up to 128, else 32 (``TUNEPLANE_JOB_VAL_UPLOAD_SAMPLES``
overrides).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from tuneplane.contract.limits import ROLLOUT_SAMPLES_PER_STEP, TRAJECTORY_MAX_BYTES
from tuneplane.contract.trajectories import (
    ROLES,
    Category,
    evaluation_text_cap,
    selection_rank,
    stratified,
    truncate,
)
from tuneplane.importers.nemo_rl_files import (
    Sample,
    Scan,
    StepFile,
    log_directory,
    records,
    scan,
    step_files,
)
from tuneplane.importers.problems import ImportRefused, Problem
from tuneplane.importers.rollout_snapshot import (
    assemble_rollouts,
    check_rollouts,
)
from tuneplane.importers.snapshot import Snapshot, assemble, check_snapshot, write_snapshot
from tuneplane.importers.text import cap_text

SOURCE: Final = "nemo-rl"
#: Categories of a training step, in the order their counts are written.
STEP_CATEGORIES: Final[tuple[Category, ...]] = ("low_reward", "invalid_reward", "representative")
#: ``progress(done, total)`` after each step file read.
Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class NemoRlImport:
    """The snapshots of a NeMo-RL log directory: a rollout snapshot per training step, an
    evaluation snapshot per validation step, and what was skipped."""

    directory: str
    rollouts: tuple[Snapshot, ...]
    rounds: tuple[Snapshot, ...]
    warnings: tuple[str, ...]


def trajectory_id(idx: int) -> str:
    return f"idx-{idx}"


def low_reward_threshold(rewards: Sequence[float]) -> float | None:
    """The step's lower quartile, or None when no reward is low (none, or all equal)."""
    if not rewards or min(rewards) == max(rewards):
        return None
    ordered = sorted(rewards)
    return ordered[(len(ordered) - 1) // 4]


def _rank(step: int, idx: int) -> bytes:
    return hashlib.sha256(f"{step}/{idx}".encode()).digest()


def categories(samples: Sequence[Sample], step: int) -> dict[Category, list[Sample]]:
    """The samples by category, each in the order it is kept (see the module's docstring)."""
    finite = [s.reward for s in samples if s.reward is not None]
    threshold = low_reward_threshold(finite)
    best = max(finite, default=None)
    by: dict[Category, list[Sample]] = {name: [] for name in STEP_CATEGORIES}
    for sample in samples:
        if sample.reward is None:
            by["invalid_reward"].append(sample)
        elif threshold is not None and sample.reward <= threshold and sample.reward != best:
            by["low_reward"].append(sample)
        else:
            by["representative"].append(sample)
    for name, kept in by.items():
        key: Callable[[Sample], Any] = lambda s: _rank(step, s.idx)  # noqa: E731
        if name == "low_reward":
            key = lambda s: (s.reward, _rank(step, s.idx))  # noqa: E731
        kept.sort(key=key)
    return by


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def train_messages(content: list[Any]) -> list[dict[str, Any]]:
    """Role-less texts as messages: the last the assistant's, the earlier ones the user's."""
    last = len(content) - 1
    return [
        {"role": "assistant" if index == last else "user", "content": _text(text)}
        for index, text in enumerate(content)
    ]


def val_messages(file: StepFile, number: int, content: list[Any]) -> list[dict[str, Any]]:
    """Messages with roles; :class:`ImportRefused` for one that has no role."""
    messages: list[dict[str, Any]] = []
    for index, message in enumerate(content):
        role = message.get("role") if isinstance(message, dict) else None
        if not isinstance(role, str) or not role:
            raise ImportRefused(
                [
                    Problem(
                        file.path,
                        f"line {number}.content[0][{index}].role",
                        "required: a validation message is {role, content}",
                    )
                ]
            )
        assert isinstance(message, dict)
        text = _text(message.get("content", ""))
        if role in ROLES:
            messages.append({"role": role, "content": text})
        else:
            messages.append({"role": "tool", "tool_name": role[:1024], "content": text})
    return messages


def bounded(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The trajectory fields for ``messages``: each text capped, the conversation cut to
    the contract's limits (room left for the identity fields), the cut declared."""
    capped = [{**m, "content": cap_text(m["content"])} for m in messages]
    cut = any(len(c["content"]) != len(m["content"]) for c, m in zip(capped, messages, strict=True))
    kept, total, whole = truncate(capped, max_bytes=TRAJECTORY_MAX_BYTES - 8192)
    return {"messages": kept, "total_messages": total, "complete": whole and not cut}


def _rollout(step: int, sample: Sample, category: Category, item: dict[str, Any]) -> dict[str, Any]:
    document: dict[str, Any] = {
        "scope": "training",
        "step": step,
        "trajectory_id": trajectory_id(sample.idx),
    }
    if category != "invalid_reward":
        document["diagnostic"] = category
        document["reward"] = sample.reward
    elif sample.invalid:
        document["reward_invalid"] = True
    return {
        **document,
        **bounded(train_messages(item["content"][0])),
        "capture_policy": "sampled",
    }


def train_step(found: Scan, cap: int = ROLLOUT_SAMPLES_PER_STEP) -> Snapshot:
    """The rollout snapshot of one scanned training step file."""
    file = found.file
    by = categories(found.samples, file.step)
    chosen = stratified(by, cap)
    category = {id(s): name for name, kept in by.items() for s in kept}
    items = records(file, {s.line for s in chosen})
    trajectories = [_rollout(file.step, s, category[id(s)], items[s.line]) for s in chosen]
    snapshot = assemble_rollouts(
        source=SOURCE,
        step=file.step,
        file=file.name,
        lines=len(found.samples),
        categories={name: len(by[name]) for name in STEP_CATEGORIES},
        trajectories=trajectories,
    )
    return check_rollouts(file.path, snapshot.document)


def _val_text(found: Scan, cap: int) -> list[dict[str, Any]]:
    file = found.file
    ids = sorted((s for s in found.samples), key=lambda s: selection_rank(trajectory_id(s.idx)))
    chosen = sorted(ids[: max(cap, 0)], key=lambda s: s.line)
    items = records(file, {s.line for s in chosen})
    return [
        {
            "scope": "evaluation",
            "trial_id": trajectory_id(s.idx),
            "trial_attempt": 0,
            **bounded(val_messages(file, s.line, items[s.line]["content"][0])),
            "capture_policy": "sampled",
        }
        for s in chosen
    ]


def _why_unscored(sample: Sample) -> dict[str, str]:
    if sample.reward is None:
        return {
            "reason_code": "no_reward",
            "reason": "the validation log's reward is NaN, infinite or missing",
        }
    return {
        "reason_code": "reward_only",
        "reason": "NeMo-RL's validation log records the environment's reward, not whether "
        "the answer was right",
    }


def val_round(found: Scan, text_samples: int | None = None) -> Snapshot:
    """The evaluation snapshot of one scanned validation step file."""
    file = found.file
    expected = len(found.samples) + (found.cut_line is not None)
    trials = [
        {
            "type": "trial",
            "trial_id": trajectory_id(s.idx),
            "trial_attempt": 0,
            "status": "unscored",  # NeMo-RL's files classify no answer as failed
            "eligible": False,
            "reward": s.reward,
            "error_type": None,
            **_why_unscored(s),
        }
        for s in found.samples
    ]
    evidence = [
        {
            "trial_id": trajectory_id(s.idx),
            "idx": s.idx,
            "line": s.line,
            "notes": ["no valid reward (NaN, infinite or null)"] if s.invalid else [],
        }
        for s in found.samples
    ]
    population: dict[str, Any] = {
        "type": "population",
        "expected": expected,
        "task": {"name": f"nemo-rl validation at step {file.step}"},
        "verdicts": False,
    }
    if text_samples is not None:
        population["text_samples"] = text_samples
    snapshot = assemble(
        source=SOURCE,
        round_prefix=f"nemo-rl-val-step{file.step}",
        population=population,
        checkpoint={"name": f"unknown (NeMo-RL's policy at validation step {file.step})"},
        trials=trials,
        trajectories=_val_text(found, evaluation_text_cap(expected, text_samples)),
        evidence=evidence,
    )
    return check_snapshot(file.path, snapshot.document)


def read_step(file: StepFile, text_samples: int | None = None) -> Snapshot:
    """One step file's snapshot; :class:`ImportRefused` naming every problem of the file."""
    found = scan(file)
    if found.problems:
        raise ImportRefused(found.problems)
    return train_step(found) if file.kind == "train" else val_round(found, text_samples)


def import_nemo_rl(
    log_dir: str, *, text_samples: int | None = None, progress: Progress | None = None
) -> NemoRlImport:
    """The snapshots of every step file in ``log_dir`` (or its one ``exp_NNN``);
    :class:`ImportRefused` naming every problem of every file."""
    directory = log_directory(log_dir)
    files = step_files(directory)
    rollouts: list[Snapshot] = []
    rounds: list[Snapshot] = []
    warnings: list[str] = []
    problems: list[Problem] = []
    for done, file in enumerate(files, 1):
        found = scan(file)
        warnings += found.warnings
        try:
            if found.problems:
                raise ImportRefused(found.problems)
            if file.kind == "train":
                rollouts.append(train_step(found))
            else:
                rounds.append(val_round(found, text_samples))
        except ImportRefused as refused:
            problems += refused.problems
        if progress is not None:
            progress(done, len(files))
    if problems:
        raise ImportRefused(problems)
    return NemoRlImport(directory, tuple(rollouts), tuple(rounds), tuple(warnings))


def write_snapshots(imported: NemoRlImport, out: str) -> list[str]:
    """``OUT/train-step{N}.json`` and ``OUT/val-step{N}.json`` (``OUT`` made if needed)."""
    os.makedirs(out, exist_ok=True)
    written: list[str] = []
    for rollout in imported.rollouts:
        path = os.path.join(out, f"train-step{rollout.step}.json")
        write_snapshot(rollout, path)
        written.append(path)
    for snapshot in imported.rounds:
        step = snapshot.document["round"].removeprefix("nemo-rl-val-step")
        path = os.path.join(out, f"val-step{step}.json")
        write_snapshot(snapshot, path)
        written.append(path)
    return written
