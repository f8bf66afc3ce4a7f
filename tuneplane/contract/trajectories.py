"""Trajectories: the messages that produced an evaluation outcome or a training rollout.

Wire format (``POST /api/v1/ingest/trajectories``, 1-16 documents, each at most 1 MiB and
1,024 messages)::

    {"trajectories": [
      {"scope": "evaluation", "round_id": "val-7", "trial_id": "q17-s0", "trial_attempt": 0,
       "messages": [
         {"role": "user", "content": "What is 17 * 3?"},
         {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "name": "python", "arguments": {"code": "17 * 3"}}],
          "tokens": {"input": 12, "output": 9}, "ms": 420},
         {"role": "tool", "tool_call_id": "c1", "tool_name": "python", "content": "51"},
         {"role": "assistant", "content": "51"}],
       "total_messages": 4, "complete": true, "capture_policy": "all"},
      {"scope": "training", "step": 120, "trajectory_id": "r3", "diagnostic": "low_reward",
       "reward": 0.05, "reward_missing": ["format"], "collection_policy": "v118",
       "consumption_policy": "v120", "messages": [...], "total_messages": 40,
       "complete": false, "capture_policy": "sampled"}]}

A trajectory's identity is immutable within its run and execution attempt (the ingest
token's): ``(round_id, trial_id, trial_attempt)`` for ``evaluation``, ``(step,
trajectory_id)`` for ``training``. An identical re-send is a duplicate; a different body for
the same identity is a :class:`TrajectoryConflict` (409) that stores nothing of its batch.

``complete`` says whether ``messages`` is the whole conversation: a truncated one declares
``complete: false`` and the ``total_messages`` it had (:func:`truncate` does both).
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal, TypeVar, get_args

import orjson

from tuneplane.contract.errors import Conflict, InvalidInput, Violation
from tuneplane.contract.json_body import NotFinite, malformed
from tuneplane.contract.limits import (
    EVAL_TEXT_ALL_MAX_TRIALS,
    EVAL_TEXT_SAMPLED_TRIALS,
    OBSERVATION_STRING_MAX_CHARS,
    REWARD_MISSING_MAX,
    REWARD_NAME_MAX_CHARS,
    TRAJECTORY_BATCH_MAX,
    TRAJECTORY_MAX_BYTES,
    TRAJECTORY_MAX_MESSAGES,
)
from tuneplane.contract.validation import (
    DEPTH_RULE,
    STEP_RULE,
    FieldCheck,
    finite_float,
    is_count,
    is_step,
)

Scope = Literal["evaluation", "training"]
SCOPES: Final[tuple[Scope, ...]] = get_args(Scope)
#: What a producer may say of a training rollout.
Diagnostic = Literal["failure", "anomaly", "low_reward", "representative"]
DIAGNOSTICS: Final[tuple[Diagnostic, ...]] = get_args(Diagnostic)
#: The training rollout view's categories: a producer's diagnostic, except that a rollout
#: without a finite reward is ``invalid_reward`` unless the producer called it a failure or
#: an anomaly. Only a producer's explicit ``failure`` is a failure.
Category = Literal["failure", "anomaly", "low_reward", "invalid_reward", "representative"]
CATEGORIES: Final[tuple[Category, ...]] = get_args(Category)
CapturePolicy = Literal["all", "sampled"]
CAPTURE_POLICIES: Final[tuple[CapturePolicy, ...]] = get_args(CapturePolicy)
Role = Literal["system", "developer", "user", "assistant", "tool"]
ROLES: Final[tuple[Role, ...]] = get_args(Role)

_COMMON_FIELDS: Final = ("scope", "messages", "total_messages", "complete", "capture_policy")
_EVALUATION_FIELDS: Final = ("round_id", "trial_id", "trial_attempt")
_TRAINING_FIELDS: Final = (
    "step",
    "trajectory_id",
    "diagnostic",
    "reward",
    "reward_invalid",
    "reward_missing",
    "collection_policy",
    "consumption_policy",
)
_MESSAGE_FIELDS: Final = (
    "role",
    "content",
    "reasoning",
    "tool_calls",
    "tool_call_id",
    "tool_name",
    "tokens",
    "ms",
    "timestamp",
    "model",
)
_TOKEN_FIELDS: Final = ("input", "output", "cached")
#: The producer's own totals for the whole conversation (ATIF's ``final_metrics``).
_METRICS_FIELDS: Final = (*_TOKEN_FIELDS, "cost_usd")
_TIMESTAMP: Final = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})?"
)
#: How an import appends a tool's reported error to the tool message's text (Inspect's
#: ``ToolCallError``): the trajectory readers find a failed tool call by it.
TOOL_ERROR_MARK: Final = "[tool error: "
#: The longest text searched for within one trajectory.
SEARCH_QUERY_MAX_CHARS: Final = 200
TIMESTAMP_RULE: Final = (
    "must be an ISO 8601 date and time (2025-11-19T22:54:30.166Z; one without an offset "
    "is read as UTC)"
)
_TOOL_CALL_FIELDS: Final = ("id", "name", "arguments")
#: Metadata a conflicting re-send is compared on (beside the messages).
COMPARED_FIELDS: Final = (
    "total_messages",
    "complete",
    "capture_policy",
    "diagnostic",
    "reward",
    "reward_invalid",
    "collection_policy",
    "consumption_policy",
)


def evaluation_identity(
    round_id: str | None, trial_id: str | None, trial_attempt: int | None
) -> str:
    """The identity of a trial attempt's trajectory (IDs never contain ``/``)."""
    return f"evaluation/{round_id}/{trial_id}/{trial_attempt}"


