"""Decoding request bodies: fast strict JSON that is exact about what the client sent.

orjson decodes every body first. Two things it cannot show are checked without giving up its
speed: a key repeated in one object (orjson keeps the last one, so what the client meant
would be guessed) and NaN/Infinity literals (a syntax error to orjson, where we want the
validator to name their field). Only a body that may hold either goes through the standard
library's decoder, which sees every key of every object.
"""

from __future__ import annotations

import json
from typing import Any, Final

import orjson

from tuneplane.contract.errors import MalformedRequest, Violation
from tuneplane.contract.limits import JSON_BODY_MAX_DEPTH

#: orjson reads integers of 64 bits (signed, or unsigned) and wider ones as floats.
_INT_MIN: Final = -(2**63)
_INT_END: Final = 2**64
DEPTH_RULE: Final = f"nested deeper than {JSON_BODY_MAX_DEPTH} levels of objects and lists"


class NotFinite:
    """Stands in for NaN/Infinity literals so the validator can name their field."""

    def __init__(self, literal: str) -> None:
        self.literal = literal


def malformed(rule: str) -> MalformedRequest:
    return MalformedRequest(f"body: {rule}", (Violation("body", rule),))


def key_path(prefix: str, key: str) -> str:
    """The path of ``key`` in the object at ``prefix``: ``logs[0].step``, ``config["a b"]``."""
    if key.replace("_", "a").replace("-", "a").replace("/", "a").isalnum() and key.isascii():
        return f"{prefix}.{key}" if prefix else key
    return f"{prefix}[{json.dumps(key)}]"


def decode_json_body(raw: bytes) -> Any:
    """Parse a request body; NaN/Infinity literals survive as ``NotFinite`` markers.

    Raises ``MalformedRequest`` (400) for text that is not JSON, a key repeated in an object
    (naming its path: ``logs[0].step: duplicate key``), a lone UTF-16 surrogate, or nesting
    deeper than ``JSON_BODY_MAX_DEPTH``.
    """
    try:
        decoded = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _decode_exactly(raw)
    if _may_repeat_a_key(raw, decoded):
        return _decode_exactly(raw)
    return decoded


def _may_repeat_a_key(raw: bytes, decoded: Any) -> bool:
    """Whether orjson may have dropped a repeated key, judged at C speed.

    Outside strings a colon follows each key and nothing else; orjson writes the strings'
    colons back as they were. So when orjson's own encoding of the result holds as many
    colons as the body, no key was dropped. An escaped colon (``\\u003a``) is the only way a
    string gains one in decoding. orjson writes no more than 254 levels: a deeper body is
    left to the exact decoder, which refuses it.
    """
    colons = raw.count(b":")
    if b"\\u003a" in raw or b"\\u003A" in raw:
        return True
    try:
        return orjson.dumps(decoded).count(b":") != colons
    except TypeError:
        return True


def _int(literal: str) -> int | float:
    """An integer read as orjson reads it, so both decoders give the same values."""
    if len(literal) <= 20:
        value = int(literal)
        if _INT_MIN <= value < _INT_END:
            return value
    return float(literal)


def _decode_exactly(raw: bytes) -> Any:
    """The standard library's decoder, which reports what orjson cannot."""
    repeated: dict[int, str] = {}

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            repeated[id(obj)] = _first_repeated(pairs)
        return obj

    try:
        decoded = json.loads(
            raw, object_pairs_hook=pairs_hook, parse_constant=NotFinite, parse_int=_int
        )
    except RecursionError:
        raise malformed(DEPTH_RULE) from None
    except ValueError as exc:
        raise malformed(f"not valid JSON ({exc})") from None
    _check_tree(decoded, repeated)
    return decoded


def _first_repeated(pairs: list[tuple[str, Any]]) -> str:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return key
        seen.add(key)
    raise AssertionError("no key repeats")


def _check_tree(decoded: Any, repeated: dict[int, str]) -> None:
    """Walk the body in document order (without recursion, however deep it is) for the
    first repeated key, string that is not Unicode, or level past the limit."""
    stack: list[tuple[Any, str, int]] = [(decoded, "", 1)]
    while stack:
        node, path, depth = stack.pop()
        if isinstance(node, str):
            _check_text(node, path)
            continue
        if not isinstance(node, dict | list):
            continue
        if depth > JSON_BODY_MAX_DEPTH:
            raise malformed(DEPTH_RULE)
        children: list[tuple[Any, str, int]] = []
        if isinstance(node, dict):
            key = repeated.get(id(node))
            if key is not None:
                where = key_path(path, key)
                rule = "duplicate key (a key may appear once in an object)"
                raise MalformedRequest(f"{where}: {rule}", (Violation(where, rule),))
            for name, value in node.items():
                _check_text(name, path)
                children.append((value, key_path(path, name), depth + 1))
        else:
            children = [(value, f"{path}[{i}]", depth + 1) for i, value in enumerate(node)]
        stack.extend(reversed(children))


def _check_text(text: str, path: str) -> None:
    # The lenient parser lets lone UTF-16 surrogates ("\ud800") through: text that is not
    # Unicode could be stored by no engine and shown by no page.
    try:
        text.encode()
    except UnicodeEncodeError:
        rule = "a string holds a lone UTF-16 surrogate, which is not Unicode"
        raise MalformedRequest(
            f"{path or 'body'}: {rule}", (Violation(path or "body", rule),)
        ) from None
