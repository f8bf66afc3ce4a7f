"""What a round's declaration records beside its digests: the protocol settings its settings
digest was taken over (``protocol``), so two rounds whose digests differ can say which keys
differ, and its planned trial IDs (``planned_trials``), so the trials that never got an
outcome are named, not only counted.

Both are optional and bounded, so a declaration stays one observation (16 KiB):

- ``protocol``: a JSON object of at most :data:`PROTOCOL_RECORD_MAX_BYTES` as canonical JSON,
  with the value of every secret-named key and every secret-shaped string replaced by
  ``[redacted]`` (:func:`redacted`); the server redacts again, so nothing a producer forgot
  is kept. A producer whose settings are larger records none (:func:`protocol_record`);
- ``planned_trials``: every planned trial ID (exactly ``expected`` distinct IDs), when they
  are at most :data:`PLANNED_TRIALS_MAX` and fit :data:`PLANNED_TRIALS_MAX_BYTES` as JSON
  (:func:`planned_record`); a larger cohort lists none, and its trials not reported stay a
  count.

>>> protocol_record({"agent": {"name": "terminus-2", "api_key": "sk-…"}})
{'agent': {'name': 'terminus-2', 'api_key': '[redacted]'}}
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any, Final

from tuneplane.contract.ids import id_problem
from tuneplane.contract.secrets import REDACTED, SECRET_SHAPES, is_secret_name

#: The recorded protocol settings, as canonical JSON.
PROTOCOL_RECORD_MAX_BYTES: Final = 8 * 1024
#: Planned trial IDs a declaration lists at most, and their size as a JSON list.
PLANNED_TRIALS_MAX: Final = 256
PLANNED_TRIALS_MAX_BYTES: Final = 6 * 1024


def canonical_json(value: object) -> str:
    """``value`` as canonical JSON: sorted keys, no spaces, UTF-8 kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_digest(value: object) -> str:
    """SHA-256 of ``value`` as canonical JSON (what every declared digest is taken over)."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def redacted(value: Any, name: str = "") -> Any:
    """A copy of JSON-like settings with the value under each secret-named key, and each
    string shaped like a token, replaced by ``[redacted]`` (numbers and booleans never are)."""
    if isinstance(value, dict):
        return {str(key): redacted(item, str(key)) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redacted(item, name) for item in value]
    if isinstance(value, str) and (is_secret_name(name) or SECRET_SHAPES.search(value)):
        return REDACTED
    return value


def record_size(value: object) -> int:
    return len(canonical_json(value).encode())


def protocol_record(protocol: dict[str, Any]) -> dict[str, Any] | None:
    """What a declaration records of the settings its settings digest was taken over:
    redacted, or None when it is larger than :data:`PROTOCOL_RECORD_MAX_BYTES`."""
    record = redacted(protocol)
    return record if record_size(record) <= PROTOCOL_RECORD_MAX_BYTES else None


def planned_record(trial_ids: Iterable[str]) -> list[str] | None:
    """The planned trial IDs a declaration lists (sorted), or None when there are more
    than the limits take."""
    planned = sorted(set(trial_ids))
    if len(planned) > PLANNED_TRIALS_MAX or record_size(planned) > PLANNED_TRIALS_MAX_BYTES:
        return None
    return planned


def protocol_problem(value: object) -> str | None:
    """Why ``value`` cannot be a declaration's ``protocol``, or None when it can."""
    if not isinstance(value, dict):
        return "must be an object: the settings the settings digest was taken over"
    if record_size(value) > PROTOCOL_RECORD_MAX_BYTES:
        return (
            f"is at most {PROTOCOL_RECORD_MAX_BYTES // 1024} KiB as canonical JSON; "
            "record none when the settings are larger"
        )
    return None


def planned_problem(value: object, expected: object) -> str | None:
    """Why ``value`` cannot be a declaration's ``planned_trials``, or None when it can."""
    if not isinstance(value, list) or any(id_problem(item) for item in value):
        return "must be a list of trial IDs (1-128 ASCII letters, digits, '_' or '-')"
    if len(value) > PLANNED_TRIALS_MAX or record_size(value) > PLANNED_TRIALS_MAX_BYTES:
        return (
            f"lists at most {PLANNED_TRIALS_MAX} trial IDs in "
            f"{PLANNED_TRIALS_MAX_BYTES // 1024} KiB; a larger cohort lists none"
        )
    if len(set(value)) != len(value):
        return "lists a trial ID twice"
    if isinstance(expected, int) and len(value) != expected:
        return f"lists {len(value)} trial IDs but the population declares {expected}"
    return None


def content_mark(value: object) -> str | None:
    """A recorded part as a declaration's content compares it (a short digest: a re-send
    must repeat it; a conflict names the part without printing kilobytes)."""
    if value is None:
        return None
    size = f"{len(value)} IDs, " if isinstance(value, list) else ""
    return f"{size}sha256 {canonical_digest(value)[:16]}"


def recorded(
    protocol: dict[str, Any] | None, planned: Iterable[str] | None, expected: int
) -> dict[str, Any]:
    """The ``protocol`` and ``planned_trials`` a producer adds to its declaration: each
    that it knows and that fits (a list of other than ``expected`` IDs is left out)."""
    found: dict[str, Any] = {}
    if protocol is not None and (record := protocol_record(protocol)) is not None:
        found["protocol"] = record
    ids = None if planned is None else planned_record(planned)
    if ids is not None and len(ids) == expected:
        found["planned_trials"] = ids
    return found
