"""TRL GRPO's completion logs as the run's training rollouts.

With ``GRPOConfig(log_completions=True)``, TRL's ``GRPOTrainer.log()`` writes, on the main
process and right after the callbacks' ``on_log`` ran, one Parquet file per training log:
``<output_dir>/completions/completions_<global step:05d>.parquet`` with the columns
``step``, ``prompt``, ``completion``, one per reward function (named as TRL names them, in
its order), extra columns, ``advantage``. A file holds the latest generation batch. The
callback cannot see the trainer, so it reads the file of a training log at its next
event (the next step's begin, log or train end), once.

Each row becomes one rollout at the file's step: the prompt's messages (a string is one
user message) then the completion's (a string is one assistant message); the reward is
the sum of the reward columns weighted by ``reward_weights`` (1 each by default) over the
functions that answered, as TRL sums them for training (a function that returned None is a
missing value in the file), with the others named in ``reward_missing``; a row where no
function answered has none (``invalid_reward``), as TRL leaves it unscored. A reward in the lowest
quarter of the file's rewards (at or below the ⌈n/4⌉-th lowest) and below their mean is
``low_reward`` (so a step of equal rewards has none), any other ``representative``; a
completion is never a ``failure``. At most ``ROLLOUT_SAMPLES_PER_STEP`` rows of a file are
sent, chosen like the SDK's own per-step sample (in turn from each category: the lowest
rewards first, the others spread evenly over the file), so that a large generation batch
never fills the trajectory queue. Policy versions are left unknown: the file records the
logging step, not which weights generated the rows.

An evaluation log's file holds evaluation completions and is never read; they stay in
TRL's buffer until the next generation, so neither is a training log's file holding
exactly the last evaluation's rows.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeGuard

from tuneplane.client.reporter import Reporter
from tuneplane.contract.limits import ROLLOUT_SAMPLES_PER_STEP
from tuneplane.contract.trajectories import ROLES, Category, stratified

logger = logging.getLogger("tuneplane")
#: A file larger than this is not read on the training thread (logged once).
FILE_MAX_BYTES: Final = 128 * 2**20
_REWARD_MEAN: Final = re.compile(r"^rewards/(.+)/mean$")
_FILE: Final = "completions_{step:05d}.parquet"


def file_name(step: int) -> str:
    return _FILE.format(step=step)


def reward_names(logs: Mapping[str, Any]) -> list[str]:
    """The reward functions of a GRPO training log (``rewards/<name>/mean``), in order."""
    return [m.group(1) for key in logs if (m := _REWARD_MEAN.match(key))]


def _text(content: object) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = [p.get("text") for p in content if isinstance(p, Mapping)]
        return "".join(p for p in parts if isinstance(p, str))
    return "" if content is None else str(content)


def _tool_calls(calls: Sequence[Any]) -> list[dict[str, Any]]:
    """TRL's (OpenAI-style) tool calls as ``{id, name, arguments}``."""
    converted = []
    for index, call in enumerate(calls):
        if not isinstance(call, Mapping):
            continue
        function = call.get("function")
        spec = function if isinstance(function, Mapping) else call
        converted.append(
            {
                "id": str(call.get("id") or f"call-{index}"),
                "name": str(spec.get("name") or "unknown"),
                "arguments": spec.get("arguments"),
            }
        )
    return converted


def _message(raw: Mapping[str, Any]) -> dict[str, Any] | None:
    role = raw.get("role")
    if role not in ROLES:
        return None
    message: dict[str, Any] = {"role": role, "content": _text(raw.get("content"))}
    calls = raw.get("tool_calls")
    if role == "assistant" and isinstance(calls, Sequence) and not isinstance(calls, str):
        message["tool_calls"] = _tool_calls(calls)
        if not message["tool_calls"]:
            del message["tool_calls"]
    if role == "tool":
        for ours, theirs in (("tool_call_id", "tool_call_id"), ("tool_name", "name")):
            if isinstance(raw.get(theirs), str) and raw[theirs]:
                message[ours] = raw[theirs]
    if isinstance(raw.get("reasoning_content"), str):
        message["reasoning"] = raw["reasoning_content"]
    return message


