"""What a round records beside its outcomes, through the API on SQLite and PostgreSQL: the
runs list's latest evaluated checkpoint."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.server import test_evaluation_api
from tests.server.test_evaluation_api import attempt, checkpoint_event, population, send, tally
from tests.server.test_evaluation_api import trial as result

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
