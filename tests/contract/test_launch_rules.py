"""The effective-configuration rules' language: what it computes, and what it refuses."""

from __future__ import annotations

import pytest

from tuneplane.contract.launch_rules import RuleError, evaluate, names_of, parse_rule

NAMES = {"global_batch": 64, "world_size": 8, "lr": 1e-5, "model": {"layers": 24},
         "bf16": True, "name": "qwen", "nan": float("nan")}  # fmt: skip


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("global_batch % world_size == 0", True),
        ("global_batch // world_size == 8 and lr < 1e-4", True),
        ("model.layers % 5 == 0", False),
        ("not bf16 or world_size >= 2", True),
        ("-(world_size - 10) * 2 == 4", True),
        ("global_batch / world_size != 8.0", False),
        ("(1 + 2) * 3 == 9 and true", True),
    ],
)
def test_rules_compute_as_people_read_them(text: str, expected: bool) -> None:
    assert evaluate(parse_rule(text), NAMES) is expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "is empty"),
        ("__import__('os').system('x')", "unexpected"),
        ("a ** 2 == 4", "unexpected '*'"),
        ("1 < 2 < 3", "chained comparisons are not allowed"),
        ("(1 == 1", "a parenthesis is not closed"),
        ("x.and == 1", "is a keyword"),
        ("a == 1 b", "unexpected 'b'"),
        ("x" * 501, "is longer than 500 characters"),
        ("(" * 40 + "1" + ")" * 40 + " == 1", "nests deeper than 32"),
        ("lambda: 1", "unexpected ':"),
    ],
)
def test_what_does_not_parse_is_refused_with_its_reason(text: str, why: str) -> None:
    with pytest.raises(RuleError, match=why.replace("(", r"\(").replace("*", r"\*")):
        parse_rule(text)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("missing == 1", "missing is not a parameter or a config key"),
        ("model.heads == 1", "model.heads is not a parameter or a config key"),
        ("name == 1", "name is not a finite number or true/false"),
        ("nan == 1", "nan is not a finite number or true/false"),
        ("global_batch % 0 == 0", "divides by zero"),
        ("global_batch", "a number where true/false is needed"),
        ("bf16 + 1 == 2", "true/false where a number is needed"),
        ("1e308 * 10 > 1", "overflows"),
    ],
)
def test_what_cannot_be_judged_says_why(text: str, why: str) -> None:
    with pytest.raises(RuleError, match=why):
        evaluate(parse_rule(text), NAMES)


def test_a_rule_names_what_it_reads() -> None:
    assert names_of(parse_rule("a.b % c == 0 and not d")) == {"a.b", "c", "d"}
