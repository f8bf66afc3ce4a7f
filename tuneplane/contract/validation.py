"""Small checks shared by the wire contracts: each returns a problem or None."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from tuneplane.contract.errors import Violation
from tuneplane.contract.ids import id_problem
from tuneplane.contract.json_body import NotFinite, key_path
from tuneplane.contract.limits import JSON_MAX_DEPTH, STEP_MAX

STEP_RULE: Final = f"must be an integer from 0 to {STEP_MAX}"
DEPTH_RULE: Final = f"must nest at most {JSON_MAX_DEPTH} levels of objects and lists"
# PostgreSQL text cannot hold NUL; refusing it keeps both engines alike.
NUL_RULE: Final = "must not contain NUL (\\u0000) characters"


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def finite_float(value: object) -> float | None:
    """The value as a finite float, or None when it is not a finite JSON number."""
    if type(value) is float:
        return value if math.isfinite(value) else None
    if not is_number(value):
        return None
    try:
        as_float = float(value)  # type: ignore[arg-type]
    except OverflowError:
        return None
    return as_float if math.isfinite(as_float) else None


def finite_floats(values: list[Any]) -> list[float | None]:
    """``finite_float`` of each value; at C speed when all are finite numbers (the usual
    case), value by value otherwise."""
    if set(map(type, values)) <= {float, int}:
        try:
            numbers: list[float | None] = list(map(float, values))
        except OverflowError:
            pass
        else:
            if all(map(math.isfinite, numbers)):  # type: ignore[arg-type]
                return numbers
    return [finite_float(value) for value in values]


def are_steps(values: list[Any]) -> bool:
    """Whether every value is a step, checked at C speed."""
    return set(map(type, values)) == {int} and min(values) >= 0 and max(values) <= STEP_MAX


def is_step(value: object) -> bool:
    return type(value) is int and 0 <= value <= STEP_MAX


def is_count(value: object) -> bool:
    """A nonnegative integer that fits a signed 64-bit column."""
    return is_step(value)


def number_rule(value: object) -> str:
    """Why ``value`` is not a finite number, for a violation."""
    if isinstance(value, NotFinite):
        return f"not a finite number ({value.literal})"
    if isinstance(value, bool):
        return "not a finite number (boolean)"
    if value is None:
        return "not a finite number (null)"
    if isinstance(value, str):
        return "not a finite number (string)"
    return "not a finite number"


def json_problem(value: object, path: str) -> Violation | None:
    """Why a JSON value cannot be stored as the client sent it, or None when it can: it
    nests deeper than ``JSON_MAX_DEPTH`` levels, or holds a number JSON cannot carry back to
    a reader (NaN, Infinity, 1e999). Walked without recursion, however deep it is."""
    stack: list[tuple[object, str, int]] = [(value, path, 1)]
    while stack:
        node, where, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > JSON_MAX_DEPTH:
                return Violation(path, DEPTH_RULE)
            if isinstance(node, dict):
                children = [(v, key_path(where, k), depth + 1) for k, v in node.items()]
            else:
                children = [(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(node)]
            stack.extend(reversed(children))
        elif isinstance(node, NotFinite) or (type(node) is float and not math.isfinite(node)):
            return Violation(where, number_rule(node))
    return None


class FieldCheck:
    """Collects the violations of a request, each named ``<path>.<field>`` (by ``field``
    alone without a ``path``): the one collector every parser of a wire format uses."""

    def __init__(self, path: str = "") -> None:
        self.path = path
        self.violations: list[Violation] = []

    def add(self, field: str, rule: str) -> None:
        where = f"{self.path}.{field}" if self.path and field else field or self.path
        self.violations.append(Violation(where, rule))

    def ident(self, item: Mapping[str, Any], key: str) -> str | None:
        """``item[key]`` when it is an ID, else None with the violation noted."""
        return self.id_at(key, item.get(key))

    def id_at(self, field: str, value: object) -> str | None:
        """``value`` when it is an ID, else None with the violation noted at ``field``."""
        problem = id_problem(value)
        if problem:
            self.add(field, "required" if value is None else problem)
            return None
        return str(value)
