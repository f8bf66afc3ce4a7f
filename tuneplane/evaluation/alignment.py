"""Two trajectories of one trial side by side: where they part, and where each first fails.

Messages are aligned by index (message *i* of the left beside message *i* of the right).
They are the same message when what the model saw or said is the same: role, text,
reasoning, tool name, and each tool call's name and arguments. Token counts, timings and
tool call IDs differ between any two executions and are not compared.

A tool result reads as failed when the producer marks it (``error`` or ``is_error``) or
its text says so by one of the rules of :func:`failure_rule` (a tool error an import
appended, a traceback, an error or exception first line, a nonzero exit code, a command
not found). It is a reading of the
text, not a verdict: the page says which rule matched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from tuneplane.contract.trajectories import TOOL_ERROR_MARK

Message = Mapping[str, Any]

_TRACEBACK: Final = "Traceback (most recent call last):"
_ERROR_LINE: Final = re.compile(r"\s*(?:\[?error\]?|exception|fatal)\b", re.IGNORECASE)
#: Over the lowered text, and only where "exit" or "return" occurs: a regular expression
#: tried at every position of hundreds of tool results is what made a long pair slow.
_EXIT_CODE: Final = re.compile(r"\b(?:exit(?:ed with)? (?:code|status)|return ?code)[:= ]*[1-9]")
_COMPARED: Final = ("role", "content", "reasoning", "tool_name")


def _calls(message: Message) -> list[tuple[Any, Any]]:
    return [(c.get("name"), c.get("arguments")) for c in message.get("tool_calls") or ()]


def same_message(left: Message, right: Message) -> bool:
    """Whether two messages say the same (IDs, tokens and timings aside)."""
    return all(left.get(k) == right.get(k) for k in _COMPARED) and _calls(left) == _calls(right)


def first_divergence(left: Sequence[Message], right: Sequence[Message]) -> int | None:
    """The index of the first message that differs, or where the shorter one ends; None
    when both hold the same messages."""
    for index, (a, b) in enumerate(zip(left, right, strict=False)):
        if not same_message(a, b):
            return index
    return None if len(left) == len(right) else min(len(left), len(right))


@dataclass(frozen=True, slots=True)
class FailedToolCall:
    #: The index of the tool result that reads as failed.
    message: int
    #: The index of the assistant message that made the call, when it is found.
    call_message: int | None
    call_id: str | None
    tool_name: str | None
    #: ``marked`` (the producer said so) or a rule of :func:`failure_rule`.
    rule: str


def failure_rule(message: Message) -> str | None:
    """Why a tool result reads as failed, or None."""
    if message.get("role") != "tool":
        return None
    if message.get("error") or message.get("is_error"):
        return "marked"
    text = message.get("content")
    if not isinstance(text, str):
        return None
    if text.startswith(TOOL_ERROR_MARK) or "\n" + TOOL_ERROR_MARK in text:
        return "tool_error"
    if _TRACEBACK in text:
        return "traceback"
    if _ERROR_LINE.match(text):
        return "error_line"
    lowered = text.lower()
    if ("exit" in lowered or "return" in lowered) and _EXIT_CODE.search(lowered):
        return "exit_code"
    if "command not found" in lowered:
        return "command_not_found"
    return None


def _caller(messages: Sequence[Message], before: int, call_id: str | None) -> int | None:
    if call_id is None:
        return None
    for index in range(before - 1, -1, -1):
        if any(c.get("id") == call_id for c in messages[index].get("tool_calls") or ()):
            return index
    return None


def first_failed_tool_call(messages: Sequence[Message]) -> FailedToolCall | None:
    """The first tool result that reads as failed, with the call it answers."""
    for index, message in enumerate(messages):
        rule = failure_rule(message)
        if rule is not None:
            call_id = message.get("tool_call_id")
            return FailedToolCall(
                index, _caller(messages, index, call_id), call_id, message.get("tool_name"), rule
            )
    return None
