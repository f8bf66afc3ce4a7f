"""Trajectories on the SDK side: the document ``trajectory()`` builds and checks on the
caller's thread, the explicit truncation helper, and the evaluation text cap's prefilter.

The check is the server's own (``tuneplane.contract.trajectories.parse_trajectory``): a
document the SDK queues is one the server accepts, and a refused one is refused at the
call. The document is encoded to JSON at once, which both copies it (the caller may change
its messages afterwards) and gives the size that the queue and the batches are bounded by.
A conversation over 1,024 messages or 1 MiB is refused, never cut behind the caller's
back: :func:`truncate_messages` cuts it and says so in the document.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

import orjson

from tuneplane.client.queue import step_value
from tuneplane.contract.limits import TRAJECTORY_MAX_BYTES, TRAJECTORY_MAX_MESSAGES
from tuneplane.contract.trajectories import (
    Category,
    Scope,
    evaluation_text_cap,
    may_be_selected,
    parse_trajectory,
    truncate,
)

#: A refused document's fields are named from here: ``trajectory.messages[3].role``.
PATH: Final = "trajectory"
_HOW_TO_CUT: Final = (
    "cut it explicitly with tuneplane.truncate_messages(messages), which declares "
    "complete=False and the total_messages it had"
)
#: Fields sent in this order, and only when given.
_OPTIONAL: Final = (
    "round_id",
    "trial_id",
    "trial_attempt",
    "step",
    "trajectory_id",
    "diagnostic",
    "reward",
    "reward_invalid",
    "reward_missing",
    "collection_policy",
    "consumption_policy",
    "metrics",
)


class Refused(ValueError):
    """A document that breaks a rule; ``rule`` names the first one (logged once each)."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule


@dataclass(frozen=True, slots=True)
class Prepared:
    """A checked document as it will be sent (``body``, its JSON) and what the sender
    sorts it by."""

    body: bytes
    scope: Scope
    step: int | None
    category: Category | None
    round_id: str | None
    trial_id: str | None

    @property
    def size(self) -> int:
        return len(self.body)


class Truncated(NamedTuple):
    """What :func:`truncate_messages` kept, and what ``trajectory()`` must say of it."""

    messages: list[dict[str, Any]]
    total_messages: int
    complete: bool


def truncate_messages(
    messages: Sequence[Mapping[str, Any]],
    *,
    max_messages: int = TRAJECTORY_MAX_MESSAGES,
    max_bytes: int = TRAJECTORY_MAX_BYTES - 4096,
) -> Truncated:
    """The first messages of a conversation that fit in one trajectory (at most
    ``max_messages`` and about ``max_bytes`` of JSON; a message is never cut inside), with
    the ``total_messages`` and ``complete`` to declare. Pass all three to
    ``trajectory()``:

    >>> kept = tuneplane.truncate_messages(messages)
    >>> tuneplane.trajectory(scope="training", step=7, trajectory_id="r3", **kept._asdict())
    True

    The first message is always kept, so one message over 1 MiB still makes a document
    that ``trajectory()`` refuses. ValueError for limits outside 1..1,024 messages and
    1..1 MiB."""
    if not (isinstance(max_messages, int) and 1 <= max_messages <= TRAJECTORY_MAX_MESSAGES):
        raise ValueError(f"max_messages must be 1..{TRAJECTORY_MAX_MESSAGES}")
    if not (isinstance(max_bytes, int) and 1 <= max_bytes <= TRAJECTORY_MAX_BYTES):
        raise ValueError(f"max_bytes must be 1..{TRAJECTORY_MAX_BYTES}")
    kept, total, complete = truncate(list(messages), max_messages=max_messages, max_bytes=max_bytes)
    return Truncated(kept, total, complete)


def _messages(messages: object) -> list[object]:
    """A private list of the messages, each mapping a dict (its values are copied when the
    document is encoded)."""
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
        raise Refused("messages", f"{PATH}.messages: must be a list of messages")
    return [dict(m) if isinstance(m, Mapping) else m for m in messages]


def _reward(value: object) -> tuple[object, bool]:
    """``(reward, reward_invalid)``: a tensor or NumPy scalar as a float, NaN and ±inf as
    no reward that is marked invalid; anything else as it is, for the check to refuse."""
    if value.__class__ is bool:
        return value, False
    if value.__class__ is not int:
        try:
            value = float(value)  # type: ignore[arg-type]
        except Exception:
            return value, False
    if isinstance(value, float) and not math.isfinite(value):
        return None, True
    return value, False