def _side(value: object, role: str) -> list[dict[str, Any]]:
    if isinstance(value, Sequence) and not isinstance(value, str):
        found = (_message(m) for m in value if isinstance(m, Mapping))
        return [m for m in found if m is not None]
    return [{"role": role, "content": _text(value)}]


def messages(prompt: object, completion: object) -> list[dict[str, Any]]:
    """One row's conversation: the prompt (a string is a user message; a conversation
    keeps its system, user, assistant and tool messages) then the completion (a string is
    an assistant message)."""
    return _side(prompt, "user") + _side(completion, "assistant")


def _answered(value: object) -> TypeGuard[int | float]:
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value)


def reward(values: Sequence[object], weights: Sequence[float] | None) -> float | None:
    """The weighted sum of one row's reward values that are finite numbers, as TRL sums
    them for training (``nansum``: a function that returned None gave NaN); None when no
    function answered, or when the sum is not finite."""
    answered = [
        float(value) * (1.0 if weights is None else float(weights[index]))
        for index, value in enumerate(values)
        if _answered(value)
    ]
    if not answered:
        return None
    total = sum(answered)
    return total if math.isfinite(total) else None


def unanswered(values: Sequence[object], names: Sequence[str]) -> list[str]:
    """The reward functions that gave one row no value (None, NaN, infinite)."""
    return [name for name, value in zip(names, values, strict=True) if not _answered(value)]


def categories(rewards: Sequence[float | None]) -> list[Category]:
    """Each row's category: ``invalid_reward`` without a reward, ``low_reward`` at or below
    the ⌈n/4⌉-th lowest of the n rewards and below their mean, else ``representative``."""
    finite = sorted(r for r in rewards if r is not None)
    if not finite:
        return ["invalid_reward"] * len(rewards)
    quartile = finite[math.ceil(len(finite) / 4) - 1]
    mean = math.fsum(finite) / len(finite)
    return [
        "invalid_reward" if r is None else "low_reward" if r <= quartile and r < mean
        else "representative"
        for r in rewards
    ]  # fmt: skip


