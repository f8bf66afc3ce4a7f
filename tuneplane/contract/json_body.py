"""Decoding request bodies: fast strict JSON, with NaN/Infinity kept visible to validation."""

from __future__ import annotations

import json
from typing import Any

import orjson

from tuneplane.contract.errors import MalformedRequest, Violation


class NotFinite:
    """Stands in for NaN/Infinity literals so the validator can name their field."""

    def __init__(self, literal: str) -> None:
        self.literal = literal


def _reject_constant(literal: str) -> NotFinite:
    return NotFinite(literal)


def malformed(rule: str) -> MalformedRequest:
    return MalformedRequest(f"body: {rule}", (Violation("body", rule),))


def decode_json_body(raw: bytes) -> Any:
    """Parse a request body; NaN/Infinity literals survive as markers for validation."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    # orjson is strict JSON; Python's json.dumps writes NaN/Infinity, which we want to
    # refuse with the field's name rather than as a syntax error.
    try:
        decoded = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise malformed(f"not valid JSON ({exc})") from None
    # The lenient parser also lets through lone UTF-16 surrogates ("\\ud800"): text that is
    # not Unicode could be stored by no engine and shown by no page.
    try:
        json.dumps(decoded, ensure_ascii=False, default=lambda _marker: None).encode()
    except UnicodeEncodeError:
        raise malformed("a string holds a lone UTF-16 surrogate, which is not Unicode") from None
    return decoded
