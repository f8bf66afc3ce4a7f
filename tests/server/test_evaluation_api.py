"""Observation events and evaluation outcomes through the API, on SQLite and PostgreSQL."""

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tuneplane.server.app import create_app
from tuneplane.server.settings import Settings

RUN = "/api/v1/projects/demo/runs/eval-run"
DIGESTS = {"dataset": "a" * 64, "cohort": "b" * 64, "verifier": "c" * 64, "settings": "d" * 64}


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        key = (settings.data_dir / "admin.key").read_text().strip()
        client.headers["Authorization"] = f"Bearer {key}"
        yield client


def attempt(api: TestClient, run: str = "eval-run") -> dict[str, str]:
    api.post("/api/v1/projects/demo/runs", json={"run": run})
    token = api.post(f"/api/v1/projects/demo/runs/{run}/attempts").json()["token"]
    return {"Authorization": f"Bearer {token}"}


def send(api: TestClient, token: dict[str, str], *events: dict[str, Any]) -> Any:
    return api.post("/api/v1/ingest/observations", json={"events": list(events)}, headers=token)


def trial(
    event_id: str, trial_id: str, status: str, attempt_no: int = 0, **extra: Any
) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "type": "trial",
        "round_id": "val-1",
        "trial_id": trial_id,
        "trial_attempt": attempt_no,
        "status": status,
        "eligible": False,
        **extra,
    }


def population(
    event_id: str, expected: int, round_id: str = "val-1", **digests: str
) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "type": "population",
        "round_id": round_id,
        "expected": expected,
        "digests": digests or DIGESTS,
        "task": {"name": "gsm8k", "version": "1.0"},
    }


def rounds(api: TestClient, run: str = "eval-run", **params: Any) -> dict[str, Any]:
    answer: dict[str, Any] = api.get(
        f"/api/v1/projects/demo/runs/{run}/evaluation", params=params
    ).json()
    return answer


def tally(answer: Any) -> tuple[int, int]:
    """(new, duplicate) of an accepted batch."""
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["conflict"] == 0
    return body["new"], body["duplicate"]


def test_observations_are_immutable_and_distinct(api: TestClient) -> None:
    token = attempt(api)
    first = {
        "event_id": "e1",
        "type": "event",
        "name": "rollout/done",
        "step": 3,
        "fields": {"n": 1},
    }
    twin = {**first, "event_id": "e2"}
    assert tally(send(api, token, first, twin)) == (2, 0)
    changed = {**first, "fields": {"n": 99}}
    assert tally(send(api, token, changed)) == (0, 1)
    # A restarted job (a new execution attempt) retrying the same event changes nothing.
    assert tally(send(api, attempt(api), changed)) == (0, 1)
    listed = api.get(RUN + "/observations").json()
    assert [(o["event_id"], o["fields"]["n"], o["attempt"]) for o in listed] == [
        ("e2", 1, 1),
        ("e1", 1, 1),
    ]


def test_health_snapshots_stay_findable(api: TestClient) -> None:
    token = attempt(api)
    send(api, token, {"event_id": "h1", "type": "health", "step": 1, "fields": {"gpu": 0.9}})
    for batch in range(5):
        events = [
            {"event_id": f"e{batch}-{i}", "type": "event", "name": "tick", "fields": {"i": i}}
            for i in range(32)
        ]
        assert send(api, token, *events).status_code == 200
    recent = api.get(RUN + "/observations").json()
    assert len(recent) == 100
    assert "h1" not in [o["event_id"] for o in recent]
    health = api.get(RUN + "/observations", params={"type": "health"}).json()
    assert [(o["event_id"], o["fields"]) for o in health] == [("h1", {"gpu": 0.9})]