def _spread(rows: Sequence[int], count: int) -> list[int]:
    if len(rows) <= count:
        return list(rows)
    return [rows[i * len(rows) // count] for i in range(count)]


def choose(
    rewards: Sequence[float | None], kinds: Sequence[Category], cap: int = ROLLOUT_SAMPLES_PER_STEP
) -> list[int]:
    """The rows to send, by category: as many of each as the SDK's stratified sample takes,
    the lowest rewards of ``low_reward`` and evenly spread rows of the others."""
    by_category: dict[Category, list[int]] = {}
    for row, kind in enumerate(kinds):
        by_category.setdefault(kind, []).append(row)
    counts = Counter(kinds[row] for row in stratified(by_category, cap))
    chosen: list[int] = []
    for kind, rows in by_category.items():
        if kind == "low_reward":
            lowest = sorted(rows, key=lambda row: (rewards[row], row))[: counts[kind]]
            chosen.extend(sorted(lowest))
        else:
            chosen.extend(_spread(rows, counts[kind]))
    return chosen


class Unreadable(ValueError):
    """A completion file this module cannot turn into rollouts."""


@dataclass
class CompletionLog:
    """The completion files of one training: which logs wrote one, which were read."""

    directory: Path
    weights: Sequence[float] | None = None
    #: (mtime, size) of the files there at train begin: an unchanged one is a leftover.
    leftovers: dict[str, tuple[int, int]] = field(default_factory=dict)
    rewards: list[str] = field(default_factory=list)
    #: The logs whose files are still to be read, in order: (step, whether an evaluation's).
    pending: list[tuple[int, bool]] = field(default_factory=list)
    read: set[int] = field(default_factory=set)
    #: The last evaluation's rows, until a training file differs from them.
    evaluated: list[Any] | None = None
    _logged: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, args: Any) -> CompletionLog | None:
        """The log of a trainer whose arguments ask for completion files, else None."""
        if getattr(args, "log_completions", False) is not True:
            return None
        directory = Path(str(args.output_dir)) / "completions"
        weights = getattr(args, "reward_weights", None)
        log = cls(directory, list(weights) if weights else None)
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    stat = entry.stat()
                    log.leftovers[entry.name] = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            pass
        return log

    def logged(self, step: int, logs: Mapping[str, Any]) -> None:
        """A log at ``step``: TRL writes its file when the callbacks are done. A prediction's
        (``test_*``) writes none; an evaluation's (``eval_*``) holds evaluation completions,
        which stay in TRL's buffer until the next generation: a training file holding the
        same rows is not read."""
        if any(key.startswith("test_") for key in logs):
            return
        if any(key.startswith("eval_") for key in logs):
            self.pending.append((step, True))
            return
        self.rewards = reward_names(logs) or self.rewards
        if step not in self.read and (step, False) not in self.pending:
            self.pending.append((step, False))

    def collect(self, reporter: Reporter) -> None:
        """Send the rollouts of the files written since the last call. Never raises."""
        pending, self.pending = self.pending, []
        for step, evaluation in pending:
            if evaluation:
                self._guarded(step, self._fingerprint)
            else:
                self.read.add(step)
                self._guarded(step, functools.partial(self._send, step=step, reporter=reporter))

    def _guarded(self, step: int, read: Callable[[Path], None]) -> None:
        path = self.directory / file_name(step)
        try:
            stat = path.stat()
            if self.leftovers.get(path.name) == (stat.st_mtime_ns, stat.st_size):
                return
            if stat.st_size > FILE_MAX_BYTES:
                self._once("size", f"{path.name}: over {FILE_MAX_BYTES // 2**20} MiB, not read")
                return
            read(path)
        except FileNotFoundError:
            return  # a log that wrote no file (not a GRPO trainer's, or not the main process)
        except Exception as exc:  # a file we cannot read never stops training
            self._once(type(exc).__name__, f"{path.name}: {type(exc).__name__}: {exc}")

    def _fingerprint(self, path: Path) -> None:
        self.evaluated = fingerprint(path)

    def _once(self, key: str, message: str) -> None:
        if key not in self._logged:
            self._logged.add(key)
            logger.warning("tuneplane: TRL completions not reported: %s (logged once)", message)

    def _send(self, path: Path, step: int, reporter: Reporter) -> None:
        if self.evaluated is not None:
            if fingerprint(path) == self.evaluated:
                return  # the last evaluation's completions, still in TRL's buffer
            self.evaluated = None  # a training generation since: the buffer is training's
        if self.weights is not None and len(self.weights) != len(self.rewards):
            self._once("weights", f"{len(self.weights)} reward_weights for {self.rewards}")
            return
        for row, kwargs in rollouts(path, self.rewards, self.weights):
            reporter.trajectory(scope="training", step=step, trajectory_id=f"completion-{row}",
                                capture_policy="sampled", **kwargs)  # fmt: skip


def fingerprint(path: Path) -> list[Any]:
    """A file's prompts, completions and advantages: the same in two files, the same rows."""
    import pyarrow.parquet as pq

    present = pq.read_schema(path).names
    columns = [name for name in ("prompt", "completion", "advantage") if name in present]
    found: list[Any] = pq.read_table(path, columns=columns).to_pylist()
    return found


def rollouts(
    path: Path, names: Sequence[str], weights: Sequence[float] | None
) -> list[tuple[int, dict[str, Any]]]:
    """The chosen rows of one completion file as ``(row, trajectory() arguments)``."""
    import pyarrow.parquet as pq

    present = pq.read_schema(path).names
    missing = [name for name in names if name not in present]
    if not names or missing:
        raise Unreadable(f"reward columns {missing or '(unknown)'} missing")
    table = pq.read_table(path, columns=list(names))
    values = [table.column(name).to_pylist() for name in names]
    rows = [[v[row] for v in values] for row in range(table.num_rows)]
    rewards = [reward(row, weights) for row in rows]
    kinds = categories(rewards)
    chosen = choose(rewards, kinds)
    text = pq.read_table(path, columns=["prompt", "completion"]).take(chosen).to_pylist()
    found = []
    for row, item in zip(chosen, text, strict=True):
        kwargs: dict[str, Any] = {"messages": messages(item["prompt"], item["completion"])}
        if rewards[row] is not None:
            kwargs["reward"] = rewards[row]
        if missing := unanswered(rows[row], names):
            kwargs["reward_missing"] = missing
        if kinds[row] != "invalid_reward":
            kwargs["diagnostic"] = kinds[row]
        found.append((row, kwargs))
    return found
