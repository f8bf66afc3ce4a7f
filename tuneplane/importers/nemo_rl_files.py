"""Reading NeMo-RL 0.7 step files: ``train_data_step{N}.jsonl`` and ``val_data_step{N}.jsonl``.

What the writer does (NVIDIA-NeMo/RL v0.7.0, ``nemo_rl/utils/logger.py``
``Logger.log_batched_dict_as_jsonl``): it opens ``<log_dir>/exp_NNN/<name>`` for writing,
slices the batch one sample at a time and writes one JSON line per sample,
``json.dumps({**sample, "idx": i}, default=str)``: so every value is a one-element list (a
tensor's ``tolist()`` of shape ``[1, …]``), ``idx`` is the sample's position, and a NaN
reward is written as the literal ``NaN``. The step is only in the file's name.

- ``train_data_step{N}.jsonl`` (``nemo_rl/algorithms/grpo.py``, the sync and async GRPO
  loops; ``distillation.py`` writes only ``content`` and ``input_lengths``): ``content``
  is ``[[text, text, …]]``, each message's text *without its role*; ``rewards`` is
  ``[reward]`` (with dynamic sampling the total reward, beside ``filtered_rewards``); the
  token-level keys (``token_ids``, ``advantages``, ``generation_logprobs`` …) are not read.
- ``val_data_step{N}.jsonl`` (``grpo.py`` ``validate``): ``content`` is
  ``[[{"role": …, "content": …}, …]]``, the message log with roles, and ``rewards``
  ``[total_reward]``.

Lines are read one at a time and only the fields above are kept, so a step file of any
size costs one line's memory. A last line without its end of line was cut short (the
writer stopped): it is skipped with a warning. Any other line that is not such a record is
a problem naming the file, the line, the field and the rule.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import orjson

from tuneplane.contract.limits import IMPORT_NEMO_RL_LINE_MAX_BYTES
from tuneplane.importers.bounded import FileTooLarge, bounded_lines
from tuneplane.importers.problems import ImportRefused, Problem

Kind = Literal["train", "val"]
_NAMES: Final = re.compile(r"^(train|val)_data_step(\d+)\.jsonl$")
_EXPERIMENT: Final = re.compile(r"^exp_\d+$")


@dataclass(frozen=True, slots=True)
class StepFile:
    path: str
    kind: Kind
    step: int

    @property
    def name(self) -> str:
        return os.path.basename(self.path)


@dataclass(frozen=True, slots=True)
class Sample:
    """What the importer keeps of one line: where it is, its ``idx`` and its reward
    (``reward`` None with ``invalid`` False: the file has no reward; with ``invalid``
    True: NaN, infinite or null)."""

    line: int
    idx: int
    reward: float | None
    invalid: bool


@dataclass
class Scan:
    """A step file's samples, in file order, and what was skipped on the way."""

    file: StepFile
    samples: list[Sample] = field(default_factory=list)
    cut_line: int | None = None
    warnings: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def step_file(path: str) -> StepFile | None:
    """The step file ``path`` names, or None for any other name."""
    match = _NAMES.match(os.path.basename(path))
    if match is None:
        return None
    kind: Kind = "train" if match.group(1) == "train" else "val"
    return StepFile(path, kind, int(match.group(2)))


def step_files(directory: str) -> list[StepFile]:
    """The step files directly in ``directory``, by step (validation before training)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    found = [f for f in (step_file(os.path.join(directory, n)) for n in names) if f is not None]
    return sorted(found, key=lambda f: (f.step, f.kind == "train"))


def experiment_directories(log_dir: str) -> list[str]:
    """``log_dir``'s ``exp_NNN`` directories (NeMo-RL makes one per run), by number."""
    try:
        names = [n for n in os.listdir(log_dir) if _EXPERIMENT.match(n)]
    except OSError:
        return []
    paths = [os.path.join(log_dir, n) for n in names]
    return sorted((p for p in paths if os.path.isdir(p)), key=lambda p: int(p.rsplit("_", 1)[1]))


def log_directory(log_dir: str) -> str:
    """The directory holding the step files: ``log_dir`` itself when it has them, else its
    one ``exp_NNN`` directory that has them; :class:`ImportRefused` otherwise."""
    if not os.path.isdir(log_dir):
        raise ImportRefused([Problem(log_dir, "", "is not a directory")])
    if step_files(log_dir):
        return log_dir
    with_files = [d for d in experiment_directories(log_dir) if step_files(d)]
    if len(with_files) == 1:
        return with_files[0]
    if not with_files:
        rule = "holds no train_data_step{N}.jsonl or val_data_step{N}.jsonl (nor does any exp_NNN)"
    else:
        names = ", ".join(os.path.basename(d) for d in with_files)
        rule = (
            f"holds several NeMo-RL experiments ({names}), whose steps would collide: "
            "name one of them"
        )
    raise ImportRefused([Problem(log_dir, "", rule)])


