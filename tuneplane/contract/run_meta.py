"""What people say about a run besides its data: a display name, a group (the runs of one
sweep or seed set), tags and a free-text note. Their rules and limits, for the run API
(``POST …/runs``, ``PATCH …/runs/{run}``), ``init()`` and ``tuneplane run`` alike.

A run's ID (its address) never changes; the display name is what pages show instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from tuneplane.contract.errors import InvalidInput, Violation
from tuneplane.contract.limits import DISPLAY_NAME_MAX_CHARS

GROUP_MAX_CHARS: Final = 128
TAG_MAX_CHARS: Final = 64
TAGS_MAX: Final = 32
NOTE_MAX_CHARS: Final = 10_000

#: Tags and groups are searched and written into addresses: letters, digits and ``_-.:/+@=``.
_WORD_CHARS: Final = "A-Za-z0-9_.:/+@=-"
_WORD: Final = re.compile(f"[{_WORD_CHARS}]+")
_NOT_WORD: Final = re.compile(f"[^{_WORD_CHARS}]")
WORD_RULE: Final = "letters, digits and _ - . : / + @ = only"

#: The fields ``PATCH …/runs/{run}`` takes.
META_FIELDS: Final = ("display_name", "group", "tags", "note")


@dataclass(frozen=True, slots=True)
class RunMeta:
    """A change of a run's metadata: ``None`` leaves a field as it is; an empty string (an
    empty list for tags) clears it."""

    display_name: str | None = None
    group: str | None = None
    tags: tuple[str, ...] | None = None
    note: str | None = None

    def is_empty(self) -> bool:
        return all(getattr(self, name) is None for name in META_FIELDS)


def _text_problem(value: object, limit: int, *, multiline: bool = False) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    if len(value) > limit:
        return f"must be at most {limit} characters"
    allowed = value.replace("\n", "").replace("\t", "") if multiline else value
    if not allowed.isprintable():
        return "must be printable text" + (" (new lines and tabs allowed)" if multiline else "")
    return None


def word_problem(value: object, limit: int) -> str | None:
    """Why ``value`` is not a tag or group (the empty string clears a group)."""
    if not isinstance(value, str):
        return "must be a string"
    if len(value) > limit:
        return f"must be at most {limit} characters"
    if value and _WORD.fullmatch(value) is None:
        return WORD_RULE
    return None


def as_group(raw: object) -> str | None:
    """Another tool's group name (Trackio's ``init(group=)``) as a group here: each
    character a group may not hold becomes ``-``, cut to ``GROUP_MAX_CHARS``; None for
    anything but text that is not blank."""
    if not isinstance(raw, str) or not raw.strip():
        return None
    return _NOT_WORD.sub("-", raw.strip())[:GROUP_MAX_CHARS]


def _tags(value: object, field: str, violations: list[Violation]) -> tuple[str, ...] | None:
    if not isinstance(value, list | tuple):
        violations.append(Violation(field, "must be a list of strings"))
        return None
    if len(value) > TAGS_MAX:
        violations.append(Violation(field, f"at most {TAGS_MAX} tags"))
        return None
    for index, tag in enumerate(value):
        problem = word_problem(tag, TAG_MAX_CHARS)
        if problem is None and not tag:
            problem = "must not be empty"
        if problem:
            violations.append(Violation(f"{field}[{index}]", problem))
    return tuple(dict.fromkeys(value))


def parse_meta(item: dict[str, object], prefix: str = "") -> RunMeta:
    """The metadata fields of a request body (others are left to the caller); raises
    :class:`InvalidInput` naming every broken rule."""
    violations: list[Violation] = []
    display_name = item.get("display_name")
    if display_name is not None and (p := _text_problem(display_name, DISPLAY_NAME_MAX_CHARS)):
        violations.append(Violation(prefix + "display_name", p))
    group = item.get("group")
    if group is not None and (p := word_problem(group, GROUP_MAX_CHARS)):
        violations.append(Violation(prefix + "group", p))
    note = item.get("note")
    if note is not None and (p := _text_problem(note, NOTE_MAX_CHARS, multiline=True)):
        violations.append(Violation(prefix + "note", p))
    raw_tags = item.get("tags")
    tags = None if raw_tags is None else _tags(raw_tags, prefix + "tags", violations)
    if violations:
        raise InvalidInput(tuple(violations))
    return RunMeta(
        display_name=display_name,  # type: ignore[arg-type]
        group=group,  # type: ignore[arg-type]
        tags=tags,
        note=note,  # type: ignore[arg-type]
    )


def parse_patch(body: object) -> RunMeta:
    """``PATCH …/runs/{run}``: an object of some of :data:`META_FIELDS`, nothing else."""
    if not isinstance(body, dict):
        raise InvalidInput((Violation("body", "must be a JSON object"),))
    unknown = sorted(set(body) - set(META_FIELDS))
    if unknown:
        rule = f"unknown field; a run's {', '.join(META_FIELDS)} can change (its config cannot)"
        raise InvalidInput(tuple(Violation(name, rule) for name in unknown))
    meta = parse_meta(body)
    if meta.is_empty():
        rule = f"name at least one of {', '.join(META_FIELDS)}"
        raise InvalidInput((Violation("body", rule),))
    return meta


def meta_fields(
    group: str | None = None, tags: Sequence[str] | None = None, note: str | None = None
) -> dict[str, object]:
    """The run-create body fields of ``init(group=, tags=, notes=)`` and ``tuneplane run
    --group --tag --note``, checked by the rules above (:class:`InvalidInput` otherwise)."""
    fields: dict[str, object] = {
        name: value
        for name, value in (("group", group), ("tags", tags), ("note", note))
        if value is not None
    }
    if isinstance(tags, tuple):
        fields["tags"] = list(tags)
    parse_meta(fields)
    return fields
