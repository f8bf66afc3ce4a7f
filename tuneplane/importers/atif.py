"""ATIF (``agent/trajectory.json``, v1.0 to v1.8) read into the trajectory contract's
messages.

Read leniently, never with Harbor's own models (they forbid unknown fields, so a v1.7
file fails under a v1.6 reader): a field this reader does not know is kept aside, by name
only, and never stops an import. What is refused is what cannot be a trajectory at all: a
file that is not JSON, no ``steps`` list, a schema version outside v1.0-v1.8, a
continuation that leaves the trial directory or loops, and the legacy
``litellm-trajectory.jsonl``, which is not supported.

Mapping: a step's ``source`` gives the role (``agent`` is ``assistant``); its ``message``
(a string, or content parts from v1.6) the content; ``reasoning_content`` the reasoning;
``tool_calls`` the assistant's tool calls; each ``observation`` result becomes a ``tool``
message answering the call its ``source_call_id`` names; ``metrics`` give the message's
tokens; ``timestamp`` is kept as written (a malformed one is named and left out);
``model_name`` is the message's model, the agent's ``model_name`` when the step names none
(ATIF: "omitting this field implies the model defined in the root-level agent config").
The last file's ``final_metrics`` are the conversation's totals (Harbor writes the
cumulative ones there). ``continued_trajectory_ref`` names a sibling file whose steps continue the
conversation (its ``is_copied_context`` steps repeat earlier context and are skipped).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Final

from tuneplane.contract.limits import IMPORT_ATIF_MAX_BYTES
from tuneplane.contract.trajectories import parse_timestamp
from tuneplane.contract.validation import finite_float, is_count
from tuneplane.importers.bounded import FileTooLarge, read_bounded
from tuneplane.importers.problems import Problem

TRAJECTORY_FILE: Final = "agent/trajectory.json"
LEGACY_FILE: Final = "agent/litellm-trajectory.jsonl"
_VERSION = re.compile(r"ATIF-v1\.([0-8])")
#: Continuation files followed at most (a summarizing agent writes one per handoff).
MAX_CONTINUATIONS: Final = 64
_ROLES: Final = {"system": "system", "user": "user", "agent": "assistant"}
#: A content part's keys and its image or audio source's (v1.8 adds audio and its duration).
_PART: Final = ("type", "text", "source")
_SOURCE: Final = ("media_type", "path", "duration_sec")
_PART_TYPES: Final = ("text", "image", "audio")
_KNOWN: Final = {
    "": (
        "schema_version",
        "session_id",
        "trajectory_id",
        "agent",
        "steps",
        "notes",
        "final_metrics",
        "continued_trajectory_ref",
        "extra",
        "subagent_trajectories",
    ),
    "steps[].": (
        "step_id",
        "timestamp",
        "source",
        "model_name",
        "reasoning_effort",
        "message",
        "reasoning_content",
        "tool_calls",
        "observation",
        "metrics",
        "is_copied_context",
        "llm_call_count",
        "extra",
    ),
    "steps[].tool_calls[].": ("tool_call_id", "function_name", "arguments", "extra"),
    "steps[].observation.": ("results", "extra"),
    "steps[].observation.results[].": (
        "source_call_id",
        "content",
        "subagent_trajectory_ref",
        "extra",
    ),
    # Content parts (v1.6+) of a step's message and of an observation result's content.
    "steps[].message[].": _PART,
    "steps[].message[].source.": _SOURCE,
    "steps[].observation.results[].content[].": _PART,
    "steps[].observation.results[].content[].source.": _SOURCE,
    "final_metrics.": (
        "total_prompt_tokens",
        "total_completion_tokens",
        "total_cached_tokens",
        "total_cost_usd",
        "total_steps",
        "extra",
    ),
    "steps[].metrics.": (
        "prompt_tokens",
        "completion_tokens",
        "cached_tokens",
        "cost_usd",
        "prompt_token_ids",
        "completion_token_ids",
        "logprobs",
        "extra",
    ),
}


@dataclass(frozen=True, slots=True)
class Conversation:
    """An ATIF trajectory as contract messages (not yet redacted or truncated)."""

    messages: list[dict[str, Any]]
    #: Files read, the first one first (relative to the trial directory).
    files: tuple[str, ...]
    schema_versions: tuple[str, ...]
    #: Field paths this reader does not know (``steps[].colour``): kept aside, not sent.
    unknown_fields: tuple[str, ...]
    #: Observation results that only point at a subagent's trajectory (not followed).
    subagent_refs: int
    #: The last file's ``final_metrics`` as the contract's ``metrics`` (None: none given).
    metrics: dict[str, Any] | None = None


def _unknown(item: dict[str, Any], level: str, seen: set[str]) -> None:
    for key in item:
        if key not in _KNOWN[level]:
            seen.add(f"{level}{key}")


def _text(value: object, level: str, seen: set[str]) -> str:
    """A message or observation content: a string, or v1.6+ content parts (``level`` names
    where the parts are, for the unknown keys they hold)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return "" if value is None else json.dumps(value, ensure_ascii=False)
    pieces: list[str] = []
    for part in value:
        if not isinstance(part, dict):
            pieces.append(str(part))
            continue
        _unknown(part, level, seen)
        kind = part.get("type")
        if kind not in _PART_TYPES:
            seen.add(f"{level}type={repr(kind)[:40]}")
        source = part.get("source")
        if isinstance(source, dict):
            _unknown(source, f"{level}source.", seen)
        if kind == "text":
            pieces.append(str(part.get("text", "")))
        else:  # image or audio: the file it points to, not its bytes
            where = source.get("path") if isinstance(source, dict) else None
            pieces.append(f"[{kind or 'part'}: {where or 'inline'}]")
    return "\n".join(pieces)