def test_distributions_are_counted_buckets(api: TestClient) -> None:
    token = attempt(api)
    histogram = {"bounds": [0, 1, 2, 4, 8], "counts": [3, 5, 9, 2, 0, 1]}
    event = {"event_id": "d1", "type": "distribution", "name": "reward", "step": 5}
    assert send(api, token, {**event, "histogram": histogram}).status_code == 200
    (stored,) = api.get(RUN + "/observations", params={"type": "distribution"}).json()
    assert stored["histogram"] == histogram


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({"histogram": {"bounds": [0, 2, 1], "counts": [1, 1, 1, 1]}}, "histogram.bounds"),
        ({"histogram": {"bounds": list(range(65)), "counts": [0] * 66}}, "histogram.bounds"),
        ({"histogram": {"bounds": [0, 1], "counts": [1, 1]}}, "histogram.counts"),
        ({"histogram": {"bounds": [0, 1], "counts": [1, -1, 1]}}, "histogram.counts"),
        ({"histogram": {"mean": 0.5}}, "histogram.bounds"),
        ({"histogram": {"bounds": [0], "counts": [1, 1]}, "step": -2}, "step"),
    ],
)
def test_bad_distributions_are_refused(api: TestClient, event: dict[str, Any], field: str) -> None:
    token = attempt(api)
    body = {"event_id": "d1", "type": "distribution", "name": "reward", **event}
    response = send(api, token, body)
    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["field"] == f"events[0].{field}"
    assert api.get(RUN + "/observations").json() == []


def test_event_size_and_batch_limits(api: TestClient) -> None:
    token = attempt(api)
    many_fields = {f"f{i}": i for i in range(33)}
    big = {
        "event_id": "big",
        "type": "event",
        "name": "x",
        "fields": {"s": "x" * 1000} | {f"k{i}": "y" * 1000 for i in range(20)},
    }
    too_many = [{"event_id": f"e{i}", "type": "event", "name": "x"} for i in range(33)]
    for body in (
        {"events": [{"event_id": "e", "type": "event", "name": "x", "fields": many_fields}]},
        {"events": [big]},
        {"events": too_many},
    ):
        response = api.post("/api/v1/ingest/observations", json=body, headers=token)
        assert response.status_code == 422, response.text
    assert api.get(RUN + "/observations").json() == []


def test_a_run_without_outcomes_is_unknown(api: TestClient) -> None:
    attempt(api)
    assert rounds(api) == {
        "state": "unknown",
        "execution_attempt": None,
        "execution_attempts": [],
        "rounds": [],
    }


def test_results_before_and_after_the_declaration(api: TestClient) -> None:
    token = attempt(api)
    send(api, token, trial("t1", "q1", "success"), trial("t2", "q2", "failure"))
    (early,) = rounds(api)["rounds"]
    assert early["declared"] is False
    assert early["success_rate"]["value"] == 0.5
    assert early["scoring_coverage"]["value"] is None
    assert "unknown population" in early["scoring_coverage"]["reason"]
    send(api, token, population("p1", 4), trial("t3", "q3", "infra_error"))
    changed = send(api, token, population("p2", 40))  # a changed population: a new round id
    assert changed.status_code == 409
    (late,) = rounds(api)["rounds"]
    assert late["expected"] == 4
    assert late["counts"] == {
        "success": 1,
        "failure": 1,
        "infra_error": 1,
        "unscored": 0,
        "reported": 3,
    }
    assert late["not_yet_reported"] == {"value": 1}
    assert late["scoring_coverage"]["value"] == 0.5
    low, high = late["success_rate"]["wilson95"]
    assert low < 0.5 < high
    assert late["task"] == {"name": "gsm8k", "version": "1.0"}


def test_more_trials_than_expected_withholds_coverage_with_its_code(api: TestClient) -> None:
    token = attempt(api)
    send(api, token, population("p", 1), trial("a", "q1", "success"), trial("b", "q2", "success"))
    (state,) = rounds(api)["rounds"]
    for number in ("scoring_coverage", "not_yet_reported"):
        assert state[number]["value"] is None
        assert state[number]["codes"] == ["excess_trials"]
        assert "2 distinct trials" in state[number]["reason"]
    # The success rate is withheld only for an empty denominator.
    assert state["success_rate"]["value"] == 1.0


def test_every_withheld_figure_carries_every_code_that_applies(api: TestClient) -> None:
    token = attempt(api)
    send(
        api,
        token,
        population("p0", 0, round_id="none"),
        trial("n1", "q1", "infra_error", round_id="none"),
        trial("u1", "q1", "unscored", round_id="open"),
        population("p1", 0, round_id="empty"),
    )
    by_id = {r["round_id"]: r for r in rounds(api)["rounds"]}
    figures = ("success_rate", "scoring_coverage", "not_yet_reported")
    assert {name: by_id["none"][name]["codes"] for name in figures} == {
        "success_rate": ["empty_denominator"],
        "scoring_coverage": ["empty_denominator", "excess_trials"],
        "not_yet_reported": ["excess_trials"],
    }
    assert {name: by_id["open"][name]["codes"] for name in figures} == {
        "success_rate": ["empty_denominator"],
        "scoring_coverage": ["unknown_population"],
        "not_yet_reported": ["unknown_population"],
    }
    assert by_id["empty"]["scoring_coverage"]["codes"] == ["empty_denominator"]
    # 0 declared trials, none reported: nothing is missing (a count, not a rate).
    assert by_id["empty"]["not_yet_reported"] == {"value": 0}
    for state in by_id.values():
        for name in figures:
            if (state["round_id"], name) != ("empty", "not_yet_reported"):
                assert state[name]["value"] is None
                assert state[name]["reason"]


