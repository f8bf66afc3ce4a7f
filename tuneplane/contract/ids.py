"""Identifier and name rules shared by every route and the SDK."""

from __future__ import annotations

import re

from tuneplane.contract.limits import ID_MAX_CHARS, METRIC_NAME_MAX_CHARS

_ID = re.compile(rf"[A-Za-z0-9_-]{{1,{ID_MAX_CHARS}}}", re.ASCII)

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