def _tokens(metrics: object, seen: set[str]) -> dict[str, int] | None:
    if not isinstance(metrics, dict):
        return None
    _unknown(metrics, "steps[].metrics.", seen)
    tokens = {
        name: metrics[key]
        for key, name in (
            ("prompt_tokens", "input"),
            ("completion_tokens", "output"),
            ("cached_tokens", "cached"),
        )
        if type(metrics.get(key)) is int and metrics[key] >= 0
    }
    return tokens or None


def final_metrics(document: dict[str, Any], seen: set[str]) -> dict[str, Any] | None:
    """The producer's totals for the conversation, those that are well formed."""
    found = document.get("final_metrics")
    if not isinstance(found, dict):
        return None
    _unknown(found, "final_metrics.", seen)
    metrics: dict[str, Any] = {
        name: found[key]
        for key, name in (
            ("total_prompt_tokens", "input"),
            ("total_completion_tokens", "output"),
            ("total_cached_tokens", "cached"),
        )
        if is_count(found.get(key))
    }
    cost = finite_float(found.get("total_cost_usd"))
    if cost is not None and cost >= 0:
        metrics["cost_usd"] = found["total_cost_usd"]
    return metrics or None


def _timestamp(step: dict[str, Any], seen: set[str]) -> dict[str, str]:
    """The step's timestamp as written, when there is a well-formed one."""
    stamp = step.get("timestamp")
    if stamp is None:
        return {}
    if parse_timestamp(stamp) is None:
        seen.add("steps[].timestamp (not an ISO 8601 date and time)")
        return {}
    return {"timestamp": stamp}


def _tool_calls(step: dict[str, Any], seen: set[str]) -> list[dict[str, Any]]:
    calls = step.get("tool_calls")
    if not isinstance(calls, list):
        return []
    made: list[dict[str, Any]] = []
    for index, call in enumerate(calls):
        if not isinstance(call, dict):
            continue
        _unknown(call, "steps[].tool_calls[].", seen)
        call_id = call.get("tool_call_id")
        name = call.get("function_name")
        made.append(
            {
                "id": call_id
                if isinstance(call_id, str) and call_id
                else f"step{step.get('step_id')}-{index}",
                "name": name if isinstance(name, str) and name else "unknown",
                "arguments": call.get("arguments", {}),
            }
        )
    return made


def _observations(
    step: dict[str, Any], calls: list[dict[str, Any]], seen: set[str]
) -> tuple[list[dict[str, Any]], int]:
    observation = step.get("observation")
    if not isinstance(observation, dict):
        return [], 0
    _unknown(observation, "steps[].observation.", seen)
    names = {call["id"]: call["name"] for call in calls}
    messages: list[dict[str, Any]] = []
    refs = 0
    results = observation.get("results")
    for result in results if isinstance(results, list) else []:
        if not isinstance(result, dict):
            continue
        _unknown(result, "steps[].observation.results[].", seen)
        if result.get("content") is None:
            refs += bool(result.get("subagent_trajectory_ref"))
            continue
        content = _text(result["content"], "steps[].observation.results[].content[].", seen)
        message: dict[str, Any] = {"role": "tool", "content": content}
        call_id = result.get("source_call_id")
        if isinstance(call_id, str) and call_id:
            message["tool_call_id"] = call_id
            if call_id in names:
                message["tool_name"] = names[call_id]
        messages.append(message)
    return messages, refs


