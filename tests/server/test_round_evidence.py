"""What a round records beside its outcomes, through the API on SQLite and PostgreSQL: the
runs list's latest evaluated checkpoint, the planned trials never reported (by ID), and the
protocol settings keys that differ between two rounds whose settings digests do."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.server import test_evaluation_api
from tests.server.test_evaluation_api import (
    DIGESTS,
    attempt,
    checkpoint_event,
    population,
    send,
    tally,
)
from tests.server.test_evaluation_api import trial as result
from tuneplane.contract.declared import canonical_digest

#: The admin's client on each engine, as the evaluation API's tests have it.
api = test_evaluation_api.api


def test_the_runs_list_names_each_run_s_latest_evaluated_checkpoint(api: TestClient) -> None:
    evaluated, training = attempt(api, "evaluated"), attempt(api, "training")
    first = (population("p1", 1), checkpoint_event("c1", "step-100"), result("t1", "q1", "success"))
    assert tally(send(api, evaluated, *first))
    later = [
        population("p2", 1, round_id="val-2"),
        checkpoint_event("c2", "step-200", round_id="val-2"),
        {**result("t2", "q1", "failure"), "round_id": "val-2"},
    ]
    assert tally(send(api, evaluated, *later))
    # A run with free events and no round has no checkpoint, whatever an event says.
    stray = checkpoint_event("c3", "not-a-round")
    event = {"event_id": "e1", "type": "event", "name": "rollout/done", "fields": {"n": 1}}
    assert tally(send(api, training, event, stray))
    listed = api.get("/api/v1/projects/demo/runs").json()
    by_run = {run["run"]: run["latest_checkpoint"] for run in listed}
    assert by_run["evaluated"] == {
        "name": "step-200",
        "digest": "sha256:ab",
        "round_id": "val-2",
        "execution_attempt": 1,
    }
    assert by_run["training"] is None
    # A restarted execution's round is the latest evaluated one.
    restarted = attempt(api, "evaluated")
    again = (population("p3", 1), checkpoint_event("c4", "step-300"), result("t3", "q1", "success"))
    assert tally(send(api, restarted, *again))
    listed = api.get("/api/v1/projects/demo/runs", params={"q": "evaluated"}).json()
    (run,) = [r for r in listed if r["run"] == "evaluated"]
    assert (run["latest_checkpoint"]["name"], run["latest_checkpoint"]["execution_attempt"]) == (
        "step-300",
        2,
    )


def declared(event_id: str, expected: int, round_id: str = "val-1", **recorded: Any) -> Any:
    """A declaration with what it records beside its digests (protocol, planned_trials)."""
    return {**population(event_id, expected, round_id=round_id), **recorded}


def read_round(api: TestClient, run: str, round_id: str = "val-1") -> Any:
    answer = api.get(f"/api/v1/projects/demo/runs/{run}/evaluation/{round_id}")
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_planned_trials_never_reported_are_named(api: TestClient) -> None:
    token = attempt(api, "planned")
    planned = ["q1-r0", "q1-r1", "q2-r0", "q3-r0"]
    assert tally(send(api, token, declared("p", 4, planned_trials=planned[::-1])))
    assert tally(
        send(api, token, result("t1", "q1-r0", "success"), result("t2", "q2-r0", "failure"))
    )
    not_run = read_round(api, "planned")["planned_not_reported"]
    assert not_run == {"trial_ids": ["q1-r1", "q3-r0"], "reason": None}
    assert read_round(api, "planned")["not_yet_reported"]["value"] == 2
    # An outcome moves its trial off the list, whatever its status.
    assert tally(send(api, token, result("t3", "q3-r0", "unscored")))
    assert read_round(api, "planned")["planned_not_reported"]["trial_ids"] == ["q1-r1"]
    # A declaration without the list (an older producer's) says so instead of guessing.
    older = attempt(api, "older")
    assert tally(send(api, older, population("p", 4), result("t1", "q1-r0", "success")))
    unnamed = read_round(api, "older")["planned_not_reported"]
    assert unnamed["trial_ids"] is None
    assert "lists no planned trial IDs" in unnamed["reason"]
    # Results without a declaration: nothing was planned that the server knows of.
    loose = attempt(api, "loose")
    assert tally(send(api, loose, result("t1", "q1-r0", "success")))
    assert read_round(api, "loose")["planned_not_reported"]["trial_ids"] is None


@pytest.mark.parametrize(
    ("recorded", "field", "rule"),
    [
        ({"planned_trials": ["a", "b"]}, "planned_trials", "lists 2 trial IDs but"),
        ({"planned_trials": ["a", "a", "b"]}, "planned_trials", "twice"),
        ({"planned_trials": ["a b", "c", "d"]}, "planned_trials", "trial IDs"),
        ({"planned_trials": "a,b,c"}, "planned_trials", "trial IDs"),
        ({"protocol": ["not", "an", "object"]}, "protocol", "must be an object"),
        ({"protocol": {"k": "x" * 9000}}, "protocol", "at most 8 KiB"),
    ],
)
def test_bad_recorded_parts_are_refused_naming_the_field(
    api: TestClient, recorded: dict[str, Any], field: str, rule: str
) -> None:
    token = attempt(api, "bad")
    answer = send(api, token, declared("p", 3, **recorded))
    assert answer.status_code == 422, answer.text
    (detail,) = answer.json()["error"]["details"]
    assert detail["field"] == f"events[0].{field}"
    assert rule in detail["rule"]
    assert api.get("/api/v1/projects/demo/runs/bad/evaluation").json()["state"] == "unknown"


def test_recorded_settings_keep_no_secret_and_are_part_of_the_declaration(
    api: TestClient,
) -> None:
    token = attempt(api, "secrets")
    protocol = {"agent": {"name": "terminus-2", "api_key": "plain", "max_tokens": 512},
                "env": {"OPENAI_BASE": "sk-proj-abcdefghijklmnopqrstuvwx"}}  # fmt: skip
    first = declared("p", 1, protocol=protocol, planned_trials=["q1"])
    assert tally(send(api, token, first)) == (1, 0)
    (stored,) = api.get(
        "/api/v1/projects/demo/runs/secrets/observations", params={"type": "population"}
    ).json()
    assert stored["protocol"] == {
        "agent": {"name": "terminus-2", "api_key": "[redacted]", "max_tokens": 512},
        "env": {"OPENAI_BASE": "[redacted]"},
    }
    # The same declaration again is a duplicate; another list or other settings, a conflict.
    assert tally(send(api, token, {**first, "event_id": "again"})) == (0, 1)
    changed = {**first, "event_id": "changed", "planned_trials": ["q2"]}
    refused = send(api, token, changed)
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["conflicts"][0]["fields"] == ["planned_trials"]
    other = {**first, "event_id": "other", "protocol": {"agent": {"name": "oracle"}}}
    assert send(api, token, other).json()["error"]["conflicts"][0]["fields"] == ["protocol"]


SETTINGS = {
    "runtime": "1" * 64,
    "harness": "2" * 64,
    "settings": {"trial_config": {"agent": {"name": "terminus-2", "kwargs": {"temperature": 0.7}},
                                  "timeout_multiplier": 1.0}, "harbor": "0.3.0",
                 "api_token": "[redacted]"},
}  # fmt: skip


def compare(api: TestClient, left: Any, right: Any, outcomes: int = 1) -> Any:
    """Rounds val-1 of runs base and tuned declared with ``left`` and ``right``."""
    for run, declaration in (("base", left), ("tuned", right)):
        token = attempt(api, run)
        events = [result(f"t{i}", f"q{i}", "success") for i in range(outcomes)]
        assert tally(send(api, token, declaration, *events))
    answer = api.get(
        "/api/v1/evaluation/matched",
        params={"left": "demo/base/val-1", "right": "demo/tuned/val-1"},
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def with_settings(protocol: dict[str, Any] | None) -> Any:
    digests = {**DIGESTS, "settings": canonical_digest(protocol or {"unrecorded": True})}
    recorded = {} if protocol is None else {"protocol": protocol}
    return {**population("p", 1, **digests), **recorded}


def test_differing_settings_digests_name_the_keys_that_differ(api: TestClient) -> None:
    right = json.loads(json.dumps(SETTINGS))
    right["settings"]["trial_config"]["agent"]["name"] = "oracle"
    del right["settings"]["trial_config"]["agent"]["kwargs"]["temperature"]
    right["settings"]["trial_config"]["max_retries"] = 0
    answer = compare(api, with_settings(SETTINGS), with_settings(right))
    keys = answer["settings_differences"]
    assert keys["compared"] is True
    assert keys["differences"] == [
        {"path": "settings.trial_config.agent.kwargs", "change": "added", "left": None,
         "right": "{}"},
        {"path": "settings.trial_config.agent.kwargs.temperature", "change": "removed",
         "left": "0.7", "right": None},
        {"path": "settings.trial_config.agent.name", "change": "changed",
         "left": '"terminus-2"', "right": '"oracle"'},
        {"path": "settings.trial_config.max_retries", "change": "added", "left": None,
         "right": "0"},
    ]  # fmt: skip
    # A redacted value is never compared, and the recorded settings hash to no digest then.
    assert keys["redacted"] == ["settings.api_token"]
    assert keys["verified"] == {"left": None, "right": None}
    (condition,) = [
        c for c in answer["difference"]["conditions"] if c["code"] == "settings_digest_mismatch"
    ]
    assert condition["reason"].startswith("settings digests differ: settings.trial_config.agent")
    assert "settings.trial_config.agent.name" in condition["reason"]


def test_a_side_without_recorded_settings_is_said_not_guessed(api: TestClient) -> None:
    answer = compare(api, with_settings(None), with_settings({"agent": "oracle"}))
    keys = answer["settings_differences"]
    assert (keys["compared"], keys["differences"]) == (False, [])
    assert keys["reason"].startswith("the left round recorded no protocol settings")
    verified = compare_same_digests(api)
    assert verified["settings_differences"] is None


def compare_same_digests(api: TestClient) -> Any:
    """Matching settings digests: nothing to name, whatever was recorded."""
    same = with_settings({"agent": "oracle"})
    for run in ("base2", "tuned2"):
        assert tally(send(api, attempt(api, run), {**same, "round_id": "val-9"}))
    params = {"left": "demo/base2/val-9", "right": "demo/tuned2/val-9"}
    return api.get("/api/v1/evaluation/matched", params=params).json()


def test_recorded_settings_that_hash_to_their_digest_are_verified(api: TestClient) -> None:
    plain = {"agent": "terminus-2"}
    answer = compare(api, with_settings(plain), with_settings({"agent": "oracle"}))
    assert answer["settings_differences"]["verified"] == {"left": True, "right": True}
    # Only a redacted value differs: said, not "no difference".
    again = compare_redacted(api)
    assert again["differences"] == []
    assert again["reason"] == (
        "no recorded key differs: the difference is in a redacted value (api_key)"
    )


def compare_redacted(api: TestClient) -> Any:
    for run, secret in (("base3", "one"), ("tuned3", "two")):
        protocol = {"agent": "x", "api_key": secret}
        event = {**with_settings(protocol), "round_id": "val-3"}
        assert tally(send(api, attempt(api, run), event))
    params = {"left": "demo/base3/val-3", "right": "demo/tuned3/val-3"}
    return api.get("/api/v1/evaluation/matched", params=params).json()["settings_differences"]
