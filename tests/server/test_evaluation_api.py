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


def rounds(api: TestClient, run: str = "eval-run") -> dict[str, Any]:
    answer: dict[str, Any] = api.get(f"/api/v1/projects/demo/runs/{run}/evaluation").json()
    return answer


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
    assert send(api, token, first, twin).json() == {"new": 2, "duplicate": 0}
    changed = {**first, "fields": {"n": 99}}
    assert send(api, token, changed).json() == {"new": 0, "duplicate": 1}
    # A restarted job (a new execution attempt) retrying the same event changes nothing.
    assert send(api, attempt(api), changed).json() == {"new": 0, "duplicate": 1}
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
    assert rounds(api) == {"state": "unknown", "rounds": []}


def test_results_before_and_after_the_declaration(api: TestClient) -> None:
    token = attempt(api)
    send(api, token, trial("t1", "q1", "success"), trial("t2", "q2", "failure"))
    (early,) = rounds(api)["rounds"]
    assert early["declared"] is False
    assert early["success_rate"]["value"] == 0.5
    assert early["scoring_coverage"]["value"] is None
    assert "unknown population" in early["scoring_coverage"]["reason"]
    send(api, token, population("p1", 4), trial("t3", "q3", "infra_error"))
    send(api, token, population("p2", 40))  # a changed population needs a new round id
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


def test_more_trials_than_expected_gives_no_percentage(api: TestClient) -> None:
    token = attempt(api)
    send(api, token, population("p", 1), trial("a", "q1", "success"), trial("b", "q2", "success"))
    (state,) = rounds(api)["rounds"]
    for number in ("success_rate", "scoring_coverage", "not_yet_reported"):
        assert state[number]["value"] is None
        assert "2 distinct trials" in state[number]["reason"]


def test_ineligible_outcomes_cannot_be_eligible(api: TestClient) -> None:
    token = attempt(api)
    for status in ("infra_error", "unscored"):
        response = send(api, token, trial("t", "q", status, eligible=True))
        assert response.status_code == 422
        assert response.json()["error"]["details"][0]["field"] == "events[0].eligible"
    assert send(api, token, trial("t", "q", "success", eligible=True)).status_code == 200


def test_the_highest_attempt_wins_in_any_order_and_restarts_are_isolated(
    api: TestClient,
) -> None:
    first = attempt(api)
    send(api, first, trial("e2", "q1", "success", 2))
    send(api, first, trial("e1", "q1", "failure", 1))  # an older attempt arriving late
    send(api, first, trial("e0", "q1", "infra_error", 0))
    page = api.get(RUN + "/evaluation/val-1/trials").json()["trials"]
    assert [(t["trial_id"], t["status"], t["attempts"]) for t in page] == [("q1", "success", 3)]
    restarted = attempt(api)  # execution attempt 2 numbers its trial attempts again
    send(api, restarted, trial("r0", "q1", "failure", 0))
    (current,) = api.get(RUN + "/evaluation/val-1/trials").json()["trials"]
    assert (current["status"], current["execution_attempt"]) == ("failure", 2)
    history = api.get(RUN + "/evaluation/val-1/trials/q1").json()
    assert [(h["execution_attempt"], h["trial_attempt"]) for h in history] == [
        (2, 0),
        (1, 2),
        (1, 1),
        (1, 0),
    ]
    assert api.get(RUN + "/evaluation/val-1/trials/nope").status_code == 404


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
    assert answer["difference"]["reasons"] == [
        "settings digests differ",
        "left round is not completely scored (2 of 3 trials scored)",
        "right round is not completely scored (2 of 3 trials scored)",
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
    expected = count_round(current_outcomes(a for _, a in reported).values(), expected=None)
    (state,) = rounds(api)["rounds"]
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
