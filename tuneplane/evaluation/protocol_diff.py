"""Which keys of two rounds' recorded protocol settings differ: the reason behind a
``settings_digest_mismatch``, named key by key.

Two JSON documents are compared by key path (``settings.trial_config.agent.name``; a list
item is ``[i]``): a path only the right has is ``added``, one only the left has ``removed``,
one whose values differ ``changed``. Values are shown as JSON text, cut at
:data:`VALUE_SHOWN_CHARS`. A redacted value (``[redacted]``) is never compared: two of them
may hide different secrets, so their paths are listed apart (``redacted``), and a mismatch
whose only candidates are there says so rather than "no difference".

>>> [d.path for d in differences({"a": 1, "b": {"c": 2}}, {"a": 1, "b": {"c": 3}})]
['b.c']
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, Literal

from tuneplane.contract.secrets import REDACTED

#: Characters of each value shown.
VALUE_SHOWN_CHARS: Final = 200
#: Differences listed at most (the rest counted).
DIFFERENCES_SHOWN: Final = 100

Change = Literal["added", "removed", "changed"]


@dataclass(frozen=True, slots=True)
class KeyDifference:
    path: str
    change: Change
    #: The value on each side as JSON text (None where the path is absent).
    left: str | None
    right: str | None


def _text(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= VALUE_SHOWN_CHARS else text[: VALUE_SHOWN_CHARS - 1] + "…"


def _leaves(value: Any, path: str, into: dict[str, Any]) -> None:
    """Every leaf of ``value`` by its key path; an empty object or list is a leaf."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _leaves(item, f"{path}.{key}" if path else str(key), into)
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            _leaves(item, f"{path}[{index}]", into)
    else:
        into[path] = value


def leaves(document: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    _leaves(document, "", found)
    return found


def differences(left: dict[str, Any], right: dict[str, Any]) -> list[KeyDifference]:
    """The key paths whose values differ, in path order (redacted ones left out)."""
    a, b = leaves(left), leaves(right)
    found: list[KeyDifference] = []
    for path in sorted(a.keys() | b.keys()):
        if REDACTED in (a.get(path), b.get(path)) and path in a and path in b:
            continue
        if path not in a:
            found.append(KeyDifference(path, "added", None, _text(b[path])))
        elif path not in b:
            found.append(KeyDifference(path, "removed", _text(a[path]), None))
        elif a[path] != b[path] or type(a[path]) is not type(b[path]):
            found.append(KeyDifference(path, "changed", _text(a[path]), _text(b[path])))
    return found


def redacted_paths(left: dict[str, Any], right: dict[str, Any]) -> list[str]:
    """Paths redacted on both sides: their values cannot be compared."""
    a, b = leaves(left), leaves(right)
    return sorted(p for p in a.keys() & b.keys() if REDACTED in (a[p], b[p]))
