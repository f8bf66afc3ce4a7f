"""One Harbor trial directory: its ``result.json`` and verifier reward, and the outcome
they map to.

The mapping is exact (docs/import.md): no ``result.json`` is ``unscored``; a verifier
timeout is ``infra_error``; any exception other than an agent timeout is ``unscored``, even
with a reward; otherwise only a numeric binary reward (exactly 0 or 1) is ``failure`` /
``success``, and a missing or non-binary one is ``unscored``. Harbor writes a reward twice,
in ``result.json`` (``verifier_result.rewards``) and in ``verifier/reward.txt`` or
``reward.json``; when both are there and disagree, the trial is ``unscored``.

>>> evidence, problems = read_attempt(Path("jobs/etl__cdwMJ5R"), "etl", "trials[0]")
>>> map_outcome(evidence).code, map_outcome(evidence).reason  # verifier/reward.txt: "1\\n"
('binary_reward', 'binary reward 1')

Each outcome names its rule by a code (``reward_mismatch``, ``no_result``…) beside the
sentence, so a trial that is not scored says why wherever it is shown (docs/import.md).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from tuneplane.contract.limits import (
    IMPORT_REWARD_MAX_BYTES,
    IMPORT_TRIAL_RESULT_MAX_BYTES,
    OBSERVATION_STRING_MAX_CHARS,
)
from tuneplane.contract.observations import TrialStatus
from tuneplane.importers.bounded import FileTooLarge, read_bounded
from tuneplane.importers.problems import Problem

VERIFIER_TIMEOUT: Final = "VerifierTimeoutError"
AGENT_TIMEOUT: Final = "AgentTimeoutError"
#: The key of a multi-key reward map that holds the verdict (what Harbor's own
#: ``reward.txt`` is read as, and the only key Lego-RL uses).
VERDICT_KEY: Final = "reward"
#: Harbor reads reward.txt first, then reward.json (harbor/verifier/verifier.py).
REWARD_FILES: Final = ("verifier/reward.txt", "verifier/reward.json")


@dataclass(frozen=True, slots=True)
class Evidence:
    """What one attempt's directory says, before it is mapped to an outcome."""

    result: bool
    exception_type: str | None = None
    #: ``verifier_result.rewards`` of result.json, when it has any.
    rewards: dict[str, Any] | None = None
    #: The reward file's map and name, when there is one that reads.
    file_rewards: dict[str, Any] | None = None
    reward_file: str | None = None
    notes: tuple[str, ...] = ()
    #: Kept for the snapshot (trial name, timestamps): never part of the mapping.
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Outcome:
    status: TrialStatus
    reward: float | None
    error_type: str | None
    reason: str
    #: Which rule of the mapping decided (docs/import.md's table of reason codes).
    code: str


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    as_float = float(value)
    return as_float if math.isfinite(as_float) else None


def verdict(rewards: dict[str, Any]) -> tuple[object, str | None]:
    """The value that decides a reward map (``reward``, or the only key), or why none."""
    if VERDICT_KEY in rewards:
        return rewards[VERDICT_KEY], None
    if len(rewards) == 1:
        return next(iter(rewards.values())), None
    if not rewards:
        return None, "the reward map is empty"
    return None, f"{len(rewards)} reward keys and none named {VERDICT_KEY!r}"


#: (code, sentence) of a reward that decides nothing.
_NoVerdict = tuple[str, str]


def _describe(value: object) -> str:
    number = _number(value)
    if number is not None and number.is_integer():
        return str(int(number))
    return repr(value)


def _decided_reward(evidence: Evidence) -> tuple[object, _NoVerdict | None]:
    """The verdict value of the attempt's rewards, or why there is none."""
    recorded, written = evidence.rewards, evidence.file_rewards
    decisive = recorded if recorded is not None else written
    if decisive is None:
        return None, ("no_reward", "no reward")
    value, problem = verdict(decisive)
    if problem is not None:
        return None, ("no_verdict", problem)
    if recorded is not None and written is not None:
        other, _ = verdict(written)
        same = _number(other) == _number(value) and (_number(value) is not None or other == value)
        if not same:
            return None, (
                "reward_mismatch",
                f"result.json's reward {_describe(value)} differs from {evidence.reward_file}'s "
                f"{_describe(other)}",
            )
    return value, None


def map_outcome(evidence: Evidence) -> Outcome:
    """The trial status an attempt's evidence maps to (the rules of the module docstring)."""
    if not evidence.result:
        return Outcome(
            "unscored", None, None, "no result.json: the attempt has no result", "no_result"
        )
    exception = evidence.exception_type
    if exception == VERIFIER_TIMEOUT:
        return Outcome("infra_error", None, exception, "the verifier timed out", "verifier_timeout")
    value, problem = _decided_reward(evidence)
    reward = _number(value)
    if exception is not None and exception != AGENT_TIMEOUT:
        why = f"{exception}: not scored, whatever the reward"
        return Outcome("unscored", reward, exception, why, "exception")
    if problem is not None:
        return Outcome("unscored", None, exception, problem[1], problem[0])
    if reward is None or reward not in (0.0, 1.0):
        why = f"non-binary reward {_describe(value)}"
        return Outcome("unscored", reward, exception, why, "non_binary_reward")
    status: TrialStatus = "success" if reward == 1.0 else "failure"
    after = " after an agent timeout" if exception == AGENT_TIMEOUT else ""
    why = f"binary reward {_describe(value)}{after}"
    return Outcome(status, reward, exception, why, "binary_reward")