@dataclass(frozen=True, slots=True)
class Trajectory:
    """One validated document. ``document`` is what is stored, keys in a fixed order."""

    scope: Scope
    round_id: str | None
    trial_id: str | None
    trial_attempt: int | None
    step: int | None
    trajectory_id: str | None
    diagnostic: Diagnostic | None
    reward: float | None
    reward_invalid: bool
    #: The reward functions that gave the rollout no reward (its reward is the others'
    #: sum, as the trainer's), in the trainer's order; None when every one answered.
    reward_missing: tuple[str, ...] | None
    collection_policy: str | None
    consumption_policy: str | None
    total_messages: int
    complete: bool
    capture_policy: CapturePolicy
    message_count: int
    document: dict[str, Any]

    @property
    def identity(self) -> str:
        """Unique within a run's execution attempt (IDs never contain ``/``)."""
        if self.scope == "evaluation":
            return evaluation_identity(self.round_id, self.trial_id, self.trial_attempt)
        return f"training/{self.step}/{self.trajectory_id}"

    @property
    def category(self) -> Category | None:
        if self.scope != "training":
            return None
        if self.diagnostic in ("failure", "anomaly"):
            return self.diagnostic
        if self.reward is None:
            return "invalid_reward"
        return self.diagnostic or "representative"

    @property
    def truncated(self) -> bool:
        return self.message_count < self.total_messages

    def encoded(self) -> bytes:
        """The stored body: canonical JSON, so an identical re-send has the same digest."""
        return orjson.dumps(self.document, option=orjson.OPT_SORT_KEYS)

    def metadata(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in COMPARED_FIELDS}


def digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


class TrajectoryConflict(Conflict):
    """A different body for a trajectory identity already stored: the whole batch is
    refused and nothing of it is stored."""

    code = "trajectory_conflict"

    def __init__(self, index: int, identity: str, fields: Sequence[str]) -> None:
        super().__init__(
            f"trajectories[{index}]: trajectory {identity} was already stored with different "
            f"{', '.join(fields)}; nothing of this batch was stored (a retained trajectory "
            "is immutable: use a new trial_attempt or trajectory_id for another execution)",
            tuple(
                Violation(f"trajectories[{index}].{name}", "differs from the stored one")
                for name in fields
            ),
        )
        self.identity = identity
        self.fields = tuple(fields)


