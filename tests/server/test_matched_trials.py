"""The trials behind the matched view's counts and one trial's two trajectories side by side,
through the API on SQLite and PostgreSQL: each transition's trials paged by trial ID with
both outcomes and the trajectory of each side's current attempt, the first divergence and
the first failed tool call, and bad parameters refused naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.server import test_evaluation_api

#: The admin's client on each engine, as the evaluation API's tests have it.
api = test_evaluation_api.api
MATCHED = "/api/v1/evaluation/matched"
SIDES = {"left": "demo/base/val-1", "right": "demo/tuned/val-1"}
#: trial -> (left status, right status); None: not reported on that side.
TRIALS: dict[str, tuple[str | None, str | None]] = {
    "fix-bug-r0": ("success", "failure"),
    "fix-bug-r1": ("failure", "success"),
    "parse-r0": ("success", "success"),
    "parse-r1": ("failure", "failure"),
    "build-r0": ("unscored", "success"),
    "build-r1": ("success", "infra_error"),
    "lint-r0": ("infra_error", "unscored"),
    "doc-7": ("success", None),
    "late-r0": (None, "failure"),
    **{f"reg-{i}-r0": ("success", "failure") for i in range(5)},
}
EXPECTED = {
    "success_to_failure": ["fix-bug-r0", *(f"reg-{i}-r0" for i in range(5))],
    "failure_to_success": ["fix-bug-r1"],
    "success_to_success": ["parse-r0"],
    "failure_to_failure": ["parse-r1"],
    "unscored_to_scored": ["build-r0"],
    "scored_to_unscored": ["build-r1"],
    "unscored_both": ["lint-r0"],
    "missing_right": ["doc-7"],
    "missing_left": ["late-r0"],
}


def shared(n: int) -> list[dict[str, Any]]:
    """The first ``n`` messages both sides said alike (tokens and timings differ)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the bug <b>now</b>."}]
    for k in range((n - 1) // 2):
        call = {"id": f"c{k}", "name": "bash", "arguments": {"cmd": f"ls {k}"}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [call], "ms": k})
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": f"file{k}"})
    return messages[:n]


def conversations() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Left: 6 messages that succeed. Right: the same first 3, then another command whose
    result is a traceback (message 4), as the regressing trial's."""
    left = [
        *shared(3),
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "x1", "name": "bash", "arguments": {"cmd": "pytest"}}]},
        {"role": "tool", "tool_call_id": "x1", "tool_name": "bash", "content": "3 passed"},
        {"role": "assistant", "content": "Done."},
    ]  # fmt: skip
    right = [
        *[{**m, "ms": 999} for m in shared(3)],
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "y1", "name": "bash", "arguments": {"cmd": "python fix.py"}}]},
        {"role": "tool", "tool_call_id": "y1", "tool_name": "bash",
         "content": 'Traceback (most recent call last):\n  File "fix.py"\nKeyError: 1'},
        {"role": "assistant", "content": "I could not fix it."},
        {"role": "assistant", "content": "Giving up."},
    ]  # fmt: skip
    return left, right


def document(trial_id: str, trial_attempt: int, messages: list[Any]) -> dict[str, Any]:
    return {
        "scope": "evaluation",
        "round_id": "val-1",
        "trial_id": trial_id,
        "trial_attempt": trial_attempt,
        "messages": messages,
        "total_messages": len(messages),
        "complete": True,
        "capture_policy": "all",
    }


def report(api: TestClient, run: str, side: int, texts: list[dict[str, Any]]) -> None:
    assert api.post("/api/v1/projects/demo/runs", json={"run": run}).status_code in (200, 201)
    token = api.post(f"/api/v1/projects/demo/runs/{run}/attempts").json()["token"]
    headers = {"Authorization": f"Bearer {token}"}
    events: list[dict[str, Any]] = []
    for trial_id, statuses in TRIALS.items():
        status = statuses[side]
        if status is None:
            continue
        # fix-bug-r0 is retried on the right: its current attempt is 1.
        attempts = (
            [("infra_error", 0), (status, 1)]
            if (trial_id, side) == ("fix-bug-r0", 1)
            else [(status, 0)]
        )
        for current, number in attempts:
            extra: dict[str, str | None] = {}
            if current in ("unscored", "infra_error"):
                extra = {"reason_code": "reward_mismatch", "reason": "reward.txt differs"}
                extra["error_type"] = "AgentTimeoutError" if current == "infra_error" else None
            events.append(
                {
                    "event_id": f"{trial_id}-{number}",
                    "type": "trial",
                    "round_id": "val-1",
                    "trial_id": trial_id,
                    "trial_attempt": number,
                    "status": current,
                    "eligible": False,
                    **extra,
                }
            )  # fmt: skip
    for start in range(0, len(events), 32):
        sent = api.post(
            "/api/v1/ingest/observations",
            json={"events": events[start : start + 32]},
            headers=headers,
        )
        assert sent.status_code == 200, sent.text
    sent = api.post("/api/v1/ingest/trajectories", json={"trajectories": texts}, headers=headers)
    assert sent.status_code == 200, sent.text


@pytest.fixture
def seeded(api: TestClient) -> TestClient:
    left, right = conversations()
    report(api, "base", 0, [document("fix-bug-r0", 0, left)])
    report(
        api,
        "tuned",
        1,
        [document("fix-bug-r0", 1, right), document("fix-bug-r0", 0, shared(2))],
    )
    return api