def test_ineligible_outcomes_cannot_be_eligible(api: TestClient) -> None:
    token = attempt(api)
    for status in ("infra_error", "unscored"):
        response = send(api, token, trial("t", "q", status, eligible=True))
        assert response.status_code == 422
        assert response.json()["error"]["details"][0]["field"] == "events[0].eligible"
    assert send(api, token, trial("t", "q", "success", eligible=True)).status_code == 200


def test_the_highest_attempt_wins_in_any_order(api: TestClient) -> None:
    first = attempt(api)
    send(api, first, trial("e2", "q1", "success", 2))
    send(api, first, trial("e1", "q1", "failure", 1))  # an older attempt arriving late
    send(api, first, trial("e0", "q1", "infra_error", 0))
    page = api.get(RUN + "/evaluation/val-1/trials").json()["trials"]
    assert [(t["trial_id"], t["status"], t["attempts"]) for t in page] == [("q1", "success", 3)]
    history = api.get(RUN + "/evaluation/val-1/trials/q1").json()
    assert [h["trial_attempt"] for h in history["attempts"]] == [2, 1, 0]
    assert (history["total_attempts"], history["shown"]) == (3, 3)
    assert api.get(RUN + "/evaluation/val-1/trials/nope").status_code == 404


def test_a_restarted_execution_forms_its_own_round(api: TestClient) -> None:
    first = attempt(api)
    send(api, first, population("p", 3), trial("e0", "q1", "failure", 0))
    send(api, first, trial("e3", "q1", "success", 3), trial("e4", "q2", "failure", 0))
    restarted = attempt(api)  # execution attempt 2 numbers its trial attempts again
    answer = send(api, restarted, population("p-2", 5), trial("r0", "q1", "failure", 0))
    assert answer.json()["outcomes"] == {
        "population": {"new": 1, "duplicate": 0, "conflict": 0},
        "trial": {"new": 1, "duplicate": 0, "conflict": 0},
    }
    latest = rounds(api)
    assert (latest["execution_attempt"], latest["execution_attempts"]) == (2, [1, 2])
    (second,) = latest["rounds"]
    assert (second["expected"], second["counts"]["failure"], second["counts"]["reported"]) == (
        5,
        1,
        1,
    )
    (earlier,) = rounds(api, attempt=1)["rounds"]
    assert earlier["expected"] == 3
    assert (earlier["counts"]["success"], earlier["counts"]["failure"]) == (1, 1)
    old_q1 = api.get(RUN + "/evaluation/val-1/trials/q1", params={"attempt": 1}).json()
    assert [(h["execution_attempt"], h["trial_attempt"]) for h in old_q1["attempts"]] == [
        (1, 3),
        (1, 0),
    ]
    new_q1 = api.get(RUN + "/evaluation/val-1/trials/q1").json()
    assert [(h["execution_attempt"], h["trial_attempt"]) for h in new_q1["attempts"]] == [(2, 0)]
    page = api.get(RUN + "/evaluation/val-1/trials", params={"attempt": 1}).json()
    assert [(t["trial_id"], t["status"]) for t in page["trials"]] == [
        ("q1", "success"),
        ("q2", "failure"),
    ]
    # q2 was reported by execution 1 only: execution 2's round does not have it.
    assert api.get(RUN + "/evaluation/val-1/trials/q2").status_code == 404
    one = api.get(RUN + "/evaluation/val-1", params={"attempt": 1}).json()
    assert (one["round_id"], one["execution_attempt"], one["expected"]) == ("val-1", 1, 3)


