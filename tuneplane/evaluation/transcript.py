"""Reading one long trajectory: its token and time totals, and where a text occurs in it.

Totals: the producer's own (a document's ``metrics``, ATIF's ``final_metrics``) cover the
whole conversation, also what a truncated body left out; the sums over the stored
messages cover only those. Both are given, each named. The time is the span from the
earliest to the latest message timestamp (agents write steps out of order), and the sum
of the messages' ``ms``.

Search is a case-insensitive match of the text as typed (no pattern syntax) over what the
page shows of each message: its text, reasoning, model, tool name, and each tool call's
name and arguments (JSON as the page indents it).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

import orjson

from tuneplane.contract.trajectories import parse_timestamp

Message = Mapping[str, Any]

#: Characters of context on each side of a match in its snippet.
SNIPPET_CONTEXT: Final = 60
_TOKENS: Final = ("input", "output", "cached")


def _message_sums(messages: Sequence[Message]) -> dict[str, Any]:
    sums: dict[str, Any] = {name: None for name in _TOKENS}
    sums["ms"] = None
    for message in messages:
        counts = message.get("tokens") or {}
        for name in _TOKENS:
            if name in counts:
                sums[name] = (sums[name] or 0) + counts[name]
        if message.get("ms") is not None:
            sums["ms"] = (sums["ms"] or 0) + message["ms"]
    return sums


def _span(messages: Sequence[Message]) -> dict[str, Any]:
    stamped = [
        (moment, message["timestamp"])
        for message in messages
        if (moment := parse_timestamp(message.get("timestamp"))) is not None
    ]
    if not stamped:
        return {"first": None, "last": None, "seconds": None, "stamped_messages": 0}
    first, last = min(stamped), max(stamped)
    return {
        "first": first[1],
        "last": last[1],
        "seconds": round((last[0] - first[0]).total_seconds(), 3),
        "stamped_messages": len(stamped),
    }


def totals(document: Mapping[str, Any]) -> dict[str, Any]:
    """``{"declared", "messages", "time"}``: the producer's totals (None when it gave
    none), the sums over the stored messages (None where no message has the count), and
    the span of the messages' timestamps (``first``, ``last``, ``seconds``, and how many
    messages have one)."""
    messages = document.get("messages") or ()
    return {
        "declared": document.get("metrics"),
        "messages": _message_sums(messages),
        "time": _span(messages),
    }


def _arguments(value: object) -> str:
    """Arguments as the page shows them: a string as is, anything else indented JSON."""
    if isinstance(value, str):
        return value
    # orjson's two-space indent is JSON.stringify(value, null, 2)'s, at C speed.
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def _fields(message: Message) -> Iterator[tuple[str, str]]:
    for name in ("content", "reasoning", "model", "tool_name"):
        if isinstance(message.get(name), str):
            yield name, message[name]
    for index, call in enumerate(message.get("tool_calls") or ()):
        yield f"tool_calls[{index}].name", str(call.get("name", ""))
        yield f"tool_calls[{index}].arguments", _arguments(call.get("arguments"))


def _snippet(text: str, start: int, end: int) -> dict[str, str]:
    before = text[max(0, start - SNIPPET_CONTEXT) : start]
    after = text[end : end + SNIPPET_CONTEXT]
    return {
        "before": ("…" if start > SNIPPET_CONTEXT else "") + before,
        "match": text[start:end],
        "after": after + ("…" if end + SNIPPET_CONTEXT < len(text) else ""),
    }


def _occurrences(
    text: str, pattern: re.Pattern[str], lowered: str | None
) -> tuple[int, int, int] | None:
    """``(count, start, end)`` of the first occurrence, or None. Between ASCII texts,
    lowering both is the same match as the case-blind pattern, some ten times faster."""
    if lowered is not None and text.isascii():
        low = text.lower()
        first = low.find(lowered)
        return None if first == -1 else (low.count(lowered), first, first + len(lowered))
    matches = list(pattern.finditer(text))
    return (len(matches), matches[0].start(), matches[0].end()) if matches else None


def search(messages: Sequence[Message], query: str) -> list[dict[str, Any]]:
    """One entry per message field that holds ``query`` (any case), in message order:
    ``{"index", "field", "count", "snippet": {"before", "match", "after"}}`` around
    the first occurrence: "hello" in "Say HELLO, hello" is ``{"index": 0, "field":
    "content", "count": 2, "snippet": {"before": "Say ", "match": "HELLO", "after":
    ", hello"}}``."""
    pattern = re.compile(re.escape(query), re.IGNORECASE)
    lowered = query.lower() if query.isascii() else None
    found: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        for field, text in _fields(message):
            where = _occurrences(text, pattern, lowered)
            if where is not None:
                count, first, end = where
                found.append(
                    {
                        "index": index,
                        "field": field,
                        "count": count,
                        "snippet": _snippet(text, first, end),
                    }
                )
    return found