def trials(api: TestClient, transition: str, **params: Any) -> dict[str, Any]:
    response = api.get(MATCHED + "/trials", params={**SIDES, "transition": transition, **params})
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_each_transition_lists_the_trials_its_count_counts(seeded: TestClient) -> None:
    counts = seeded.get(MATCHED, params=SIDES).json()["transitions"]
    for transition, expected in EXPECTED.items():
        answer = trials(seeded, transition)
        listed = [t["trial_id"] for t in answer["trials"]]
        assert listed == sorted(expected), transition
        assert counts[transition] == len(expected), transition
        assert {t["transition"] for t in answer["trials"]} == {transition}
        assert answer["next"] is None
    assert trials(seeded, "missing_left")["trials"][0]["left"] is None
    assert trials(seeded, "missing_right")["trials"][0]["right"] is None


def test_a_trial_names_its_task_repeat_outcomes_and_trajectories(seeded: TestClient) -> None:
    answer = trials(seeded, "success_to_failure", limit=1)
    assert answer["left"] == {
        "project": "demo",
        "run": "base",
        "round_id": "val-1",
        "execution_attempt": 1,
    }
    (trial,) = answer["trials"]
    assert (trial["trial_id"], trial["task"], trial["repeat"]) == ("fix-bug-r0", "fix-bug", 0)
    left, right = trial["left"], trial["right"]
    assert (left["status"], left["trial_attempt"], left["attempts"]) == ("success", 0, 1)
    assert (right["status"], right["trial_attempt"], right["attempts"]) == ("failure", 1, 2)
    # The current attempt's trajectory: the right's attempt 1, not its attempt 0.
    assert left["trajectory"]["message_count"] == 6
    assert right["trajectory"]["message_count"] == 7
    assert right["trajectory"]["body"]["state"] == "stored"
    (gained,) = trials(seeded, "unscored_to_scored")["trials"]
    assert gained["left"]["reason_code"] == "reward_mismatch"
    assert gained["left"]["trajectory"] is None
    (lost,) = trials(seeded, "scored_to_unscored")["trials"]
    assert lost["right"]["error_type"] == "AgentTimeoutError"
    assert trials(seeded, "missing_right")["trials"][0]["task"] == "doc-7"
    assert trials(seeded, "missing_right")["trials"][0]["repeat"] is None


def test_a_transition_is_paged_by_trial_id(seeded: TestClient) -> None:
    seen: list[str] = []
    after = None
    while True:
        answer = trials(
            seeded, "success_to_failure", limit=4, **({"after": after} if after else {})
        )
        seen += [t["trial_id"] for t in answer["trials"]]
        after = answer["next"]
        if after is None:
            break
    assert seen == sorted(EXPECTED["success_to_failure"])
    assert trials(seeded, "success_to_failure", after="reg-4-r0")["trials"] == []


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"transition": "pass_to_fail"}, "transition"),
        ({"transition": "success_to_failure", "limit": 0}, "limit"),
        ({"transition": "success_to_failure", "limit": 201}, "limit"),
        ({"transition": "success_to_failure", "after": "a b"}, "after"),
        ({"transition": "success_to_failure", "left": "demo/base"}, "left"),
        ({"transition": "success_to_failure", "right_attempt": 0}, "right_attempt"),
        ({}, "transition"),
    ],
)
def test_bad_parameters_are_refused_naming_the_field(
    api: TestClient, params: dict[str, Any], field: str
) -> None:
    for run in ("base", "tuned"):
        assert api.post("/api/v1/projects/demo/runs", json={"run": run}).status_code == 201
    response = api.get(MATCHED + "/trials", params={**SIDES, **params})
    assert response.status_code == 422, response.text
    fields = [d["field"] for d in response.json()["error"]["details"]]
    assert field in fields[0], fields


def test_a_trial_opens_both_trajectories_aligned_by_message(seeded: TestClient) -> None:
    response = seeded.get(MATCHED + "/trials/fix-bug-r0", params=SIDES)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert (answer["transition"], answer["task"], answer["repeat"]) == (
        "success_to_failure",
        "fix-bug",
        0,
    )
    left, right = answer["left"], answer["right"]
    assert (left["run"], right["run"]) == ("base", "tuned")
    assert (left["outcome"]["status"], right["outcome"]["status"]) == ("success", "failure")
    assert len(left["messages"]) == 6
    assert len(right["messages"]) == 7
    assert right["trajectory"]["trial_attempt"] == 1
    # The first three are alike (timings aside); the fourth runs another command.
    assert (answer["compared"], answer["first_divergence"]) == (True, 3)
    assert left["first_failed_tool_call"] is None
    assert right["first_failed_tool_call"] == {
        "message": 4,
        "call_message": 3,
        "call_id": "y1",
        "tool_name": "bash",
        "rule": "traceback",
    }
    assert left["messages"][0]["content"] == "Fix the bug <b>now</b>."


def test_a_side_without_text_or_without_the_trial_is_said(seeded: TestClient) -> None:
    answer = seeded.get(MATCHED + "/trials/fix-bug-r1", params=SIDES).json()
    assert answer["left"]["trajectory"] is None
    assert answer["left"]["messages"] is None
    assert (answer["compared"], answer["first_divergence"]) == (False, None)
    only = seeded.get(MATCHED + "/trials/late-r0", params=SIDES).json()
    assert only["left"]["outcome"] is None
    assert only["transition"] == "missing_left"
    missing = seeded.get(MATCHED + "/trials/nowhere", params=SIDES)
    assert missing.status_code == 404
    assert missing.json()["error"]["message"].startswith("trial_id:")
    bad = seeded.get(MATCHED + "/trials/a%20b", params=SIDES)
    assert bad.status_code == 422
    assert bad.json()["error"]["details"][0]["field"] == "trial_id"