class RetentionCapReached(Conflict):
    """A training step already retains :data:`ROLLOUT_SAMPLES_PER_STEP` rollouts."""

    code = "retention_cap"


def _problem_text(value: object, limit: int = OBSERVATION_STRING_MAX_CHARS) -> str | None:
    if not isinstance(value, str) or not 1 <= len(value) <= limit:
        return f"must be a string of 1-{limit} characters"
    return None


class _Check(FieldCheck):
    def unknown(self, item: Mapping[str, Any], known: Iterable[str], where: str = "") -> None:
        allowed = tuple(known)
        for key in item:
            if key not in allowed:
                self.add(f"{where}{key}", f"unknown field (known: {', '.join(allowed)})")

    def text(self, item: Mapping[str, Any], key: str, where: str = "") -> str | None:
        value = item.get(key)
        if value is None:
            return None
        problem = _problem_text(value)
        if problem:
            self.add(f"{where}{key}", problem)
            return None
        return value  # type: ignore[no-any-return]


def search_query_problem(query: str | None) -> str | None:
    """Why ``query`` cannot be searched for in a trajectory, or None."""
    if query is None or not query.strip() or len(query) > SEARCH_QUERY_MAX_CHARS:
        return f"required: the text to find, 1-{SEARCH_QUERY_MAX_CHARS} characters, not all spaces"
    return None


def parse_timestamp(value: object) -> datetime | None:
    """A message's ``timestamp`` as an aware time (UTC when it names no offset: ATIF
    writers often leave it out), or None when it breaks :data:`TIMESTAMP_RULE`."""
    if not isinstance(value, str) or _TIMESTAMP.fullmatch(value) is None:
        return None
    # Nanoseconds are written by some producers; datetime keeps microseconds.
    text = re.sub(r"(\.\d{6})\d+", r"\1", value)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _metrics(check: _Check, metrics: object) -> None:
    if not isinstance(metrics, dict):
        check.add("metrics", "must be an object of input, output and cached tokens and cost_usd")
        return
    check.unknown(metrics, _METRICS_FIELDS, "metrics.")
    for name in _TOKEN_FIELDS:
        if name in metrics and not is_count(metrics[name]):
            check.add(f"metrics.{name}", "must be a nonnegative integer")
    cost = finite_float(metrics.get("cost_usd"))
    if "cost_usd" in metrics and (cost is None or cost < 0):
        check.add("metrics.cost_usd", "must be a nonnegative finite number")


def _tokens(check: _Check, where: str, tokens: object) -> None:
    if not isinstance(tokens, dict):
        check.add(where, "must be an object of input, output and cached token counts")
        return
    check.unknown(tokens, _TOKEN_FIELDS, f"{where}.")
    for name, count in tokens.items():
        if name in _TOKEN_FIELDS and not is_count(count):
            check.add(f"{where}.{name}", "must be a nonnegative integer")


def _tool_calls(check: _Check, where: str, calls: object) -> None:
    if not isinstance(calls, list):
        check.add(where, "must be a list of {id, name, arguments}")
        return
    for index, call in enumerate(calls):
        path = f"{where}[{index}]"
        if not isinstance(call, dict):
            check.add(path, "must be an object with id, name and arguments")
            continue
        check.unknown(call, _TOOL_CALL_FIELDS, f"{path}.")
        for name in ("id", "name"):
            problem = _problem_text(call.get(name))
            if problem:
                check.add(f"{path}.{name}", "required" if call.get(name) is None else problem)