def document(scope: object, messages: object, fields: Mapping[str, object]) -> dict[str, Any]:
    """The wire document of one ``trajectory()`` call: given fields only, integers from
    NumPy or PyTorch read as ``int``, the defaults filled in."""
    copied = _messages(messages)
    if len(copied) > TRAJECTORY_MAX_MESSAGES:
        raise Refused(
            "too many messages",
            f"{PATH}.messages: {len(copied)} messages, more than {TRAJECTORY_MAX_MESSAGES}: "
            + _HOW_TO_CUT,
        )
    given = {name: value for name, value in fields.items() if value is not None}
    if scope == "evaluation":
        given.setdefault("trial_attempt", 0)
    if "reward" in given:
        given["reward"], invalid = _reward(given["reward"])
        if invalid:
            given["reward_invalid"] = True
    metrics = given.get("metrics")
    if isinstance(metrics, Mapping):
        given["metrics"] = dict(metrics)
    for name in ("step", "trial_attempt", "collection_policy", "consumption_policy"):
        if name in given:
            given[name] = step_value(given[name])
    total = step_value(given.pop("total_messages", len(copied)))
    complete = given.pop("complete", total == len(copied))
    item: dict[str, Any] = {"scope": scope}
    item.update((name, given.pop(name)) for name in _OPTIONAL if name in given)
    item.update(given)  # anything else: refused by the check, by name
    item["messages"] = copied
    item["total_messages"] = total
    item["complete"] = complete
    return item


def prepare_trajectory(scope: object, messages: object, fields: Mapping[str, object]) -> Prepared:
    """The checked document, encoded; :class:`Refused` naming the first broken rule."""
    item = document(scope, messages, fields)
    try:
        body = orjson.dumps(item, option=orjson.OPT_SERIALIZE_NUMPY)
    except TypeError as exc:  # a value JSON cannot carry, or nesting past 255 levels
        raise Refused("not JSON", f"{PATH}: cannot be sent as JSON ({exc})") from None
    if len(body) > TRAJECTORY_MAX_BYTES:
        raise Refused(
            "too large",
            f"{PATH}: {len(body)} bytes, more than {TRAJECTORY_MAX_BYTES // 1024} KiB: "
            + _HOW_TO_CUT,
        )
    parsed, violations = parse_trajectory(PATH, orjson.loads(body))
    if parsed is None:
        shown = "; ".join(str(v) for v in violations[:5])
        more = f" (and {len(violations) - 5} more)" if len(violations) > 5 else ""
        raise Refused(violations[0].rule if violations else "invalid", shown + more)
    return Prepared(
        body, parsed.scope, parsed.step, parsed.category, parsed.round_id, parsed.trial_id
    )


class EvaluationCaps:
    """Which evaluation trials' text is worth uploading: the server keeps the text of the
    ``cap`` trials of lowest rank in a round, so the SDK leaves out those far outside it.
    ``override`` is ``TUNEPLANE_JOB_VAL_UPLOAD_SAMPLES``; a round's ``expected`` is known
    when this reporter declared its population."""

    #: Rounds remembered; beyond it the oldest is forgotten (and its trials all uploaded,
    #: as for a round declared elsewhere: the server still chooses exactly).
    MAX_ROUNDS: Final = 4096

    def __init__(self, override: int | None) -> None:
        self.override = override
        self._expected: dict[str, int] = {}
        self._lock = threading.Lock()

    def declared(self, round_id: object, expected: object) -> None:
        """This reporter queued the population of ``round_id``."""
        expected = step_value(expected)
        if not (isinstance(round_id, str) and isinstance(expected, int)):
            return
        with self._lock:
            if round_id in self._expected:  # the first declaration of a round wins
                return
            if len(self._expected) >= self.MAX_ROUNDS:
                del self._expected[next(iter(self._expected))]
            self._expected[round_id] = expected

    def uploads(self, prepared: Prepared) -> bool:
        """Whether ``prepared`` goes to the server (a training rollout always does here;
        its step's cap is applied by the sender)."""
        if prepared.scope != "evaluation":
            return True
        assert prepared.round_id is not None
        assert prepared.trial_id is not None
        with self._lock:
            expected = self._expected.get(prepared.round_id)
        cap = evaluation_text_cap(expected, self.override)
        return may_be_selected(prepared.trial_id, cap, expected)