def _lines(path: str) -> Iterator[tuple[int, bytes, bool]]:
    """``(number, line, ended)`` of each line, ``ended`` False for a last line without its
    end of line; :class:`FileTooLarge` for a line over its limit."""
    return bounded_lines(path, IMPORT_NEMO_RL_LINE_MAX_BYTES, "a NeMo-RL step file's line")


def _load(line: bytes) -> object:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        # Python's json writes NaN and Infinity as literals, which orjson refuses.
        return json.loads(line)


def record(file: StepFile, number: int, line: bytes) -> dict[str, Any] | Problem:
    """One line as a JSON object with an ``idx``, or the problem with it."""
    where = f"line {number}"
    try:
        item = _load(line)
    except (ValueError, UnicodeDecodeError) as exc:
        return Problem(file.path, where, f"is not JSON ({exc})")
    if not isinstance(item, dict):
        return Problem(file.path, where, "must be a JSON object (one sample)")
    idx = item.get("idx")
    if idx.__class__ is not int or idx < 0:
        return Problem(file.path, f"{where}.idx", "required: the sample's nonnegative index")
    content = item.get("content")
    if not (isinstance(content, list) and len(content) == 1 and isinstance(content[0], list)):
        return Problem(
            file.path,
            f"{where}.content",
            "must be a one-element list holding the sample's messages (NeMo-RL writes "
            "every value as a one-element list)",
        )
    return item


def reward(file: StepFile, number: int, item: dict[str, Any]) -> tuple[float | None, bool]:
    """``(reward, invalid)`` of a record, or a :class:`Problem` raised in ImportRefused."""
    if "rewards" not in item:
        return None, False
    value = item["rewards"]
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
        if value is None:
            return None, True
        if value.__class__ in (int, float):
            number_ = float(value)
            return (number_, False) if math.isfinite(number_) else (None, True)
    raise ImportRefused(
        [
            Problem(
                file.path,
                f"line {number}.rewards",
                "must be a one-element list holding a number (NaN, infinite or null: no "
                "valid reward)",
            )
        ]
    )


def scan(file: StepFile) -> Scan:
    """Every sample of a step file (its line, idx and reward), one line in memory at a time."""
    result = Scan(file)
    seen: dict[int, int] = {}
    try:
        for number, line, ended in _lines(file.path):
            if not ended:
                result.cut_line = number
                result.warnings.append(
                    f"{file.path}: line {number}: cut short (no end of line): skipped"
                )
                break
            if not line.strip():
                continue
            item = record(file, number, line)
            if isinstance(item, Problem):
                result.problems.append(item)
                continue
            try:
                value, invalid = reward(file, number, item)
            except ImportRefused as refused:
                result.problems += refused.problems
                continue
            idx = item["idx"]
            if idx in seen:
                result.problems.append(
                    Problem(file.path, f"line {number}.idx", f"{idx} repeats line {seen[idx]}")
                )
                continue
            seen[idx] = number
            result.samples.append(Sample(number, idx, value, invalid))
    except FileTooLarge as exc:
        result.problems.append(exc.problem)
    except OSError as exc:
        result.problems.append(Problem(file.path, "", f"cannot be read: {exc.strerror}"))
    return result


def records(file: StepFile, lines: set[int]) -> dict[int, dict[str, Any]]:
    """The records at these line numbers (read again: only the chosen ones are kept)."""
    found: dict[int, dict[str, Any]] = {}
    for number, line, ended in _lines(file.path):
        if number in lines and ended:
            item = record(file, number, line)
            if isinstance(item, dict):
                found[number] = item
        if len(found) == len(lines):
            break
    return found


class Watch:
    """Which step files of a training that is running are complete (for ``tuneplane run
    --follow-nemo-rl``). NeMo-RL writes one step file at a time, whole, before it goes on:
    so a file is complete once a file of a later step exists in its directory, or once
    the training command has ended (``ended``). Files that were there before the command
    started belong to an earlier run and are left alone. The step files are read from
    ``log_dir`` itself, or else from the first ``exp_NNN`` directory made after the start
    (NeMo-RL makes a new one for each run)."""

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir
        self._before_directories = set(experiment_directories(log_dir))
        self._before = {f.path for d in (log_dir, *self._before_directories) for f in step_files(d)}
        self._done: set[str] = set()
        self._directory: str | None = None

    def directory(self) -> str | None:
        """Where this run's step files are, once there are any."""
        if self._directory is None:
            if any(f.path not in self._before for f in step_files(self.log_dir)):
                self._directory = self.log_dir
            else:
                new = [
                    d
                    for d in experiment_directories(self.log_dir)
                    if d not in self._before_directories
                ]
                self._directory = new[0] if new else None
        return self._directory

    def ready(self, ended: bool) -> list[StepFile]:
        """The complete step files not yet handed out, by step."""
        directory = self.directory()
        if directory is None:
            return []
        files = step_files(directory)
        highest = max((f.step for f in files), default=-1)
        return [
            f
            for f in files
            if f.path not in self._before
            and f.path not in self._done
            and (ended or f.step < highest)
        ]

    def done(self, file: StepFile) -> None:
        self._done.add(file.path)