def _message(check: _Check, index: int, message: object) -> None:
    where = f"messages[{index}]"
    if not isinstance(message, dict):
        check.add(where, "must be an object with role and content")
        return
    check.unknown(message, _MESSAGE_FIELDS, f"{where}.")
    role = message.get("role")
    if role not in ROLES:
        check.add(f"{where}.role", f"must be one of {', '.join(ROLES)}")
    if not isinstance(message.get("content"), str):
        check.add(f"{where}.content", "required: a string (empty when there is no text)")
    if message.get("reasoning") is not None and not isinstance(message["reasoning"], str):
        check.add(f"{where}.reasoning", "must be a string")
    if message.get("tool_calls") is not None:
        if role != "assistant":
            check.add(f"{where}.tool_calls", "only an assistant message makes tool calls")
        _tool_calls(check, f"{where}.tool_calls", message["tool_calls"])
    for name in ("tool_call_id", "tool_name", "model"):
        check.text(message, name, f"{where}.")
    stamp = message.get("timestamp")
    if stamp is not None and parse_timestamp(stamp) is None:
        check.add(f"{where}.timestamp", TIMESTAMP_RULE)
    if message.get("tokens") is not None:
        _tokens(check, f"{where}.tokens", message["tokens"])
    ms = message.get("ms")
    if ms is not None and (finite_float(ms) is None or ms < 0):
        check.add(f"{where}.ms", "must be a nonnegative finite number of milliseconds")


def _messages(check: _Check, item: Mapping[str, Any]) -> int:
    messages = item.get("messages")
    if not isinstance(messages, list) or len(messages) > TRAJECTORY_MAX_MESSAGES:
        check.add("messages", f"required: a list of at most {TRAJECTORY_MAX_MESSAGES} messages")
        return 0
    for index, message in enumerate(messages):
        _message(check, index, message)
        if len(check.violations) >= 20:
            break
    return len(messages)


def _completeness(check: _Check, item: Mapping[str, Any], count: int) -> None:
    total, complete = item.get("total_messages"), item.get("complete")
    if not is_count(total) or total < count:  # type: ignore[operator]
        check.add("total_messages", f"must be an integer of at least len(messages) ({count})")
    if not isinstance(complete, bool):
        check.add("complete", "required: true when messages hold the whole conversation")
    elif complete and total != count:
        check.add(
            "complete",
            f"true, but total_messages ({total}) differs from len(messages) ({count}): a "
            "truncated conversation is complete: false",
        )
    if item.get("capture_policy") not in CAPTURE_POLICIES:
        check.add("capture_policy", f"must be one of {', '.join(CAPTURE_POLICIES)}")


def _policy(check: _Check, item: Mapping[str, Any], key: str) -> str | None:
    value = item.get(key)
    if is_count(value):
        return str(value)
    return check.text(item, key)


def _reward_missing(check: _Check, item: Mapping[str, Any]) -> list[str] | None:
    names = item.get("reward_missing")
    if names is None:
        return None
    rule = (
        f"must be a list of 1-{REWARD_MISSING_MAX} distinct reward function names of "
        f"1-{REWARD_NAME_MAX_CHARS} characters"
    )
    if (
        not isinstance(names, list)
        or not 1 <= len(names) <= REWARD_MISSING_MAX
        or any(_problem_text(name, REWARD_NAME_MAX_CHARS) for name in names)
        or len(set(names)) != len(names)
    ):
        check.add("reward_missing", rule)
        return None
    return names


def _training(check: _Check, item: Mapping[str, Any]) -> dict[str, Any]:
    step = item.get("step")
    if not is_step(step):
        check.add("step", "required for a training rollout: " + STEP_RULE)
    trajectory_id = check.ident(item, "trajectory_id")
    diagnostic = item.get("diagnostic")
    if diagnostic is not None and diagnostic not in DIAGNOSTICS:
        check.add("diagnostic", f"must be one of {', '.join(DIAGNOSTICS)}, or null")
    reward, invalid = item.get("reward"), item.get("reward_invalid", False)
    if not isinstance(invalid, bool):
        check.add("reward_invalid", "must be true or false")
    if reward is not None and (isinstance(reward, NotFinite) or finite_float(reward) is None):
        check.add(
            "reward",
            "must be a finite number or null (send reward_invalid: true "
            "for a reward that was NaN or infinite)",
        )
    elif reward is not None and invalid:
        check.add("reward_invalid", "true, but a finite reward was sent")
    if diagnostic == "low_reward" and reward is None:
        check.add("diagnostic", "low_reward needs the finite reward it is low by")
    fields = {
        "step": step,
        "trajectory_id": trajectory_id,
        "diagnostic": diagnostic,
        # A reward of exactly 0 is a reward (finite_float returns it, falsy as it is).
        "reward": None if reward is None or finite_float(reward) is None else float(reward),
        "reward_invalid": invalid is True,
        "collection_policy": _policy(check, item, "collection_policy"),
        "consumption_policy": _policy(check, item, "consumption_policy"),
    }
    missing = _reward_missing(check, item)
    if missing is not None:  # only when sent: older documents keep their digest
        fields["reward_missing"] = missing
    return fields