def step_messages(
    step: dict[str, Any], seen: set[str], agent_model: str | None = None
) -> tuple[list[dict[str, Any]], int]:
    """One step's message and the tool messages of its observation; ``agent_model`` is the
    root's ``agent.model_name``, the model of an agent step that names none."""
    _unknown(step, "steps[].", seen)
    source = step.get("source")
    role = _ROLES.get(source) if isinstance(source, str) else None
    if role is None:
        seen.add(f"steps[].source={source!r}")
        role = "user"
    content = _text(step.get("message"), "steps[].message[].", seen)
    message: dict[str, Any] = {"role": role, "content": content, **_timestamp(step, seen)}
    model = step.get("model_name")
    if not isinstance(model, str) or not model:
        model = agent_model if role == "assistant" else None
    if model:
        message["model"] = model
    calls = _tool_calls(step, seen) if role == "assistant" else []
    if isinstance(step.get("reasoning_content"), str):
        message["reasoning"] = step["reasoning_content"]
    if calls:
        message["tool_calls"] = calls
    tokens = _tokens(step.get("metrics"), seen)
    if tokens and role == "assistant":
        message["tokens"] = tokens
    answers, refs = _observations(step, calls, seen)
    return [message, *answers], refs


def _load(path: Path, name: str) -> tuple[dict[str, Any] | None, Problem | None]:
    try:
        loaded = json.loads(read_bounded(path, IMPORT_ATIF_MAX_BYTES, "an ATIF trajectory file"))
    except FileTooLarge as exc:
        return None, exc.problem
    except OSError as exc:
        return None, Problem(str(path), "", f"cannot be read: {exc.strerror}")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, Problem(str(path), "", f"is not JSON: {exc}")
    if not isinstance(loaded, dict):
        return None, Problem(str(path), "", "must be a JSON object (an ATIF trajectory)")
    version = loaded.get("schema_version")
    if not isinstance(version, str) or _VERSION.fullmatch(version) is None:
        return None, Problem(
            str(path), "schema_version", f"is {version!r}: ATIF-v1.0 to ATIF-v1.8 are read"
        )
    if not isinstance(loaded.get("steps"), list):
        return None, Problem(str(path), "steps", "required: a list of steps")
    return loaded, None


def _continuation(trial_dir: Path, current: str, ref: object) -> tuple[str | None, Problem | None]:
    """The next file's path relative to the trial directory, or why it is refused."""
    where = Problem(str(trial_dir / current), "continued_trajectory_ref", "")
    if not isinstance(ref, str) or not ref:
        return None, Problem(where.file, where.field, "must be a file name beside this one")
    path = PurePosixPath(ref)
    if path.is_absolute() or ".." in path.parts or "\\" in ref:
        return None, Problem(
            where.file, where.field, f"{ref!r} leaves the trial directory; a sibling file is read"
        )
    return str(PurePosixPath(current).parent / path), None


def read_conversation(trial_dir: Path) -> tuple[Conversation | None, list[Problem]]:
    """The trial directory's ATIF trajectory with its continuations joined: None without
    one; a problem for a legacy litellm trajectory or a file that cannot be read."""
    if not (trial_dir / TRAJECTORY_FILE).is_file():
        if (trial_dir / LEGACY_FILE).exists():
            return None, [
                Problem(
                    str(trial_dir / LEGACY_FILE),
                    "",
                    "legacy litellm trajectories are not supported (only ATIF "
                    f"{TRAJECTORY_FILE}); import without --trace-limit to keep the outcomes",
                )
            ]
        return None, []
    messages: list[dict[str, Any]] = []
    files: list[str] = []
    versions: list[str] = []
    seen: set[str] = set()
    refs = 0
    metrics: dict[str, Any] | None = None
    current: str | None = TRAJECTORY_FILE
    while current is not None:
        if current in files or len(files) > MAX_CONTINUATIONS:
            return None, [
                Problem(
                    str(trial_dir / files[-1]),
                    "continued_trajectory_ref",
                    f"continuations loop or exceed {MAX_CONTINUATIONS} files",
                )
            ]
        if not (trial_dir / current).is_file():
            return None, [
                Problem(
                    str(trial_dir / files[-1]),
                    "continued_trajectory_ref",
                    f"names {current!r}, which does not exist",
                )
            ]
        document, problem = _load(trial_dir / current, current)
        if problem or document is None:
            return None, [problem] if problem else []
        files.append(current)
        versions.append(document["schema_version"])
        _unknown(document, "", seen)
        metrics = final_metrics(document, seen)
        continued = len(files) > 1
        agent = document.get("agent")
        agent_model = agent.get("model_name") if isinstance(agent, dict) else None
        for step in document["steps"]:
            if not isinstance(step, dict) or (continued and step.get("is_copied_context") is True):
                continue
            made, step_refs = step_messages(
                step, seen, agent_model if isinstance(agent_model, str) else None
            )
            messages += made
            refs += step_refs
        ref = document.get("continued_trajectory_ref")
        current = None
        if ref is not None:
            current, problem = _continuation(trial_dir, files[-1], ref)
            if problem:
                return None, [problem]
    return Conversation(
        messages, tuple(files), tuple(versions), tuple(sorted(seen)), refs, metrics
    ), []