def test_a_new_execution_without_outcomes_leaves_the_latest_that_has_them(
    api: TestClient,
) -> None:
    send(api, attempt(api), trial("e0", "q1", "success"))
    attempt(api)  # started, nothing reported yet
    answer = rounds(api)
    assert (answer["execution_attempt"], answer["execution_attempts"]) == (1, [1])
    missing = api.get(RUN + "/evaluation", params={"attempt": 2})
    assert missing.status_code == 404
    assert "attempts with rounds: 1" in missing.json()["error"]["message"]


def test_a_round_that_does_not_exist_is_unknown_on_every_route(api: TestClient) -> None:
    token = attempt(api)
    empty_run = rounds(api)
    assert empty_run == {
        "state": "unknown",
        "execution_attempt": None,
        "execution_attempts": [],
        "rounds": [],
    }
    assert api.get(RUN + "/evaluation/val-1/trials").status_code == 404
    send(api, token, trial("e0", "q1", "success"))
    for path in ("/evaluation/nope", "/evaluation/nope/trials", "/evaluation/nope/trials/q1"):
        for params in ({}, {"attempt": 1}, {"attempt": 7}):
            response = api.get(RUN + path, params=params)
            assert response.status_code == 404, (path, params, response.text)
            assert response.json()["error"]["code"] == "not_found"
    assert api.get(RUN + "/evaluation/val-1", params={"attempt": 0}).status_code == 422
    side = api.get(
        "/api/v1/evaluation/matched",
        params={"left": "demo/eval-run/val-1", "right": "demo/eval-run/val-1", "right_attempt": 2},
    )
    assert side.status_code == 404
    assert "right_attempt" in side.json()["error"]["message"]


def test_the_retry_history_counts_every_attempt_beside_the_100_shown(api: TestClient) -> None:
    token = attempt(api)
    for start in range(0, 130, 32):
        events = [trial(f"e{n}", "q1", "failure", n) for n in range(start, min(start + 32, 130))]
        assert send(api, token, *events).status_code == 200
    history = api.get(RUN + "/evaluation/val-1/trials/q1").json()
    assert (history["total_attempts"], history["shown"], len(history["attempts"])) == (
        130,
        100,
        100,
    )
    assert history["attempts"][0]["trial_attempt"] == 129


def test_trial_pages_filter_by_status_over_all_outcomes(api: TestClient) -> None:
    token = attempt(api)
    statuses = ["success", "failure", "infra_error", "unscored"]
    events = [trial(f"e{i}", f"q{i:03d}", statuses[i % 4]) for i in range(200)]
    for start in range(0, 200, 32):
        assert send(api, token, *events[start : start + 32]).status_code == 200
    seen: list[str] = []
    after = None
    while True:
        params: dict[str, Any] = {"status": "failure", "limit": 20}
        if after:
            params["after"] = after
        page = api.get(RUN + "/evaluation/val-1/trials", params=params).json()
        seen += [t["trial_id"] for t in page["trials"]]
        after = page["next"]
        if after is None:
            break
    assert seen == [f"q{i:03d}" for i in range(200) if i % 4 == 1]
    bad = api.get(RUN + "/evaluation/val-1/trials", params={"status": "error"})
    assert bad.status_code == 422


def matched(api: TestClient) -> dict[str, Any]:
    answer: dict[str, Any] = api.get(
        "/api/v1/evaluation/matched",
        params={"left": "demo/base/val-1", "right": "demo/tuned/val-1"},
    ).json()
    return answer


def test_matched_evidence(api: TestClient) -> None:
    base, tuned = attempt(api, "base"), attempt(api, "tuned")
    send(
        api,
        base,
        population("p", 4),
        *[
            trial(f"b{i}", f"q{i}", s)
            for i, s in enumerate(["failure", "failure", "success", "success"])
        ],
    )
    send(
        api,
        tuned,
        population("p", 4),
        *[
            trial(f"t{i}", f"q{i}", s)
            for i, s in enumerate(["success", "success", "success", "failure"])
        ],
    )
    shown = matched(api)
    assert shown["transitions"]["failure_to_success"] == 2
    assert shown["transitions"]["success_to_failure"] == 1
    assert shown["difference"]["shown"] is True
    assert shown["difference"]["value"] == pytest.approx(0.25)
    assert shown["difference"]["exact"] == {"numerator": 1, "denominator": 4}
    assert shown["difference"]["mcnemar_exact_p"] == pytest.approx(1.0)
    assert "not statistical proof" in shown["difference"]["label"]


