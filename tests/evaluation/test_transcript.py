"""A trajectory's totals and the search within it: pure functions over messages."""

from __future__ import annotations

from tuneplane.evaluation.transcript import search, totals


def test_the_time_spans_the_earliest_to_the_latest_timestamp_whatever_their_order() -> None:
    # claude-code writes a user step after agent steps that began before it.
    messages = [
        {"role": "assistant", "content": "", "timestamp": "2025-11-19T22:54:30.166Z"},
        {"role": "user", "content": "", "timestamp": "2025-11-19T22:54:26.919Z"},
        {"role": "tool", "content": ""},
        {"role": "assistant", "content": "", "timestamp": "2025-11-19T23:56:36.463+01:00"},
        {"role": "assistant", "content": "", "timestamp": "2025-11-19T22:55:00"},  # UTC
    ]
    span = totals({"messages": messages})["time"]
    assert span == {
        "first": "2025-11-19T22:54:26.919Z",
        "last": "2025-11-19T23:56:36.463+01:00",
        "seconds": 129.544,
        "stamped_messages": 4,
    }


def test_sums_count_only_what_messages_report() -> None:
    messages = [
        {"role": "assistant", "content": "", "tokens": {"input": 5}, "ms": 12.5},
        {"role": "assistant", "content": "", "tokens": {"input": 7, "cached": 0}},
    ]
    found = totals({"messages": messages, "metrics": {"input": 99}})
    assert found["declared"] == {"input": 99}
    assert found["messages"] == {"input": 12, "output": None, "cached": 0, "ms": 12.5}


def test_search_is_literal_any_case_and_names_the_field() -> None:
    messages = [
        {"role": "user", "content": "a+b and A+B"},
        {
            "role": "assistant",
            "content": "",
            "model": "m",
            "tool_calls": [{"id": "c", "name": "calc", "arguments": {"expr": "a+b"}}],
        },
        {"role": "tool", "tool_name": "calc", "content": "ab"},
    ]
    found = search(messages, "A+b")
    assert [(m["index"], m["field"], m["count"]) for m in found] == [
        (0, "content", 2),
        (1, "tool_calls[0].arguments", 1),
    ]
    assert found[0]["snippet"] == {"before": "", "match": "a+b", "after": " and A+B"}
    assert [m["field"] for m in search(messages, "CALC")] == ["tool_calls[0].name", "tool_name"]


def test_search_outside_ascii_matches_in_any_case_too() -> None:
    messages = [{"role": "user", "content": "CAFÉ and café"}, {"role": "user", "content": "cafe"}]
    (found,) = search(messages, "café")
    assert (found["index"], found["count"], found["snippet"]["match"]) == (0, 2, "CAFÉ")
    assert [m["index"] for m in search(messages, "CAFE")] == [1]
