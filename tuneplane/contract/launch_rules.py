"""Effective-configuration rules: a tiny expression language over numbers and names.

A recipe declares checks such as ``global_batch % world_size == 0`` over its merged
parameters and config. Each is parsed once, when the recipe is read (a syntax error is a
problem of the recipe), and evaluated for each launch. Nothing here runs Python: the parser
knows numbers, names, ``true``/``false``, parentheses, ``+ - * / // %``, the comparisons
``== != < <= > >=`` and ``and``, ``or``, ``not``. A name is a parameter or a config key;
``a.b`` looks inside the object ``a``. A rule must come out true or false.

    >>> rule = parse_rule("global_batch % world_size == 0")
    >>> evaluate(rule, {"global_batch": 64, "world_size": 8})
    True
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

#: Characters of one rule, and how deeply it may nest (a person reads it).
RULE_MAX_CHARS: Final = 500
RULE_MAX_DEPTH: Final = 32

Value = bool | int | float


class RuleError(ValueError):
    """A rule that does not parse, or that cannot be evaluated for these inputs."""


@dataclass(frozen=True, slots=True)
class Number:
    value: Value


@dataclass(frozen=True, slots=True)
class Name:
    path: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Unary:
    op: str
    operand: Expr


@dataclass(frozen=True, slots=True)
class Binary:
    op: str
    left: Expr
    right: Expr


Expr = Number | Name | Unary | Binary

_TOKEN: Final = re.compile(
    r"\s*(?:(?P<number>[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)"
    r"|(?P<op>//|==|!=|<=|>=|[-+*/%<>()]))",
    re.ASCII,
)
_KEYWORDS: Final = frozenset({"and", "or", "not", "true", "false"})
_COMPARISONS: Final[dict[str, Callable[[Value, Value], bool]]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _tokens(text: str) -> list[str]:
    tokens, position = [], 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None:
            raise RuleError(f"unexpected {text[position:].strip()[:20]!r}")
        tokens.append(match.group(match.lastgroup or "op"))
        position = match.end()
    return tokens


class _Parser:
    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.position = 0
        self.depth = 0

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise RuleError("ends too early")
        self.position += 1
        return token

    def binary(self, ops: frozenset[str], operand: Callable[[], Expr]) -> Expr:
        left = operand()
        while self.peek() in ops:
            op = self.take()
            left = Binary(op, left, operand())
        return left

    def disjunction(self) -> Expr:
        return self.binary(frozenset({"or"}), self.conjunction)

    def conjunction(self) -> Expr:
        return self.binary(frozenset({"and"}), self.negation)

    def negation(self) -> Expr:
        if self.peek() == "not":
            self.take()
            return Unary("not", self.negation())
        return self.comparison()

    def comparison(self) -> Expr:
        left = self.sum()
        if self.peek() in _COMPARISONS:
            op = self.take()
            left = Binary(op, left, self.sum())
            if self.peek() in _COMPARISONS:
                raise RuleError("chained comparisons are not allowed: join them with and")
        return left

    def sum(self) -> Expr:
        return self.binary(frozenset({"+", "-"}), self.term)

    def term(self) -> Expr:
        return self.binary(frozenset({"*", "/", "//", "%"}), self.unary)

    def unary(self) -> Expr:
        if self.peek() == "-":
            self.take()
            return Unary("-", self.unary())
        return self.atom()

    def atom(self) -> Expr:
        word = self.take()
        if word == "(":
            self.depth += 1
            if self.depth > RULE_MAX_DEPTH:
                raise RuleError(f"nests deeper than {RULE_MAX_DEPTH} parentheses")
            inner = self.disjunction()
            if self.peek() != ")":
                raise RuleError("a parenthesis is not closed")
            self.take()
            self.depth -= 1
            return inner
        if word in ("true", "false"):
            return Number(word == "true")
        if word[0].isdigit():
            return Number(float(word) if any(c in word for c in ".eE") else int(word))
        if word[0].isalpha() or word[0] == "_":
            if word in _KEYWORDS or any(part in _KEYWORDS for part in word.split(".")):
                raise RuleError(f"{word!r} is a keyword, not a name")
            return Name(tuple(word.split(".")))
        raise RuleError(f"unexpected {word!r}")


def parse_rule(text: str) -> Expr:
    """The rule's expression; :class:`RuleError` says why it does not parse."""
    if not text.strip():
        raise RuleError("is empty")
    if len(text) > RULE_MAX_CHARS:
        raise RuleError(f"is longer than {RULE_MAX_CHARS} characters")
    parser = _Parser(_tokens(text))
    expr = parser.disjunction()
    if parser.peek() is not None:
        raise RuleError(f"unexpected {parser.peek()!r}")
    return expr


def names_of(expr: Expr) -> set[str]:
    """The dotted names a rule reads."""
    if isinstance(expr, Name):
        return {".".join(expr.path)}
    if isinstance(expr, Unary):
        return names_of(expr.operand)
    if isinstance(expr, Binary):
        return names_of(expr.left) | names_of(expr.right)
    return set()


def _lookup(path: tuple[str, ...], names: Mapping[str, object]) -> Value:
    value: object = names
    for part in path:
        if not isinstance(value, Mapping) or part not in value:
            raise RuleError(f"{'.'.join(path)} is not a parameter or a config key")
        value = value[part]
    if isinstance(value, bool) or (isinstance(value, int | float) and math.isfinite(value)):
        return value
    raise RuleError(f"{'.'.join(path)} is not a finite number or true/false")


def _number(value: Value, what: str) -> int | float:
    if isinstance(value, bool):
        raise RuleError(f"{what} is true/false where a number is needed")
    return value


def _arithmetic(op: str, left: Value, right: Value) -> Value:
    a, b = _number(left, "the left side"), _number(right, "the right side")
    if op in ("/", "//", "%") and b == 0:
        raise RuleError("divides by zero")
    result: int | float = {
        "+": operator.add,
        "-": operator.sub,
        "*": operator.mul,
        "/": operator.truediv,
        "//": operator.floordiv,
        "%": operator.mod,
    }[op](a, b)
    if not math.isfinite(result):
        raise RuleError("overflows")
    return result


def _value(expr: Expr, names: Mapping[str, object]) -> Value:
    if isinstance(expr, Number):
        return expr.value
    if isinstance(expr, Name):
        return _lookup(expr.path, names)
    if isinstance(expr, Unary):
        operand = _value(expr.operand, names)
        if expr.op == "not":
            return not _truth(operand)
        return -_number(operand, "the operand of -")
    if expr.op in ("and", "or"):
        first = _truth(_value(expr.left, names))
        if (expr.op == "and") != first:  # short-circuit as people read it
            return first
        return _truth(_value(expr.right, names))
    left, right = _value(expr.left, names), _value(expr.right, names)
    if expr.op in _COMPARISONS:
        return _COMPARISONS[expr.op](left, right)
    return _arithmetic(expr.op, left, right)


def _truth(value: Value) -> bool:
    if not isinstance(value, bool):
        raise RuleError("a number where true/false is needed (compare it with something)")
    return value


def evaluate(expr: Expr, names: Mapping[str, object]) -> bool:
    """Whether the rule holds for ``names``; :class:`RuleError` when it cannot be judged (a
    missing name, a division by zero, a number where true/false is needed)."""
    return _truth(_value(expr, names))
