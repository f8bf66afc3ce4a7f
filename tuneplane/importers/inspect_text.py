"""An Inspect AI sample's messages as a trajectory's messages.

Inspect keeps a sample's conversation as ``ChatMessage`` objects (``system``, ``user``,
``assistant``, ``tool``). Content is a string or a list of parts: text parts are joined,
reasoning parts become the message's ``reasoning``, and media or data parts are named, never
copied (an image is often a data URI of megabytes): ``[image]``, ``[audio]``. An assistant's
tool calls keep their ID, function and arguments, and its ``model`` the model that wrote
it (Inspect records it from 0.3.x on); a tool message answers its call by ID and
function, and a tool error is appended to its content. The import's redactor and cuts are
applied afterwards (:func:`tuneplane.importers.text.kept_text`).
"""

from __future__ import annotations

import json
from typing import Any, Final

from tuneplane.contract.limits import OBSERVATION_STRING_MAX_CHARS
from tuneplane.contract.trajectories import TOOL_ERROR_MARK

#: How a media or data part is shown in place of its content.
_NAMED_PARTS: Final = ("image", "audio", "video", "document", "data")


def _part(part: Any, texts: list[str], reasoning: list[str]) -> None:
    kind = getattr(part, "type", None)
    if kind == "text":
        texts.append(str(part.text))
    elif kind == "reasoning":
        shown = part.summary if part.redacted else part.reasoning
        reasoning.append(str(shown) if shown else "[reasoning redacted]")
    elif kind == "tool_use":
        texts.append(f"[{part.tool_type} {part.name}: {part.arguments}] {part.result}")
    elif kind in _NAMED_PARTS:
        texts.append(f"[{kind}]")
    else:
        texts.append(f"[{kind or 'unknown'} content]")


def _content(content: Any) -> tuple[str, str | None]:
    """``(text, reasoning)`` of a message's content."""
    if isinstance(content, str):
        return content, None
    texts: list[str] = []
    reasoning: list[str] = []
    for part in content or []:
        _part(part, texts, reasoning)
    return "\n".join(texts), "\n".join(reasoning) or None


def _arguments(call: Any) -> dict[str, Any]:
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    if getattr(call, "parse_error", None):  # the model's arguments did not parse as JSON
        return {**arguments, "parse_error": str(call.parse_error)}
    return dict(arguments)


def _message(message: Any) -> dict[str, Any]:
    text, reasoning = _content(message.content)
    converted: dict[str, Any] = {"role": message.role, "content": text}
    if reasoning:
        converted["reasoning"] = reasoning
    model = getattr(message, "model", None) if message.role == "assistant" else None
    if isinstance(model, str) and model:
        converted["model"] = model
    if message.role == "assistant" and message.tool_calls:
        converted["tool_calls"] = [
            {"id": call.id, "name": call.function, "arguments": _arguments(call)}
            for call in message.tool_calls
        ]
    if message.role == "tool":
        if message.tool_call_id:
            converted["tool_call_id"] = message.tool_call_id
        if message.function:
            converted["tool_name"] = message.function
        if message.error is not None:
            error = f"{TOOL_ERROR_MARK}{message.error.type}: {message.error.message}]"
            converted["content"] = f"{text}\n{error}" if text else error
    return converted


def messages(sample: Any) -> list[dict[str, Any]]:
    """The sample's conversation as trajectory messages, in order."""
    return [_message(message) for message in sample.messages or []]


def value_text(value: object, limit: int = OBSERVATION_STRING_MAX_CHARS) -> str:
    """A score's value as people read it: text as it is, anything else as JSON."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text[:limit]
