"""Identifier and name rules shared by every route and the SDK.

IDs (``[A-Za-z0-9_-]{1,128}``) are what addresses and the API use; people name runs and
projects as they like, and :func:`id_for_name` maps a name to its ID, the same way on every
path (SDK, runner, Trackio protocol, importers), so the name is kept beside the ID.
"""

from __future__ import annotations

import hashlib
import re

from tuneplane.contract.limits import DISPLAY_NAME_MAX_CHARS, ID_MAX_CHARS, METRIC_NAME_MAX_CHARS

#: The ID rule as a regular expression, for checks that take one (the ingest schema's).
ID_PATTERN = rf"[A-Za-z0-9_-]{{1,{ID_MAX_CHARS}}}"
_ID = re.compile(ID_PATTERN, re.ASCII)
#: What an ID may not hold (the dashboard's ``pages/account.js`` writes the same class).
_NOT_ID_CHAR = re.compile(r"[^A-Za-z0-9_-]", re.ASCII)
_NOT_ID = re.compile(r"[^A-Za-z0-9_-]+", re.ASCII)
#: The digest that keeps two names apart once their characters outside the rule are gone.
_DIGEST_CHARS = 8

ID_RULE = f"must be 1-{ID_MAX_CHARS} ASCII letters, digits, '_' or '-'"
METRIC_NAME_RULE = f"must be 1-{METRIC_NAME_MAX_CHARS} printable characters"


def id_problem(value: object) -> str | None:
    """Why ``value`` is not a valid project/run/event ID, or None when it is."""
    if not isinstance(value, str):
        return f"must be a string ({ID_RULE})"
    if _ID.fullmatch(value) is None:
        return ID_RULE
    return None


def is_valid_id(value: object) -> bool:
    return id_problem(value) is None


def metric_name_problem(value: str) -> str | None:
    """Why ``value`` is not a valid metric name, or None when it is."""
    if not 1 <= len(value) <= METRIC_NAME_MAX_CHARS or not value.isprintable():
        return METRIC_NAME_RULE
    return None


DISPLAY_NAME_RULE = (
    f"must be 1-{DISPLAY_NAME_MAX_CHARS} characters of any script, without control characters"
)


def display_name_problem(value: object) -> str | None:
    """Why ``value`` cannot name a run or project, or None when it can."""
    if not isinstance(value, str):
        return f"must be a string ({DISPLAY_NAME_RULE})"
    if not 1 <= len(value) <= DISPLAY_NAME_MAX_CHARS or not value.strip():
        return DISPLAY_NAME_RULE
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in value):
        return DISPLAY_NAME_RULE
    return None


def id_characters(text: str) -> str:
    """``text`` with each character an ID may not hold as ``-`` (as long as ``text``)."""
    return _NOT_ID_CHAR.sub("-", text)


def id_for_name(name: str, fallback: str = "run") -> str:
    """The ID of a run or project that people call ``name``: the name itself when it is an
    ID; else its characters outside the rule become ``-`` and a digest of the whole name is
    appended, so two names that differ only there stay two, and one name always maps to one
    ID. ``fallback`` starts the ID of a name with no ID character at all.

    >>> id_for_name("run-1"), id_for_name("qwen2.5-sft"), id_for_name("my run")
    ('run-1', 'qwen2-5-sft-efa8fc1c', 'my-run-d33e7609')
    """
    if id_problem(name) is None:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:_DIGEST_CHARS]
    base = _NOT_ID.sub("-", name).strip("-")[: ID_MAX_CHARS - _DIGEST_CHARS - 1].strip("-")
    return f"{base or fallback}-{digest}"


#: A trial ID a plan derives from its task and repeat (``hello-world-r2``).
_DERIVED_TRIAL = re.compile(r"(.+)-r(0|[1-9][0-9]*)", re.ASCII)


def derived_trial_id(task: str, repeat: int) -> str:
    """The trial ID of a task's repeat when the plan gives none."""
    return f"{task}-r{repeat}"


def task_and_repeat(trial_id: str) -> tuple[str, int | None]:
    """The task and repeat a derived trial ID names; any other ID is its own task."""
    found = _DERIVED_TRIAL.fullmatch(trial_id)
    return (trial_id, None) if found is None else (found[1], int(found[2]))
