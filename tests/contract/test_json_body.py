"""``decode_json_body``: repeated keys, nesting and NaN markers, and the stored-JSON rules of
``contract/validation.py``. Pure Python, no server.

Limits are literals here on purpose: these tests pin the published contract.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tuneplane.contract.errors import InvalidInput, MalformedRequest
from tuneplane.contract.json_body import NotFinite, decode_json_body
from tuneplane.contract.observations import parse_observations
from tuneplane.contract.protocol import parse_run_create
from tuneplane.contract.validation import json_problem

PROPERTY = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def refused(raw: bytes) -> MalformedRequest:
    with pytest.raises(MalformedRequest) as caught:
        decode_json_body(raw)
    assert caught.value.status == 400
    return caught.value


def nested(levels: int, leaf: str = "1") -> str:
    return '{"a":' * levels + leaf + "}" * levels


# --- repeated keys ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b'{"logs": [], "logs": []}', "logs"),
        (b'{"logs": [{"step": -5, "step": 3}]}', "logs[0].step"),
        (b'{"a": {"x y": 1, "x y": 2}}', 'a["x y"]'),
        (b'{"a": [0, {"b": [{"c": 1, "d": 2, "c": 1}]}]}', "a[1].b[0].c"),
        # The same key and value twice is still two keys: nothing is guessed.
        (b'{"s": 1, "s": 1}', "s"),
        # A repeated key next to a string whose colons would make up for it.
        (b'{"t": "a:b", "k": 1, "k": 2, "u": "\\u003a"}', "k"),
        # The lenient path (a NaN literal elsewhere) sees repeats too.
        (b'{"v": NaN, "w": {"k": 1, "k": 2}}', "w.k"),
    ],
)
def test_a_repeated_key_is_refused_with_its_path(raw: bytes, field: str) -> None:
    error = refused(raw)
    (violation,) = error.violations
    assert violation.field == field
    assert violation.rule.startswith("duplicate key")
    assert error.message == f"{field}: {violation.rule}"


def test_the_first_repeat_in_document_order_is_named() -> None:
    error = refused(b'{"a": {"x": 1, "x": 2}, "b": {"y": 1, "y": 2}}')
    assert error.violations[0].field == "a.x"


def test_colons_and_escapes_in_strings_are_not_repeats() -> None:
    body = {"t": "a: b: c", "u": ":", "k": "x", "nested": [{"k": "1:2"}, {"k": "\u00e9:"}]}
    assert decode_json_body(orjson.dumps(body)) == body
    assert decode_json_body(json.dumps(body).encode()) == body  # ASCII escapes
    assert decode_json_body(b'{"a": "\\u003a", "b": "\\u003A"}') == {"a": ":", "b": ":"}


_KEYS = st.text(alphabet='ab:"\\\u00e9 ', min_size=0, max_size=3)
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet='ab:"\\\u00e9{}[], ', max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=20,
)


def _encode(value: Any, repeat: list[str], ascii_only: bool) -> str:
    """JSON text of ``value``; the first object met with a key gets that key repeated."""
    if isinstance(value, list):
        return "[" + ",".join(_encode(v, repeat, ascii_only) for v in value) + "]"
    if isinstance(value, dict):
        pairs = [
            f"{json.dumps(k, ensure_ascii=ascii_only)}:{_encode(v, repeat, ascii_only)}"
            for k, v in value.items()
        ]
        if pairs and not repeat:
            first = next(iter(value))
            repeat.append(first)
            pairs.append(f"{json.dumps(first, ensure_ascii=ascii_only)}:0")
        return "{" + ",".join(pairs) + "}"
    return json.dumps(value, ensure_ascii=ascii_only)


@PROPERTY
@given(_JSON, st.booleans())
def test_the_fast_check_never_misses_a_repeat_nor_invents_one(value: Any, ascii_only: bool) -> None:
    assert decode_json_body(json.dumps(value, ensure_ascii=ascii_only).encode()) == value
    repeat: list[str] = []
    text = _encode(value, repeat, ascii_only)
    if repeat:
        assert refused(text.encode()).violations[0].rule.startswith("duplicate key")


# --- nesting and numbers ----------------------------------------------------------------------


def test_bodies_nest_at_most_512_levels_without_recursion_errors() -> None:
    assert decode_json_body(("[" * 512 + "]" * 512).encode())
    for levels in (513, 900, 1_100, 100_000):
        error = refused(("[" * levels + "]" * levels).encode())
        assert error.message == "body: nested deeper than 512 levels of objects and lists"
    refused(("[NaN," * 2_000 + "1" + "]" * 2_000).encode())


def test_both_decoders_read_integers_alike() -> None:
    wide = "123456789012345678901234567890"
    fast = decode_json_body(f'{{"a": {wide}, "b": 18446744073709551615}}'.encode())
    lenient = decode_json_body(f'{{"a": {wide}, "b": 18446744073709551615, "c": NaN}}'.encode())
    assert fast == {"a": float(wide), "b": 2**64 - 1}
    assert {k: lenient[k] for k in "ab"} == fast
    assert isinstance(lenient["c"], NotFinite)


def test_stored_json_nests_at_most_32_levels() -> None:
    assert json_problem(json.loads(nested(32)), "config") is None
    problem = json_problem(json.loads(nested(33)), "config")
    assert problem is not None
    assert (problem.field, problem.rule) == (
        "config",
        "must nest at most 32 levels of objects and lists",
    )


@pytest.mark.parametrize(
    ("text", "field", "rule"),
    [
        ('{"lr": NaN}', "config.lr", "not a finite number (NaN)"),
        ('{"a": [1, {"b": -Infinity}]}', "config.a[1].b", "not a finite number (-Infinity)"),
        ('{"a": 1e999}', "config.a", "not a finite number"),
    ],
)
def test_stored_json_holds_only_finite_numbers(text: str, field: str, rule: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_run_create(decode_json_body(f'{{"run": "r", "config": {text}}}'.encode()))
    assert [(v.field, v.rule) for v in caught.value.violations] == [(field, rule)]


def test_a_run_config_of_300_levels_is_refused_naming_the_limit() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_run_create(decode_json_body(f'{{"run": "r", "config": {nested(300)}}}'.encode()))
    assert str(caught.value.violations[0]) == (
        "config: must nest at most 32 levels of objects and lists"
    )


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_observation_fields_are_named(literal: str) -> None:
    event = f'{{"event_id": "e", "type": "event", "name": "n", "fields": {{"x": {literal}}}}}'
    raw = f'{{"events": [{event}]}}'
    with pytest.raises(InvalidInput) as caught:
        parse_observations(decode_json_body(raw.encode()))
    (violation,) = caught.value.violations
    assert violation.field == "events[0].fields.x"
    assert violation.rule.startswith("not a finite number")


def test_an_observation_with_deep_unknown_parts_is_refused_not_crashed() -> None:
    junk = "[" * 300 + "]" * 300
    raw = f'{{"events": [{{"event_id": "e", "type": "event", "name": "n", "junk": {junk}}}]}}'
    with pytest.raises(InvalidInput) as caught:
        parse_observations(decode_json_body(raw.encode()))
    assert str(caught.value.violations[0]) == (
        "events[0]: must nest at most 32 levels of objects and lists"
    )
