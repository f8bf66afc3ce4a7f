"""Two trajectories side by side: where they part, and which tool result first reads as
failed, by which rule."""

from __future__ import annotations

from typing import Any

import pytest

from tuneplane.evaluation.alignment import failure_rule, first_divergence, first_failed_tool_call


def call(call_id: str, command: str, ms: int = 0) -> dict[str, Any]:
    tool_call = {"id": call_id, "name": "bash", "arguments": {"cmd": command}}
    return {"role": "assistant", "content": "", "tool_calls": [tool_call], "ms": ms}


def result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "tool_name": "bash", "content": text}


def test_messages_part_where_what_was_said_differs_not_where_ids_or_timings_do() -> None:
    left = [{"role": "user", "content": "q"}, call("a", "ls", 5), result("a", "x")]
    right = [{"role": "user", "content": "q"}, call("b", "ls", 9), result("b", "x")]
    assert first_divergence(left, right) is None
    assert first_divergence(left, [*right[:2], result("b", "y")]) == 2
    assert first_divergence(left, right[:2]) == 2
    assert first_divergence(left, [right[0], call("b", "pwd")]) == 1
    assert first_divergence([], []) is None


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ('Traceback (most recent call last):\n  File "x.py"', "traceback"),
        ("  Error: no such file", "error_line"),
        ("fatal: not a git repository", "error_line"),
        ("Process exited with code 2", "exit_code"),
        ("returncode=1", "exit_code"),
        ("bash: pytestt: command not found", "command_not_found"),
        ("partial output\n[tool error: timeout: Command timed out]", "tool_error"),
        ("[tool error: permission: denied]", "tool_error"),
        ("it printed [tool error: in quotes", None),
        ("exit code 0", None),
        ("0 errors, 3 passed", None),
    ],
)
def test_a_tool_result_reads_as_failed_by_a_named_rule(text: str, rule: str | None) -> None:
    assert failure_rule(result("a", text)) == rule
    assert failure_rule({"role": "assistant", "content": text}) is None


def test_the_first_failed_tool_call_names_the_call_it_answers() -> None:
    messages = [
        {"role": "user", "content": "q"},
        call("a", "ls"),
        result("a", "fine"),
        call("b", "make"),
        result("b", "make: exited with code 2"),
        {"role": "tool", "tool_call_id": "c", "content": "late", "is_error": True},
    ]
    failed = first_failed_tool_call(messages)
    assert failed is not None
    assert (failed.message, failed.call_message, failed.call_id, failed.rule) == (
        4,
        3,
        "b",
        "exit_code",
    )
    marked = first_failed_tool_call(messages[5:])
    assert marked is not None
    assert (marked.rule, marked.call_message) == ("marked", None)
    assert first_failed_tool_call(messages[:3]) is None