def _evaluation(check: _Check, item: Mapping[str, Any]) -> dict[str, Any]:
    for name in _TRAINING_FIELDS:
        if name in item:
            check.add(name, "is a training rollout's field; an evaluation trajectory has none")
    attempt = item.get("trial_attempt")
    if not is_count(attempt):
        check.add("trial_attempt", "must be a nonnegative integer")
    return {
        "round_id": check.ident(item, "round_id"),
        "trial_id": check.ident(item, "trial_id"),
        "trial_attempt": attempt,
    }


def _size_problem(item: dict[str, Any]) -> str | None:
    try:
        size = len(orjson.dumps(item, default=lambda _marker: None))
    except TypeError:
        return DEPTH_RULE
    if size > TRAJECTORY_MAX_BYTES:
        return (
            f"is {size} bytes: a trajectory is at most {TRAJECTORY_MAX_BYTES // 1024} KiB "
            "(truncate it and declare complete: false)"
        )
    return None


def parse_trajectory(path: str, item: object) -> tuple[Trajectory | None, list[Violation]]:
    """Validate one document; the violations name ``path``'s fields."""
    if not isinstance(item, dict):
        return None, [Violation(path, "must be an object")]
    check = _Check(path)
    problem = _size_problem(item)
    if problem:
        check.add("", problem)
        return None, check.violations
    scope = item.get("scope")
    if scope not in SCOPES:
        check.add("scope", f"must be one of {', '.join(SCOPES)}")
        return None, check.violations
    check.unknown(item, (*_COMMON_FIELDS, "metrics", *_EVALUATION_FIELDS, *_TRAINING_FIELDS))
    if scope == "training":
        for name in _EVALUATION_FIELDS:
            if name in item:
                check.add(name, "is an evaluation trajectory's field; a training rollout has none")
    count = _messages(check, item)
    _completeness(check, item, count)
    if "metrics" in item:
        _metrics(check, item["metrics"])
    identity = _training(check, item) if scope == "training" else _evaluation(check, item)
    if check.violations:
        return None, check.violations
    return _trajectory(item, scope, identity, count), []


def _trajectory(
    item: dict[str, Any], scope: Scope, fields: dict[str, Any], count: int
) -> Trajectory:
    common = {name: item[name] for name in _COMMON_FIELDS}
    if "metrics" in item:  # only when sent: earlier documents keep their digest
        common["metrics"] = item["metrics"]
    return Trajectory(
        scope=scope,
        round_id=fields.get("round_id"),
        trial_id=fields.get("trial_id"),
        trial_attempt=fields.get("trial_attempt"),
        step=fields.get("step"),
        trajectory_id=fields.get("trajectory_id"),
        diagnostic=fields.get("diagnostic"),
        reward=fields.get("reward"),
        reward_invalid=fields.get("reward_invalid", False),
        reward_missing=tuple(fields["reward_missing"]) if "reward_missing" in fields else None,
        collection_policy=fields.get("collection_policy"),
        consumption_policy=fields.get("consumption_policy"),
        total_messages=item["total_messages"],
        complete=item["complete"],
        capture_policy=item["capture_policy"],
        message_count=count,
        document={**common, **fields},
    )


