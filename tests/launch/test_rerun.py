"""A re-run names its parent: a run of the same project that exists, recorded in the new
run's check record; one that does not exist is a 422 naming ``parent`` that stores and
starts nothing. A run's jobs are listed alone with ``?run=``. Through real servers on both
engines."""

from __future__ import annotations

from tests.launch.test_submit import LAUNCH, PROJECT, Server
from tests.launch.test_submit import server as server
from tuneplane.contract.launch import CHECK_RECORD_KEY


def test_a_rerun_records_its_parent_and_an_unknown_parent_is_refused(server: Server) -> None:
    first = {"recipe": "tiny", "run": "first", "parameters": {"mode": "ok"}}
    assert server.launch(first).status_code == 201
    unknown = {**first, "run": "orphan", "parent": "nowhere"}
    refused = server.launch(unknown, key="orphan-1")
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["details"] == [
        {"field": "parent", "rule": f"no run named 'nowhere' in project '{PROJECT}'"}
    ]
    assert server.http.get(f"/api/v1/projects/{PROJECT}/runs/orphan").status_code == 404
    assert [job["run"] for job in server.jobs()] == ["first"]
    malformed = server.launch({**first, "run": "bad", "parent": "a b"})
    assert malformed.status_code == 422
    assert malformed.json()["error"]["details"][0]["field"] == "parent"

    child = server.launch({**first, "run": "second", "parent": "first"}, key="second-1")
    assert child.status_code == 201, child.text
    assert child.json()["check_record"]["parent"] == "first"
    assert server.run("second")["config"][CHECK_RECORD_KEY]["parent"] == "first"
    assert "parent" not in server.run("first")["config"][CHECK_RECORD_KEY]
    listed = server.http.get(f"{LAUNCH}/jobs", params={"run": "second"}).json()
    assert [job["run"] for job in listed] == ["second"]
    assert server.http.get(f"{LAUNCH}/jobs", params={"run": "nothing"}).json() == []
    for job in server.jobs():
        server.wait(job["id"], "succeeded")
