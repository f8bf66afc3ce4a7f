"""The rows of a Trackio 0.40.0 project database, as tuneplane holds them: names, times,
values and IDs, each with the rule it is held to. What cannot be held is left out and
noted (file, field, rule), never a reason to stop: the rest of a run is worth keeping.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from datetime import UTC, datetime
from typing import Final

import orjson

from tuneplane.contract.ids import id_for_name, id_problem, metric_name_problem
from tuneplane.contract.protocol import InvalidKind
from tuneplane.contract.trackio import flatten_metrics
from tuneplane.contract.validation import finite_float

#: How Trackio writes the numbers JSON cannot carry (``serialize_values``), and what an
#: invalid point of each kind is here.
_INVALID: Final[dict[str, InvalidKind]] = {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}
#: Notes printed at most; the rest are counted.
MAX_NOTES: Final = 20


class Notes:
    """What was left out or changed, counted by (file, field, rule)."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str, str]] = Counter()

    def add(self, file: str, field: str, rule: str) -> None:
        self.counts[file, field, rule] += 1

    def lines(self, limit: int = MAX_NOTES) -> list[str]:
        found = []
        for (file, field, rule), count in list(self.counts.items())[:limit]:
            times = f" ({count} rows)" if count > 1 else ""
            found.append(f"{file}: {field}: {rule}{times}" if field else f"{file}: {rule}{times}")
        more = len(self.counts) - limit
        return found + ([f"and {more} more kinds of note"] if more > 0 else [])


def stored_name(name: str) -> str:
    """``name`` as a tuneplane ID, mapped as every path maps names
    (:func:`tuneplane.contract.ids.id_for_name`); a name with no ID character at all starts
    with ``trackio``.

    >>> stored_name("run-1"), stored_name("my run")
    ('run-1', 'my-run-d33e7609')
    """
    return id_for_name(name, fallback="trackio")


def parse_time(raw: object) -> float | None:
    """Seconds since the epoch of an ISO 8601 time as Trackio writes it (UTC when it names
    no zone), or None when it is none."""
    if not isinstance(raw, str):
        return None
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def event_id(raw: object, *content: object) -> str:
    """The row's own ``log_id``/``alert_id`` (what the Trackio client also sends over HTTP,
    so an event that reached tuneplane both ways is stored once), else one derived from
    the row's content, the same on every import."""
    if isinstance(raw, str) and id_problem(raw) is None:
        return raw
    text = "\x00".join(str(part) for part in (raw, *content))
    return f"trackio-{hashlib.sha256(text.encode()).hexdigest()[:32]}"


def load_json(raw: object) -> object:
    """A JSON column: orjson, else the standard library (which also reads the ``NaN``
    literals older writers left); None when it is not JSON."""
    if not isinstance(raw, str | bytes):
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _invalid_kind(value: object) -> InvalidKind | None:
    if isinstance(value, str):
        return _INVALID.get(value)
    if type(value) is float and not math.isfinite(value):
        return "nan" if math.isnan(value) else "inf" if value > 0 else "-inf"
    return None


def _kind(value: object) -> str:
    if isinstance(value, dict) and isinstance(value.get("_type"), str):
        return f"{value['_type']}: not stored (tuneplane stores no Trackio media yet)"
    if isinstance(value, bool):
        return "a boolean, not a number; not stored"
    if value is None:
        return "null, not a number; not stored"
    return f"a {type(value).__name__}, not a number; not stored"


def row_values(
    notes: Notes, file: str, table: str, raw: object, prefix: str = ""
) -> tuple[dict[str, float], dict[str, InvalidKind]] | None:
    """A row's values (nested objects flattened with ``/``, as over HTTP) and its NaN and
    infinities; None (noted) when the column is no JSON object."""
    found = load_json(raw)
    if not isinstance(found, dict):
        notes.add(file, f"{table}.metrics", "not a JSON object; the row is not imported")
        return None
    values: dict[str, float] = {}
    invalid: dict[str, InvalidKind] = {}
    for _, name, value in flatten_metrics("", prefix, found):
        if (problem := metric_name_problem(name)) is not None:
            notes.add(file, f"{table}.metrics", f"a name that {problem}; not stored")
        elif (number := finite_float(value)) is not None:
            values[name] = number
        elif (kind := _invalid_kind(value)) is not None:
            invalid[name] = kind
        else:
            notes.add(file, f"{table} {name!r}", _kind(value))
    return values, invalid


def cut_text(notes: Notes, file: str, field: str, raw: object, limit: int) -> str | None:
    """Alert text as tuneplane holds it: NUL characters (which PostgreSQL cannot hold)
    removed, cut to ``limit`` characters; each change noted."""
    if raw is None:
        return None
    text = raw if isinstance(raw, str) else str(raw)
    if "\x00" in text:
        notes.add(file, field, "NUL characters removed")
        text = text.replace("\x00", "")
    if len(text) > limit:
        notes.add(file, field, f"cut to its first {limit} characters")
        text = text[:limit]
    return text