def test_matched_evidence_says_which_condition_failed(api: TestClient) -> None:
    base, tuned = attempt(api, "base"), attempt(api, "tuned")
    send(api, base, population("p", 3), trial("b0", "q0", "success"), trial("b1", "q1", "failure"))
    other = {**DIGESTS, "settings": "e" * 64}
    send(
        api,
        tuned,
        population("p", 3, **other),
        trial("t0", "q0", "failure"),
        trial("t2", "q2", "success"),
    )
    answer = matched(api)
    assert answer["difference"]["shown"] is False
    assert answer["difference"]["conditions"] == [
        {
            "code": "settings_digest_mismatch",
            "side": "both",
            # Neither declaration recorded its settings: said, not guessed.
            "reason": "settings digests differ: the left and the right round recorded no "
            "protocol settings (declared before they were recorded, by a producer that "
            "records none, or too large to record): only the digests are known to differ",
        },
        {
            "code": "left_incomplete_coverage",
            "side": "left",
            "reason": "left round is not completely scored (2 of 3 trials scored)",
        },
        {
            "code": "right_incomplete_coverage",
            "side": "right",
            "reason": "right round is not completely scored (2 of 3 trials scored)",
        },
    ]
    moves = answer["transitions"]
    assert (moves["success_to_failure"], moves["missing_left"], moves["missing_right"]) == (1, 1, 1)


def test_counts_follow_current_outcomes_in_any_arrival_order(api: TestClient) -> None:
    import random

    from tuneplane.evaluation.outcomes import TrialAttempt, count_round, current_outcomes

    statuses = ["success", "failure", "infra_error", "unscored"]

    rng = random.Random(11)
    reported = []
    # An execution's outcomes arrive in any order; a newer execution starts after the
    # older one stopped reporting (its token writes no more once the newer one started).
    for execution in (1, 2):
        token = attempt(api)
        mine = [
            TrialAttempt(f"q{n}", execution, trial_attempt, rng.choice(statuses))
            for n in range(30)
            for trial_attempt in range(rng.randint(0, 2))
        ]
        rng.shuffle(mine)
        for start in range(0, len(mine), 7):
            events = [
                trial(
                    f"e{a.trial_id}-{a.execution_attempt}-{a.trial_attempt}",
                    a.trial_id,
                    a.status,
                    a.trial_attempt,
                )
                for a in mine[start : start + 7]
            ]
            assert send(api, token, *events).status_code == 200
        reported += [(token, a) for a in mine]
    current = current_outcomes(a for _, a in reported)
    for execution in (1, 2):
        mine = [outcome for (e, _), outcome in current.items() if e == execution]
        expected = count_round(mine, expected=None)
        (state,) = rounds(api, attempt=execution)["rounds"]
        assert state["counts"] == {
            "success": expected.success,
            "failure": expected.failure,
            "infra_error": expected.infra_error,
            "unscored": expected.unscored,
            "reported": expected.reported,
        }


def test_the_run_object_moves_with_every_stored_observation(api: TestClient) -> None:
    token = attempt(api)
    assert api.get(RUN).json()["last_observation_id"] is None
    send(api, token, trial("t1", "q1", "failure"))
    first = api.get(RUN).json()["last_observation_id"]
    assert isinstance(first, int)
    send(api, token, trial("t1", "q1", "failure"))  # a duplicate stores nothing
    assert api.get(RUN).json()["last_observation_id"] == first
    send(api, token, {"event_id": "h1", "type": "health", "fields": {"gpu": 0.5}})
    second = api.get(RUN).json()["last_observation_id"]
    assert second > first
    send(api, token, trial("t2", "q1", "success", 1))  # a retry: the JSON moves again
    (listed,) = api.get("/api/v1/projects/demo/runs").json()
    assert listed["last_observation_id"] > second


def test_the_run_object_moves_only_with_its_own_observations(api: TestClient) -> None:
    quiet, busy = attempt(api, "quiet"), attempt(api, "busy")
    send(api, quiet, trial("t1", "q1", "failure"))
    own = api.get("/api/v1/projects/demo/runs/quiet").json()["last_observation_id"]
    send(api, busy, trial("t1", "q1", "failure"), trial("t2", "q2", "success", reward=1.0))
    newest = api.get("/api/v1/projects/demo/runs/busy").json()["last_observation_id"]
    assert newest > own
    assert api.get("/api/v1/projects/demo/runs/quiet").json()["last_observation_id"] == own
    listed = {run["run"]: run for run in api.get("/api/v1/projects/demo/runs").json()}
    assert listed["quiet"]["last_observation_id"] == own
    assert listed["busy"]["last_observation_id"] == newest
    attempt(api, "silent")
    assert api.get("/api/v1/projects/demo/runs/silent").json()["last_observation_id"] is None