def _timestamp(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _facts(result: dict[str, Any]) -> dict[str, Any]:
    """Names and times worth keeping beside the outcome. Harbor wrote naive timestamps
    until late 2025: a naive one is kept as written and said to be naive."""
    facts: dict[str, Any] = {
        key: result[key]
        for key in ("trial_name", "task_name", "started_at", "finished_at")
        if isinstance(result.get(key), str)
    }
    started, finished = _timestamp(result.get("started_at")), _timestamp(result.get("finished_at"))
    if started and finished and (started.tzinfo is None) == (finished.tzinfo is None):
        facts["duration_seconds"] = round((finished - started).total_seconds(), 3)
    if started is not None and started.tzinfo is None:
        facts["naive_timestamps"] = True
    return facts


def _read_json(path: Path, where: str, problems: list[Problem]) -> object:
    try:
        return json.loads(read_bounded(path, IMPORT_TRIAL_RESULT_MAX_BYTES, "a trial result"))
    except FileTooLarge as exc:
        problems.append(Problem(exc.problem.file, "", f"{where}: {exc.problem.rule}"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        problems.append(Problem(str(path), "", f"{where}: is not JSON: {exc}"))
    except OSError as exc:
        problems.append(Problem(str(path), "", f"{where}: cannot be read: {exc.strerror}"))
    return None


def _reward_bytes(path: Path, where: str, problems: list[Problem]) -> bytes | None:
    """A reward file's bytes; None, with the problem, when it is too large or unreadable
    (a reward is a few bytes: a larger file is no verifier's output)."""
    try:
        return read_bounded(path, IMPORT_REWARD_MAX_BYTES, "a reward file")
    except FileTooLarge as exc:
        problems.append(Problem(exc.problem.file, "", f"{where}: {exc.problem.rule}"))
    except OSError as exc:
        problems.append(Problem(str(path), "", f"{where}: cannot be read: {exc.strerror}"))
    return None


def _reward_file(
    directory: Path, where: str, problems: list[Problem]
) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """The first reward file Harbor would read: its map, its name, a note when it does not
    read as a reward (which leaves the attempt without one, as it left Harbor)."""
    text_file, json_file = (directory / name for name in REWARD_FILES)
    if text_file.is_file():
        data = _reward_bytes(text_file, where, problems)
        if data is None:
            return None, REWARD_FILES[0], None
        text = data.decode(errors="replace").strip()
        try:
            return {VERDICT_KEY: float(text)}, REWARD_FILES[0], None
        except ValueError:
            return None, REWARD_FILES[0], f"{REWARD_FILES[0]} holds {text[:40]!r}, not a number"
    if json_file.is_file():
        data = _reward_bytes(json_file, where, problems)
        if data is None:
            return None, REWARD_FILES[1], None
        try:
            loaded = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return None, REWARD_FILES[1], f"{REWARD_FILES[1]} is not JSON"
        if isinstance(loaded, dict):
            return loaded, REWARD_FILES[1], None
        return None, REWARD_FILES[1], f"{REWARD_FILES[1]} is not a JSON object"
    return None, None, None


def _exception_type(
    result: dict[str, Any], file: str, where: str, problems: list[Problem]
) -> str | None:
    info = result.get("exception_info")
    if info is None:
        return None
    kind = info.get("exception_type") if isinstance(info, dict) else None
    if not isinstance(kind, str) or not 1 <= len(kind) <= OBSERVATION_STRING_MAX_CHARS:
        problems.append(
            Problem(
                file, "exception_info.exception_type", f"{where}: must be the exception's type name"
            )
        )
        return None
    return kind


def _recorded_rewards(
    result: dict[str, Any], file: str, where: str, problems: list[Problem]
) -> dict[str, Any] | None:
    verifier = result.get("verifier_result")
    if verifier is None:
        return None
    rewards = verifier.get("rewards") if isinstance(verifier, dict) else None
    if not isinstance(verifier, dict) or not (rewards is None or isinstance(rewards, dict)):
        problems.append(
            Problem(
                file, "verifier_result.rewards", f"{where}: must be null or an object of rewards"
            )
        )
        return None
    return rewards or None


def read_attempt(directory: Path, task: str, where: str) -> tuple[Evidence, list[Problem]]:
    """The evidence of one attempt's trial directory; ``where`` names its plan entry in
    problems. A result.json that does not read, or names another task than the plan's, is
    a problem (the plan would attribute someone else's evidence)."""
    problems: list[Problem] = []
    result_file = directory / "result.json"
    file_rewards, reward_file, note = _reward_file(directory, where, problems)
    notes = (note,) if note else ()
    if not result_file.is_file():
        evidence = Evidence(False, file_rewards=file_rewards, reward_file=reward_file, notes=notes)
        return evidence, problems
    file = str(result_file)
    before = len(problems)
    result = _read_json(result_file, where, problems)
    if not isinstance(result, dict):
        if len(problems) == before:
            problems.append(Problem(file, "", f"{where}: must be a JSON object (a TrialResult)"))
        return Evidence(False), problems
    task_name = result.get("task_name")
    if "n_total_trials" in result or "trial_results" in result:
        problems.append(
            Problem(file, "", f"{where}: is a Harbor job's result.json; name a trial's directory")
        )
    elif not isinstance(task_name, str):
        problems.append(Problem(file, "task_name", f"{where}: required (a Harbor TrialResult)"))
    elif task_name != task:
        problems.append(
            Problem(
                file, "task_name", f"{where}: is {task_name!r}, but the plan's task is {task!r}"
            )
        )
    evidence = Evidence(
        True,
        exception_type=_exception_type(result, file, where, problems),
        rewards=_recorded_rewards(result, file, where, problems),
        file_rewards=file_rewards,
        reward_file=reward_file,
        notes=notes,
        facts=_facts(result),
    )
    return evidence, problems