def parse_trajectories(body: object) -> list[Trajectory]:
    """A ``POST /api/v1/ingest/trajectories`` body; every violation is named."""
    if not isinstance(body, dict):
        raise malformed("must be a JSON object with a 'trajectories' list")
    items = body.get("trajectories")
    if not isinstance(items, list) or not 1 <= len(items) <= TRAJECTORY_BATCH_MAX:
        raise InvalidInput(
            (Violation("trajectories", f"must be a list of 1-{TRAJECTORY_BATCH_MAX}"),)
        )
    parsed: list[Trajectory] = []
    violations: list[Violation] = []
    seen: dict[str, tuple[int, Trajectory]] = {}
    for index, item in enumerate(items):
        trajectory, problems = parse_trajectory(f"trajectories[{index}]", item)
        violations += problems
        if trajectory is None:
            continue
        first, earlier = seen.setdefault(trajectory.identity, (index, trajectory))
        if first != index and earlier.encoded() != trajectory.encoded():
            violations.append(
                Violation(
                    f"trajectories[{index}]",
                    f"differs from trajectories[{first}], which has the same identity",
                )
            )
        parsed.append(trajectory)
    if violations:
        raise InvalidInput(tuple(violations[:20]))
    return parsed


def truncate(
    messages: Sequence[Mapping[str, Any]],
    *,
    max_messages: int = TRAJECTORY_MAX_MESSAGES,
    max_bytes: int = TRAJECTORY_MAX_BYTES - 4096,
) -> tuple[list[dict[str, Any]], int, bool]:
    """``(kept, total_messages, complete)`` for a conversation that may be too long: the
    first messages that fit in ``max_messages`` and about ``max_bytes`` of JSON (the first
    message is always kept; content is never cut inside a message), declared so."""
    kept: list[dict[str, Any]] = []
    size = 0
    for message in messages[:max_messages]:
        grown = size + len(orjson.dumps(message, default=str)) + 1
        if kept and grown > max_bytes:
            break
        kept.append(dict(message))
        size = grown
    return kept, len(messages), len(kept) == len(messages)


def selection_rank(trial_id: str) -> int:
    """Where a trial stands when a round keeps the text of only some trials: those of
    lowest rank are kept. It depends on the trial ID alone, so every run of a cohort keeps
    the same trials (and two runs compared side by side show the same ones)."""
    return int.from_bytes(hashlib.sha256(trial_id.encode()).digest()[:8], "big", signed=True)


def evaluation_text_cap(expected: int | None, text_samples: int | None) -> int:
    """How many trials of a round keep their text: the job's own cap when it declared one,
    else every trial of a cohort of at most 128 (an undeclared round keeps 128), else 32."""
    if text_samples is not None:
        return text_samples
    if expected is None or expected <= EVAL_TEXT_ALL_MAX_TRIALS:
        return EVAL_TEXT_ALL_MAX_TRIALS
    return EVAL_TEXT_SAMPLED_TRIALS


def may_be_selected(trial_id: str, cap: int, expected: int | None) -> bool:
    """Whether the SDK should upload a trial's text at all: the server makes the exact
    choice (the ``cap`` trials of lowest rank); this skips the trials far outside it, with
    a margin of four times the expected share."""
    if cap <= 0:
        return False
    if expected is None or expected <= cap:
        return True
    share = min(1.0, 4 * cap / expected)
    return (selection_rank(trial_id) + 2**63) < share * 2**64


T = TypeVar("T")


def stratified(by_category: Mapping[Category, Sequence[T]], cap: int) -> list[T]:
    """At most ``cap`` rollouts of one step, taken in turn from each category (failure,
    anomaly, low reward, invalid reward, representative), each in the order it came."""
    queues = [list(by_category.get(category, ())) for category in CATEGORIES]
    chosen: list[T] = []
    for layer in itertools.zip_longest(*queues):
        for item in layer:
            if item is not None and len(chosen) < cap:
                chosen.append(item)
    return chosen