def test_why_a_trial_has_its_status_is_kept_to_the_trial_answers(api: TestClient) -> None:
    token = attempt(api)
    why = {"reason_code": "reward_mismatch", "reason": "result.json's reward 1 differs"}
    unscored = trial("t1", "q1", "unscored", error_type="RewardFileEmptyError", **why)
    assert tally(send(api, token, unscored, trial("t2", "q2", "success", reward=1.0))) == (2, 0)
    assert tally(send(api, token, {**unscored, "event_id": "again"})) == (0, 1)
    changed = send(api, token, {**unscored, "event_id": "t3", "reason": "another sentence"})
    assert changed.status_code == 409
    assert changed.json()["error"]["conflicts"][0]["fields"] == ["reason"]
    bad = send(api, token, trial("t4", "q3", "unscored", reason_code="not a code", reason=""))
    assert bad.status_code == 422
    assert {d["field"] for d in bad.json()["error"]["details"]} >= {
        "events[0].reason_code",
        "events[0].reason",
    }
    listed = api.get(f"{RUN}/evaluation/val-1/trials").json()["trials"]
    assert [(t["trial_id"], t["error_type"], t["reason_code"], t["reason"]) for t in listed] == [
        ("q1", "RewardFileEmptyError", *why.values()),
        ("q2", None, None, None),
    ]
    (history,) = api.get(f"{RUN}/evaluation/val-1/trials/q1").json()["attempts"]
    assert {key: history[key] for key in why} == why


def test_a_changed_trial_result_is_refused_and_stores_nothing(api: TestClient) -> None:
    token = attempt(api)
    assert tally(send(api, token, trial("t1", "q1", "success", reward=1.0))) == (1, 0)
    free = {"event_id": "free", "type": "event", "name": "tick", "fields": {"n": 1}}
    changed = send(
        api, token, free, trial("t2", "q1", "failure", reward=0.0), trial("t3", "q2", "success")
    )
    assert changed.status_code == 409
    error = changed.json()["error"]
    assert error["code"] == "outcome_conflict"
    assert "round_id val-1, trial_id q1, trial_attempt 0" in error["message"]
    assert error["conflicts"] == [
        {
            "index": 1,
            "event_id": "t2",
            "type": "trial",
            "key": {
                "execution_attempt": 1,
                "round_id": "val-1",
                "trial_id": "q1",
                "trial_attempt": 0,
            },
            "fields": ["status", "reward"],
        }
    ]
    assert [d["field"] for d in error["details"]] == ["events[1].status", "events[1].reward"]
    # Nothing of the batch: not the free event, not the other trial, not the changed one.
    assert [o["event_id"] for o in api.get(RUN + "/observations").json()] == ["t1"]
    (state,) = rounds(api)["rounds"]
    assert state["counts"]["reported"] == 1
    assert state["counts"]["success"] == 1


def test_an_identical_re_send_is_a_duplicate_whatever_its_event_id(api: TestClient) -> None:
    token = attempt(api)
    send(api, token, population("p1", 2), trial("t1", "q1", "success", reward=1.0))
    again = send(api, token, population("p2", 2), trial("t9", "q1", "success", reward=1.0))
    assert tally(again) == (0, 2)
    assert again.json()["outcomes"] == {
        "population": {"new": 0, "duplicate": 1, "conflict": 0},
        "trial": {"new": 0, "duplicate": 1, "conflict": 0},
    }
    assert [o["event_id"] for o in api.get(RUN + "/observations").json()] == ["t1", "p1"]
    changed = send(api, token, population("p3", 2, **{**DIGESTS, "dataset": "f" * 64}))
    assert changed.status_code == 409
    assert changed.json()["error"]["conflicts"][0]["fields"] == ["digests.dataset"]
    assert changed.json()["error"]["conflicts"][0]["key"] == {
        "execution_attempt": 1,
        "round_id": "val-1",
    }
    assert [o["event_id"] for o in api.get(RUN + "/observations").json()] == ["t1", "p1"]


