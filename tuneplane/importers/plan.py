"""The import plan (``import-plan.json``): the planned cohort and what it was run with.

The plan, not the files on disk, says which trials exist: a trial that never produced a
directory is still part of the population (missing coverage), and a directory is found
only where the plan says it is, never inferred from its name. Harbor records no attempt
index, so retry numbers come from here too. See docs/import.md for the schema.

>>> plan = load_plan("import-plan.json")  # ImportRefused names every problem
>>> [(a.retry, a.directory) for a in plan.trials[0].attempts]
[(0, 'jobs/first/etl__cdwMJ5R'), (1, 'jobs/retry/etl__cdwMJ5R')]
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Final

from tuneplane.contract.declared import canonical_digest
from tuneplane.contract.ids import ID_RULE, derived_trial_id, id_characters, id_problem
from tuneplane.contract.limits import (
    ID_MAX_CHARS,
    IMPORT_PLAN_MAX_BYTES,
    OBSERVATION_STRING_MAX_CHARS,
)
from tuneplane.importers.bounded import read_bounded
from tuneplane.importers.problems import ImportRefused, Problem

PLAN_VERSION: Final = 1
#: The plan's four declarations, each the lowercase SHA-256 of what it names.
PLAN_DIGESTS: Final = {
    "dataset": "the immutable dataset manifest",
    "verifier": "the verifier implementation/configuration",
    "runtime": "the runtime lock or image manifest",
    "harness": "the harness implementation/configuration",
}
#: The round ID is ``<round>-<16 hex digits of the snapshot's content hash>``.
ROUND_HASH_CHARS: Final = 16
ROUND_PREFIX_MAX_CHARS: Final = ID_MAX_CHARS - ROUND_HASH_CHARS - 1
_FIELDS: Final = (
    "plan_version",
    "round",
    "benchmark",
    "checkpoint",
    "digests",
    "settings",
    "trials",
    "execution",
)
_TRIAL_FIELDS: Final = ("task", "repeat", "trial_id", "attempts")
_ATTEMPT_FIELDS: Final = ("retry", "directory")
_SHA256 = re.compile(r"[0-9a-f]{64}")

#: The declarations every example plan makes (round, benchmark, checkpoint, digests);
#: ``<checkpoint>`` is where a plan's own checkpoint fields go.
_EXAMPLE_DECLARATIONS: Final = """{
  "plan_version": 1,
  "round": "tbench-val",
  "benchmark": {"name": "terminal-bench", "version": "2.0"},
  "checkpoint": {
    "name": "org/model@step-1200",
    "digest": "REPLACE_WITH_CHECKPOINT_WEIGHTS_SHA256_OR_REMOVE_THIS_KEY"<checkpoint>
  },
  "digests": {
    "dataset": "REPLACE_WITH_DATASET_MANIFEST_SHA256",
    "verifier": "REPLACE_WITH_VERIFIER_SHA256",
    "runtime": "REPLACE_WITH_RUNTIME_LOCK_OR_IMAGE_MANIFEST_SHA256",
    "harness": "REPLACE_WITH_HARNESS_SHA256"
  },
"""


def example_plan(rest: str, checkpoint: str = "") -> str:
    """An example plan as ``--example-plan`` prints it: the shared declarations, the
    ``checkpoint`` lines added to the checkpoint, then the plan's own fields (``rest``)."""
    return _EXAMPLE_DECLARATIONS.replace("<checkpoint>", checkpoint) + rest


EXAMPLE_PLAN: Final = example_plan(
    """  "settings": {"agent": "claude-code", "timeout_multiplier": 1.0, "max_retries": 1},
  "trials": [
    {"task": "etl_checkpoint_resume_bug", "repeat": 0, "attempts": [
      {"retry": 0, "directory": "jobs/first/etl_checkpoint_resume_bug__cdwMJ5R"},
      {"retry": 1, "directory": "jobs/retry/etl_checkpoint_resume_bug__cdwMJ5R"}]},
    {"task": "fix-async-worker-queue", "repeat": 0, "attempts": [
      {"retry": 0, "directory": "jobs/first/fix-async-worker-queue__gPApBGF"}]},
    {"task": "auth_token_race_condition", "repeat": 0, "attempts": []}
  ]
}
"""
)


@dataclass(frozen=True, slots=True)
class PlannedAttempt:
    retry: int
    #: Relative to ``--root``, normalized (``a/./b`` is ``a/b``).
    directory: str
    #: The plan entry, as messages name it: ``trials[3].attempts[1]``.
    where: str


@dataclass(frozen=True, slots=True)
class PlannedTrial:
    trial_id: str
    task: str
    repeat: int
    #: In ascending retry order: the last one is the trial's current outcome.
    attempts: tuple[PlannedAttempt, ...]
    where: str

    def describe(self) -> str:
        return f"{self.where} (task {self.task!r}, repeat {self.repeat})"


@dataclass(frozen=True, slots=True)
class Plan:
    file: str
    round: str
    benchmark: dict[str, str]
    #: Recorded beside the round, never part of the protocol fingerprint: comparing two
    #: checkpoints under one protocol is what the fingerprint is for.
    checkpoint: dict[str, str]
    digests: dict[str, str]
    settings: dict[str, Any]
    #: In task / repeat order.
    trials: tuple[PlannedTrial, ...]
    #: The execution the trials belong to (``tuneplane eval run`` names its own): when
    #: given, the round ID is made from it instead of the snapshot's content, so every
    #: snapshot of one execution, before and after it is resumed, is one round.
    execution: str | None = None

    def population_digests(self) -> dict[str, str]:
        """The round's declared digests: the dataset and verifier as the plan gives them,
        the cohort's (the planned trials) and the protocol fingerprint's (runtime, harness
        and evaluation settings, without the checkpoint)."""
        cohort = [[t.trial_id, t.task, t.repeat] for t in self.trials]
        return {
            "dataset": self.digests["dataset"],
            "cohort": canonical_digest(cohort),
            "verifier": self.digests["verifier"],
            "settings": canonical_digest(self.protocol()),
        }

    def protocol(self) -> dict[str, Any]:
        """What the settings digest is taken over (the declaration records it, redacted,
        so two rounds whose digests differ name the keys that differ)."""
        return {
            "runtime": self.digests["runtime"],
            "harness": self.digests["harness"],
            "settings": self.settings,
        }


class _Check:
    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[Problem] = []

    def add(self, field: str, rule: str) -> None:
        self.problems.append(Problem(self.file, field, rule))

    def unknown(self, item: dict[str, Any], known: tuple[str, ...], where: str) -> None:
        for key in item:
            if key not in known:
                self.add(f"{where}{key}", f"unknown field (known: {', '.join(known)})")

    def text(self, item: dict[str, Any], key: str, where: str, *, required: bool) -> str | None:
        value = item.get(key)
        if value is None:
            if required:
                self.add(f"{where}{key}", "required")
            return None
        if not isinstance(value, str) or not 1 <= len(value) <= OBSERVATION_STRING_MAX_CHARS:
            self.add(
                f"{where}{key}", f"must be a string of 1-{OBSERVATION_STRING_MAX_CHARS} characters"
            )
            return None
        return value

    def count(self, item: dict[str, Any], key: str, where: str) -> int | None:
        value = item.get(key)
        if type(value) is not int or value < 0:
            self.add(f"{where}{key}", "required: a nonnegative integer")
            return None
        return value


def digest_problem(value: object, what: str) -> str | None:
    """Why ``value`` is not the lowercase SHA-256 of ``what``, or None when it is."""
    if isinstance(value, str) and value.startswith("REPLACE"):
        return f"is the placeholder {value!r}: put the lowercase SHA-256 of {what} here"
    if not isinstance(value, str) or _SHA256.fullmatch(value.lower()) is None:
        return f"must be the SHA-256 of {what}: 64 lowercase hexadecimal digits"
    if value != value.lower():
        return f"must be lowercase (the SHA-256 of {what})"
    return None


def _digests(check: _Check, raw: object) -> dict[str, str]:
    if not isinstance(raw, dict):
        check.add("digests", f"required: an object with {', '.join(PLAN_DIGESTS)}")
        return {}
    check.unknown(raw, tuple(PLAN_DIGESTS), "digests.")
    digests: dict[str, str] = {}
    for name, what in PLAN_DIGESTS.items():
        if name not in raw:
            check.add(f"digests.{name}", f"required: the lowercase SHA-256 of {what}")
            continue
        problem = digest_problem(raw[name], what)
        if problem:
            check.add(f"digests.{name}", problem)
        else:
            digests[name] = raw[name]
    return digests


def _checkpoint(check: _Check, raw: object) -> dict[str, str]:
    if not isinstance(raw, dict):
        check.add("checkpoint", "required: an object with the checkpoint's name (and digest)")
        return {}
    check.unknown(raw, ("name", "digest"), "checkpoint.")
    checkpoint: dict[str, str] = {}
    name = check.text(raw, "name", "checkpoint.", required=True)
    if name is not None:
        checkpoint["name"] = name
    if raw.get("digest") is not None:
        problem = digest_problem(raw["digest"], "the checkpoint's weights (or leave it out)")
        if problem:
            check.add("checkpoint.digest", problem)
        else:
            checkpoint["digest"] = raw["digest"]
    return checkpoint


def _benchmark(check: _Check, raw: object) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        check.add("benchmark", "must be an object with name and version")
        return {}
    check.unknown(raw, ("name", "version"), "benchmark.")
    fields = {
        key: check.text(raw, key, "benchmark.", required=False) for key in ("name", "version")
    }
    return {key: value for key, value in fields.items() if value is not None}


def _directory(check: _Check, raw: object, field: str, entry: str) -> str | None:
    if not isinstance(raw, str) or not raw.strip():
        check.add(field, f"{entry}: required: a path relative to --root")
        return None
    if "\\" in raw or "\0" in raw:
        check.add(field, f"{entry}: {raw!r} must be a POSIX path without backslashes or NUL")
        return None
    path = PurePosixPath(raw)
    if path.is_absolute() or re.match(r"^[A-Za-z]:", raw):
        check.add(field, f"{entry}: {raw!r} is absolute; directories are relative to --root")
        return None
    if ".." in path.parts:
        check.add(field, f"{entry}: {raw!r} contains '..'; directories stay beneath --root")
        return None
    if str(path) == ".":
        check.add(field, f"{entry}: {raw!r} is --root itself; name the trial's own directory")
        return None
    return str(path)


def _attempts(check: _Check, raw: object, where: str, entry: str) -> list[PlannedAttempt]:
    if not isinstance(raw, list):
        check.add(f"{where}.attempts", f"{entry}: required: a list (empty when nothing ran)")
        return []
    attempts: list[PlannedAttempt] = []
    retries: dict[int, str] = {}
    for index, item in enumerate(raw):
        at = f"{where}.attempts[{index}]"
        if not isinstance(item, dict):
            check.add(at, f"{entry}: must be an object with retry and directory")
            continue
        check.unknown(item, _ATTEMPT_FIELDS, f"{at}.")
        retry = check.count(item, "retry", f"{at}.")
        directory = _directory(check, item.get("directory"), f"{at}.directory", entry)
        if retry is not None and retry in retries:
            check.add(f"{at}.retry", f"{entry}: retry {retry} is also {retries[retry]}'s")
        elif retry is not None and directory is not None:
            retries[retry] = at
            attempts.append(PlannedAttempt(retry, directory, at))
    return sorted(attempts, key=lambda a: a.retry)


def _trial_id(
    check: _Check, item: dict[str, Any], task: str, repeat: int, where: str
) -> str | None:
    if item.get("trial_id") is not None:
        problem = id_problem(item["trial_id"])
        if problem:
            check.add(f"{where}.trial_id", problem)
            return None
        return str(item["trial_id"])
    derived = derived_trial_id(task, repeat)
    if id_characters(task) != task or len(derived) > ID_MAX_CHARS:
        check.add(
            f"{where}.trial_id",
            f"required: the task {task!r} does not make a trial ID ({ID_RULE}); give one",
        )
        return None
    return derived


def _trial(check: _Check, item: object, index: int) -> PlannedTrial | None:
    where = f"trials[{index}]"
    if not isinstance(item, dict):
        check.add(where, "must be an object with task, repeat and attempts")
        return None
    check.unknown(item, _TRIAL_FIELDS, f"{where}.")
    task = check.text(item, "task", f"{where}.", required=True)
    repeat = check.count(item, "repeat", f"{where}.")
    entry = f"{where} (task {task!r}, repeat {repeat})"
    attempts = _attempts(check, item.get("attempts"), where, entry)
    if task is None or repeat is None:
        return None
    trial_id = _trial_id(check, item, task, repeat, where)
    if trial_id is None:
        return None
    return PlannedTrial(trial_id, task, repeat, tuple(attempts), where)


def _cross_check(check: _Check, trials: list[PlannedTrial]) -> None:
    """Each (task, repeat) and trial ID once; each directory used by one attempt only,
    and no attempt's directory inside another's."""
    seen: dict[object, str] = {}
    for trial in trials:
        for key, what in (
            ((trial.task, trial.repeat), "task and repeat"),
            (trial.trial_id, "trial_id"),
        ):
            tagged = (what, key)
            if tagged in seen:
                check.add(
                    f"{trial.where}", f"{trial.describe()}: the same {what} as {seen[tagged]}"
                )
            seen.setdefault(tagged, trial.where)
    owners: dict[str, tuple[PlannedTrial, PlannedAttempt]] = {}
    for trial in trials:
        for attempt in trial.attempts:
            if attempt.directory in owners:
                other, theirs = owners[attempt.directory]
                check.add(
                    f"{attempt.where}.directory",
                    f"{trial.describe()}, retry {attempt.retry}: directory {attempt.directory!r} "
                    f"is also used by {theirs.where} (task {other.task!r}, retry {theirs.retry})",
                )
                continue
            owners[attempt.directory] = (trial, attempt)
    for directory, (trial, attempt) in owners.items():
        for parent in PurePosixPath(directory).parents:
            if str(parent) in owners:
                _, outer = owners[str(parent)]
                check.add(
                    f"{attempt.where}.directory",
                    f"{trial.describe()}, retry {attempt.retry}: directory {directory!r} lies "
                    f"inside {outer.where}'s directory {str(parent)!r}",
                )


def parse_plan(file: str, raw: object) -> Plan:
    """The plan in ``raw`` (parsed JSON), or :class:`ImportRefused` naming every problem."""
    check = _Check(file)
    if not isinstance(raw, dict):
        raise ImportRefused([Problem(file, "", "must be a JSON object (see --example-plan)")])
    check.unknown(raw, _FIELDS, "")
    if raw.get("plan_version", PLAN_VERSION) != PLAN_VERSION:
        check.add("plan_version", f"must be {PLAN_VERSION} (the only plan version there is)")
    round_prefix = raw.get("round")
    if (
        not isinstance(round_prefix, str)
        or id_problem(round_prefix)
        or len(round_prefix) > ROUND_PREFIX_MAX_CHARS
    ):
        check.add(
            "round",
            f"required: the round ID's prefix, 1-{ROUND_PREFIX_MAX_CHARS} ASCII letters, "
            "digits, '_' or '-'",
        )
    execution = raw.get("execution")
    if execution is not None and (not isinstance(execution, str) or id_problem(execution)):
        check.add("execution", f"an execution's ID: {ID_RULE}")
    settings = raw.get("settings", {})
    if not isinstance(settings, dict):
        check.add("settings", "must be an object (the evaluation settings fingerprinted)")
        settings = {}
    digests = _digests(check, raw.get("digests"))
    checkpoint = _checkpoint(check, raw.get("checkpoint"))
    benchmark = _benchmark(check, raw.get("benchmark"))
    items = raw.get("trials")
    trials: list[PlannedTrial] = []
    if not isinstance(items, list) or not items:
        check.add("trials", "required: the planned cohort, a list of at least one trial")
    else:
        trials = [t for i, item in enumerate(items) if (t := _trial(check, item, i)) is not None]
        _cross_check(check, trials)
    if check.problems or not isinstance(round_prefix, str):
        raise ImportRefused(check.problems)
    ordered = sorted(trials, key=lambda t: (t.task, t.repeat))
    return Plan(
        file, round_prefix, benchmark, checkpoint, digests, settings, tuple(ordered), execution
    )


def load_plan(path: str) -> Plan:
    """Read and validate the plan file at ``path``."""
    try:
        raw = json.loads(read_bounded(path, IMPORT_PLAN_MAX_BYTES, "an import plan"))
    except OSError as exc:
        raise ImportRefused([Problem(path, "", f"cannot be read: {exc.strerror}")]) from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ImportRefused([Problem(path, "", f"is not JSON: {exc}")]) from exc
    return parse_plan(path, raw)
