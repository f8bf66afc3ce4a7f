"""Trajectory text an import keeps: redacted, then cut to the contract's limits.

Text is off unless asked for (``--trace-limit``). The redactor, an importable
``module:function`` taking and returning text, sees every message's content and
reasoning, every tool call's ID, name and string arguments, and every tool message's call
ID and name, before anything is cut: what it removes is never in the snapshot.
What is kept is always ``capture_policy: "sampled"`` and ``complete: false``: an import
cannot show that it holds an agent's whole history.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from tuneplane.contract.limits import (
    EVAL_TEXT_ALL_MAX_TRIALS,
    OBSERVATION_STRING_MAX_CHARS,
    TRAJECTORY_MAX_BYTES,
)
from tuneplane.contract.trajectories import truncate
from tuneplane.importers.problems import ImportRefused, Problem

Redactor = Callable[[str], str]
#: Trajectories one import keeps at most.
TRACE_LIMIT_MAX: Final = EVAL_TEXT_ALL_MAX_TRIALS
#: Characters one text field keeps: a single message may not take the whole 1 MiB
#: document (``truncate`` never cuts inside a message, and always keeps the first).
TEXT_FIELD_MAX_CHARS: Final = 64 * 1024
_CUT: Final = "\n[cut by tuneplane import: {} more characters]"


class RedactorFailed(Exception):
    pass


def load_redactor(spec: str) -> Redactor:
    """The function ``module:function`` names, imported from the current directory
    first (where a project's ``common/redact.py`` lives), or :class:`ImportRefused`."""
    module_name, _, function_name = spec.partition(":")
    if not module_name or not function_name:
        raise ImportRefused([Problem("--redactor", "", f"{spec!r} must be module:function")])
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ImportRefused(
            [
                Problem(
                    "--redactor", "", f"cannot import {module_name!r}: {type(exc).__name__}: {exc}"
                )
            ]
        ) from exc
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ImportRefused(
            [Problem("--redactor", "", f"{module_name!r} has no function {function_name!r}")]
        )
    return function  # type: ignore[no-any-return]


def _apply(redactor: Redactor, text: str) -> str:
    try:
        cleaned = redactor(text)
    except Exception as exc:
        raise RedactorFailed(f"the redactor raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(cleaned, str):
        raise RedactorFailed(f"the redactor returned {type(cleaned).__name__}, not text")
    return cleaned


def _redact_json(redactor: Redactor, value: object) -> object:
    """Every string inside tool arguments (keys are left as they are: they name the
    tool's parameters)."""
    if isinstance(value, str):
        return _apply(redactor, value)
    if isinstance(value, list):
        return [_redact_json(redactor, item) for item in value]
    if isinstance(value, dict):
        return {key: _redact_json(redactor, item) for key, item in value.items()}
    return value


def redact(
    messages: Sequence[Mapping[str, Any]], redactor: Redactor | None
) -> list[dict[str, Any]]:
    """Copies of ``messages`` with every text field passed through ``redactor``."""
    if redactor is None:
        return [dict(message) for message in messages]
    cleaned: list[dict[str, Any]] = []
    for message in messages:
        copy = dict(message)
        for key in ("content", "reasoning", "tool_call_id", "tool_name"):
            if isinstance(copy.get(key), str):
                copy[key] = _apply(redactor, copy[key])
        if copy.get("tool_calls"):
            copy["tool_calls"] = [
                {
                    "id": _apply(redactor, call["id"]),
                    "name": _apply(redactor, call["name"]),
                    "arguments": _redact_json(redactor, call["arguments"]),
                }
                for call in copy["tool_calls"]
            ]
        cleaned.append(copy)
    return cleaned


def cap_text(text: str, limit: int = TEXT_FIELD_MAX_CHARS) -> str:
    """``text``, or its first ``limit`` characters with a line saying how many were cut."""
    return text if len(text) <= limit else text[:limit] + _CUT.format(len(text) - limit)


def _cap_json(value: object) -> object:
    if isinstance(value, str):
        return cap_text(value)
    if isinstance(value, list):
        return [_cap_json(item) for item in value]
    if isinstance(value, dict):
        return {key: _cap_json(item) for key, item in value.items()}
    return value


def _label(text: str) -> str:
    """IDs and names are 1-1,024 characters: a redactor may have emptied one."""
    return text[:OBSERVATION_STRING_MAX_CHARS] or "redacted"


def _capped(message: dict[str, Any]) -> dict[str, Any]:
    for key in ("content", "reasoning"):
        if isinstance(message.get(key), str):
            message[key] = cap_text(message[key])
    for key in ("tool_call_id", "tool_name", "model"):
        if isinstance(message.get(key), str):
            message[key] = _label(message[key])
    if message.get("tool_calls"):
        message["tool_calls"] = [
            {
                "id": _label(c["id"]),
                "name": _label(c["name"]),
                "arguments": _cap_json(c["arguments"]),
            }
            for c in message["tool_calls"]
        ]
    return message


def kept_text(messages: Sequence[Mapping[str, Any]], redactor: Redactor | None) -> dict[str, Any]:
    """The trajectory fields an import sends for a conversation: redacted first, then each
    text field and the whole document cut to the contract's limits, always declared
    sampled and incomplete. Raises :class:`RedactorFailed`."""
    cleaned = [_capped(message) for message in redact(messages, redactor)]
    # Room for the identity fields and the document's own keys.
    kept, total, _ = truncate(cleaned, max_bytes=TRAJECTORY_MAX_BYTES - 8192)
    return {
        "messages": kept,
        "total_messages": total,
        "complete": False,
        "capture_policy": "sampled",
    }