def test_conflicts_within_one_batch_refuse_it(api: TestClient) -> None:
    token = attempt(api)
    twice = send(api, token, trial("a", "q1", "success"), trial("b", "q1", "unscored"))
    assert twice.status_code == 409
    assert twice.json()["error"]["conflicts"][0]["index"] == 1
    same = send(api, token, trial("a", "q1", "success"), trial("b", "q1", "success"))
    assert tally(same) == (1, 1)
    assert rounds(api)["rounds"][0]["counts"]["reported"] == 1


def test_an_event_id_naming_another_outcome_is_refused(api: TestClient) -> None:
    token = attempt(api)
    send(api, token, trial("same-id", "q1", "success"))
    reused = send(api, token, trial("same-id", "q2", "success"))
    assert reused.status_code == 409
    assert reused.json()["error"]["details"][0]["field"] == "events[0].event_id"
    # A restarted execution's outcome under the old execution's event ID is another outcome.
    restarted = send(api, attempt(api), trial("same-id", "q1", "success"))
    assert restarted.status_code == 409
    assert "execution attempt 1" in restarted.json()["error"]["details"][0]["rule"]
    assert [o["event_id"] for o in api.get(RUN + "/observations").json()] == ["same-id"]
    assert api.get(RUN + "/evaluation/val-1/trials/q2").status_code == 404


def test_matched_evidence_picks_an_execution_attempt_per_side(api: TestClient) -> None:
    base = attempt(api, "base")
    send(api, base, population("p", 2), trial("b0", "q0", "failure"), trial("b1", "q1", "failure"))
    restarted = attempt(api, "base")
    send(api, restarted, population("p-2", 2), trial("r0", "q0", "success"))
    tuned = attempt(api, "tuned")
    send(api, tuned, population("p", 2), trial("t0", "q0", "success"), trial("t1", "q1", "success"))
    latest = matched(api)
    assert (latest["left"]["execution_attempt"], latest["left"]["execution_attempts"]) == (
        2,
        [1, 2],
    )
    assert [c["code"] for c in latest["difference"]["conditions"]] == ["left_incomplete_coverage"]
    first = api.get(
        "/api/v1/evaluation/matched",
        params={"left": "demo/base/val-1", "left_attempt": 1, "right": "demo/tuned/val-1"},
    ).json()
    assert first["left"]["execution_attempt"] == 1
    assert first["transitions"]["failure_to_success"] == 2
    assert first["difference"]["exact"] == {"numerator": 1, "denominator": 1}


def test_a_round_of_rewards_without_verdicts_withholds_its_rates_and_shows_its_rewards(
    api: TestClient,
) -> None:
    token = attempt(api)
    declared = {**population("d1", 4), "verdicts": False}
    rewarded = [trial(f"t{i}", f"q{i}", "unscored", reward=r) for i, r in enumerate((0.5, 1.0))]
    assert tally(send(api, token, declared, *rewarded, trial("t2", "q2", "unscored"))) == (4, 0)
    (state,) = rounds(api)["rounds"]
    assert state["verdicts"] is False
    for figure in ("success_rate", "scoring_coverage"):
        assert state[figure]["value"] is None
        assert state[figure]["codes"] == ["no_verdicts"]
    coverage = state["reward_coverage"]
    assert (coverage["value"], coverage["numerator"], coverage["denominator"]) == (0.5, 2, 4)
    assert len(coverage["wilson95"]) == 2
    assert state["mean_reward"] == {"value": 0.75, "numerator": 1.5, "denominator": 2}
    assert state["not_yet_reported"] == {"value": 1}
    # The same declaration again is a duplicate; one that gives verdicts is another round's.
    assert tally(send(api, token, {**declared, "event_id": "d2"})) == (0, 1)
    changed = send(api, token, population("d3", 4))
    assert changed.status_code == 409
    assert changed.json()["error"]["conflicts"][0]["fields"] == ["verdicts"]
    refused = send(api, token, {**population("d4", 4, round_id="val-2"), "verdicts": "no"})
    assert refused.status_code == 422
    assert refused.json()["error"]["details"][0]["field"] == "events[0].verdicts"


