"""Reading a long trajectory through the API, on SQLite and PostgreSQL: a search within one
body (matches, snippets, bad queries naming the field, the content permission as for
reading it), and a read's totals, timestamps, models and first failing tool call."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.server.conftest import SECRET_PROJECT, World
from tests.server.test_trajectories import RUN, attempt, evaluation, send

STAMPED: list[dict[str, Any]] = [
    {"role": "user", "content": "Fix the Needle in the parser",
     "timestamp": "2025-11-19T22:54:26.919Z"},
    {
        "role": "assistant",
        "content": "Looking for a needle.",
        "reasoning": "grep for NEEDLE first",
        "model": "claude-haiku-4-5-20251001",
        "timestamp": "2025-11-19T22:54:30.166Z",
        "tokens": {"input": 601, "output": 161, "cached": 0},
        "tool_calls": [{"id": "c1", "name": "bash", "arguments": {"cmd": "grep -rn needle ."}}],
    },
    {"role": "tool", "tool_call_id": "c1", "tool_name": "bash",
     "content": "Traceback (most recent call last):\n  File x\nValueError: a.b( broke"},
    {
        "role": "assistant",
        "content": "Done.",
        "model": "claude-sonnet-4-5-20250929",
        "timestamp": "2025-11-19T22:56:36.463Z",
        "tokens": {"input": 612, "output": 114},
        "ms": 250,
    },
]  # fmt: skip
METRICS = {"input": 1114893, "output": 14550, "cached": 1109340, "cost_usd": 0.42}


def _stored(api: TestClient, **extra: Any) -> int:
    token = attempt(api)
    sent = send(api, token, evaluation("q1", messages=STAMPED, **extra))
    assert sent.status_code == 200, sent.text
    (row,) = api.get(RUN + "/trajectories").json()["items"]
    return int(row["id"])


def test_search_names_each_matching_field_with_a_snippet(api: TestClient) -> None:
    trajectory = _stored(api)
    answer = api.get(f"{RUN}/trajectories/{trajectory}/search", params={"q": "needle"})
    assert answer.status_code == 200, answer.text
    found = answer.json()
    assert found["query"] == "needle"
    assert found["messages"] == [0, 1]
    assert found["occurrences"] == 4
    assert [(m["index"], m["field"], m["count"]) for m in found["matches"]] == [
        (0, "content", 1),
        (1, "content", 1),
        (1, "reasoning", 1),
        (1, "tool_calls[0].arguments", 1),
    ]
    assert found["matches"][0]["snippet"] == {
        "before": "Fix the ",
        "match": "Needle",
        "after": " in the parser",
    }
    assert found["body"]["state"] == "stored"
    # The text as typed, never a pattern; a model's name is searched too.
    literal = api.get(f"{RUN}/trajectories/{trajectory}/search", params={"q": "a.b("}).json()
    assert literal["messages"] == [2]
    assert api.get(f"{RUN}/trajectories/{trajectory}/search?q=sonnet").json()["messages"] == [3]
    assert api.get(f"{RUN}/trajectories/{trajectory}/search?q=absent").json()["matches"] == []


def test_a_long_match_has_a_bounded_snippet(api: TestClient) -> None:
    token = attempt(api)
    text = "x" * 5000 + "NEEDLE" + "y" * 5000
    send(api, token, evaluation("q2", messages=[{"role": "user", "content": text}]))
    (row,) = api.get(RUN + "/trajectories").json()["items"]
    (match,) = api.get(f"{RUN}/trajectories/{row['id']}/search?q=needle").json()["matches"]
    assert match["snippet"] == {
        "before": "…" + "x" * 60,
        "match": "NEEDLE",
        "after": "y" * 60 + "…",
    }


def test_bad_searches_are_refused_naming_q(api: TestClient) -> None:
    trajectory = _stored(api)
    for params in ({}, {"q": ""}, {"q": "   "}, {"q": "x" * 201}):
        answer = api.get(f"{RUN}/trajectories/{trajectory}/search", params=params)
        assert answer.status_code == 422, (params, answer.text)
        (detail,) = answer.json()["error"]["details"]
        assert detail["field"] == "q"
        assert "1-200 characters" in detail["rule"]
    assert api.get(f"{RUN}/trajectories/0/search?q=a").status_code == 422
    missing = api.get(f"{RUN}/trajectories/{trajectory + 1}/search?q=a")
    assert missing.status_code == 404, missing.text


def test_a_body_no_longer_stored_has_no_matches(api: TestClient) -> None:
    trajectory = _stored(api)
    assert api.delete(RUN + "/trajectories").json()["deleted"] == 1
    answer = api.get(f"{RUN}/trajectories/{trajectory}/search?q=needle").json()
    assert answer["body"]["state"] == "deleted"
    assert (answer["matches"], answer["messages"]) == (None, None)


def test_searching_needs_the_content_permission_as_reading_does(world: World) -> None:
    path = f"/api/v1/projects/{SECRET_PROJECT}/runs/r1/trajectories/1/search"
    expected = {
        "owner": 200,
        "reader": 200,  # a viewer with the content permission
        "admin": 200,
        "viewer": 403,
        "editor": 403,
        "outsider": 404,
        "anonymous": 404,
        "share_link": 401,
        "ingest_token": 403,
    }
    for caller, status in expected.items():
        for query in ("prompt", ""):  # a bad query tells an outsider nothing more
            answer = world.client.get(path, params={"q": query}, headers=world.callers[caller])
            want = 422 if status == 200 and not query else status
            if caller == "share_link":
                assert answer.status_code in (401, 404), (caller, answer.text)
                continue
            assert answer.status_code == want, (caller, query, answer.text)
    owner = world.client.get(path, params={"q": "PROMPT"}, headers=world.callers["owner"])
    assert owner.json()["messages"] == [0]


def test_a_read_keeps_timestamps_and_models_and_gives_totals(api: TestClient) -> None:
    trajectory = _stored(api, metrics=METRICS)
    read = api.get(f"{RUN}/trajectories/{trajectory}", params={"offset": 2, "limit": 1})
    assert read.status_code == 200, read.text
    answer = read.json()
    assert answer["messages"] == [STAMPED[2]]
    # Totals are the whole body's, whichever page is read.
    assert answer["totals"] == {
        "declared": METRICS,
        "messages": {"input": 1213, "output": 275, "cached": 0, "ms": 250},
        "time": {
            "first": "2025-11-19T22:54:26.919Z",
            "last": "2025-11-19T22:56:36.463Z",
            "seconds": 129.544,
            "stamped_messages": 3,
        },
    }
    assert answer["first_failed_tool_call"] == {
        "message": 2,
        "call_message": 1,
        "call_id": "c1",
        "tool_name": "bash",
        "rule": "traceback",
    }
    whole = api.get(f"{RUN}/trajectories/{trajectory}").json()["messages"]
    assert [m.get("model") for m in whole] == [
        None,
        "claude-haiku-4-5-20251001",
        None,
        "claude-sonnet-4-5-20250929",
    ]
    assert whole[0]["timestamp"] == "2025-11-19T22:54:26.919Z"


def test_a_read_without_declared_totals_or_timestamps_says_none(api: TestClient) -> None:
    token = attempt(api)
    send(api, token, evaluation("plain"))
    (row,) = api.get(RUN + "/trajectories").json()["items"]
    answer = api.get(f"{RUN}/trajectories/{row['id']}").json()
    assert answer["totals"] == {
        "declared": None,
        "messages": {"input": None, "output": None, "cached": None, "ms": None},
        "time": {"first": None, "last": None, "seconds": None, "stamped_messages": 0},
    }
    assert answer["first_failed_tool_call"] is None