def test_a_round_of_verdicts_has_a_mean_reward_and_none_without_rewards(api: TestClient) -> None:
    token = attempt(api)
    events = [population("d1", 3), trial("t0", "q0", "success", reward=1.0)]
    events += [trial("t1", "q1", "failure", reward=0.0), trial("t2", "q2", "infra_error")]
    assert tally(send(api, token, *events)) == (4, 0)
    (state,) = rounds(api)["rounds"]
    assert state["verdicts"] is True
    assert state["mean_reward"] == {"value": 0.5, "numerator": 1.0, "denominator": 2}
    assert state["reward_coverage"]["numerator"] == 2
    assert tally(send(api, attempt(api, "other"), trial("u0", "q0", "unscored"))) == (1, 0)
    (other,) = rounds(api, "other")["rounds"]
    assert other["mean_reward"]["codes"] == ["no_rewards"]
    assert other["reward_coverage"]["codes"] == ["unknown_population"]


def test_a_round_of_repeated_tasks_has_pass_at_k_and_a_clustered_interval(
    api: TestClient,
) -> None:
    token = attempt(api)
    outcomes = {"q1-r0": "success", "q1-r1": "failure", "q1-r2": "failure",
                "q2-r0": "success", "q2-r1": "success", "q2-r2": "infra_error",
                "q3-r0": "failure"}  # fmt: skip
    events = [trial(f"e{i}", t, status) for i, (t, status) in enumerate(outcomes.items())]
    assert tally(send(api, token, population("p", 7), *events)) == (8, 0)
    found = api.get("/api/v1/projects/demo/runs/eval-run/evaluation/val-1").json()
    repeats = found["repeats"]
    assert (repeats["tasks"], repeats["most_repeats"]) == (3, 3)
    # q1: 1 of 3, q2: 2 of 2 (the errored repeat has no verdict), q3: 0 of 1.
    assert repeats["pass_at"] == [
        {"k": 1, "value": pytest.approx((1 / 3 + 1 + 0) / 3), "tasks": 3},
        {"k": 2, "value": pytest.approx((1 - 1 / 3 + 1) / 2), "tasks": 2},
        {"k": 3, "value": 1.0, "tasks": 1},
    ]
    clustered = repeats["clustered_rate"]
    assert clustered["value"] == pytest.approx(3 / 6)  # the scored trials' success rate
    assert found["success_rate"]["value"] == pytest.approx(clustered["value"])
    low, high = clustered["interval95"]
    assert 0 <= low < 0.5 < high <= 1
    assert "cluster" in clustered["method"]


def test_a_round_without_repeats_has_none(api: TestClient) -> None:
    token = attempt(api)
    send(api, token, trial("t1", "q1", "success"), trial("t2", "q2", "failure"))
    assert api.get("/api/v1/projects/demo/runs/eval-run/evaluation/val-1").json()["repeats"] is None


def checkpoint_event(event_id: str, name: str, round_id: str = "val-1") -> dict[str, Any]:
    """As the importers and the coordinator record a round's checkpoint beside it."""
    return {
        "event_id": event_id,
        "type": "event",
        "name": "evaluation/checkpoint",
        "fields": {"round_id": round_id, "checkpoint": name, "checkpoint_digest": "sha256:ab"},
    }


def test_a_round_s_checkpoint_is_on_its_reads_and_the_matched_view(api: TestClient) -> None:
    base, tuned = attempt(api, "base"), attempt(api, "tuned")
    for token, name in ((base, "qwen-step-100"), (tuned, "qwen-step-200")):
        outcome = trial("t1", "q1", "success")
        assert tally(send(api, token, population("p", 1), checkpoint_event("c", name), outcome))
    (listed,) = rounds(api, "base")["rounds"]
    assert listed["checkpoint"] == {"name": "qwen-step-100", "digest": "sha256:ab"}
    one = api.get("/api/v1/projects/demo/runs/tuned/evaluation/val-1").json()
    assert one["checkpoint"]["name"] == "qwen-step-200"
    both = matched(api)
    assert (both["left"]["checkpoint"]["name"], both["right"]["checkpoint"]["name"]) == (
        "qwen-step-100",
        "qwen-step-200",
    )
    # A round that recorded none says so: null, not another round's.
    other = attempt(api, "other")
    send(api, other, population("p2", 1, round_id="val-2"), checkpoint_event("c2", "x"))
    assert rounds(api, "other")["rounds"][0]["checkpoint"] is None
