"""Managing runs through the API: display names, groups, tags and notes; deleting runs and
projects for real (every table, and the blob store: a directory and a real S3-compatible
server), on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Connection, func, select

from tests.conftest import INGEST_SECRET
from tests.helpers import log
from tests.server.conftest import admin_client
from tests.server.test_trajectories import blob_keys, evaluation, messages, rollout
from tuneplane.contract.arena import parse_arena_batch
from tuneplane.contract.outbound import parse_allow_list
from tuneplane.server.settings import Settings
from tuneplane.store.arena import ArenaIngest
from tuneplane.store.database import Database
from tuneplane.store.schema import metadata, metrics, projects, runs

API = "/api/v1/projects"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """A webhook made below is on loopback, which outbound calls reach when listed."""
    listed = parse_allow_list("127.0.0.1")
    assert listed is not None
    return dataclasses.replace(settings, outbound_allow=listed)


@pytest.fixture(params=["directory", "s3"])
def blob_settings(request: pytest.FixtureRequest, settings: Settings) -> Settings:
    if request.param == "s3":
        bucket = request.getfixturevalue("s3_bucket")
        return dataclasses.replace(settings, blob_url=f"s3://{bucket}/bodies")
    return settings


@pytest.fixture
def blob_api(blob_settings: Settings) -> Iterator[TestClient]:
    yield from admin_client(blob_settings)


def wait_for(check: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(0.05)
    raise AssertionError("timed out")


def database_of(api: TestClient) -> Database:
    database: Database = api.app.state.tuneplane.database  # type: ignore[attr-defined]
    return database


def fill_run(api: TestClient, project: str, run: str) -> int:
    """A run with something in every kind of table: points in several blocks, invalid
    points, logs, events, alerts, evaluation outcomes, trajectories, a status, a heartbeat,
    a share link, tags; and an Arena event. Returns the run's id."""
    made = api.post(f"{API}/{project}/runs", json={"run": run, "tags": ["a", "b"]})
    assert made.status_code == 201, made.text
    token = api.post(f"{API}/{project}/runs/{run}/attempts", json={"config": {"lr": 2}})
    auth = {"Authorization": f"Bearer {token.json()['token']}"}
    ingest = "/api/v1/ingest"
    # A rule of this run alone, which the NaN reward below fires (an episode, a watch).
    rule = {"kind": "nan", "metric": "reward", "run": run}
    assert api.post(f"{API}/{project}/alert-rules", json=rule).status_code == 201
    for first in range(0, 3000, 1500):
        steps = list(range(first, first + 1500))
        body = {
            "series": [{"name": "loss", "steps": steps, "values": [1 / (s + 1) for s in steps]}],
            "invalid": [{"name": "reward", "steps": [first + 2], "kinds": ["nan"]}],
        }
        answer = api.post(f"{ingest}/scalars", json=body, headers=auth)
        assert answer.status_code == 200, answer.text
    lines = [{"seq": i, "stream": "stdout", "time": 1, "text": f"line {i}"} for i in range(50)]
    assert api.post(f"{ingest}/logs", json={"lines": lines}, headers=auth).status_code == 200
    events = [
        {"event_id": "e1", "type": "event", "name": "tick", "fields": {"i": 1}},
        {"event_id": "p1", "type": "population", "round_id": "val", "expected": 2},
        {"event_id": "t1", "type": "trial", "round_id": "val", "trial_id": "t0",
         "trial_attempt": 0, "status": "success", "eligible": True, "reward": 1.0},
    ]  # fmt: skip
    answer = api.post(f"{ingest}/observations", json={"events": events}, headers=auth)
    assert answer.status_code == 200, answer.text
    alert = {"alerts": [{"alert_id": "a1", "title": "hot", "level": "warn"}]}
    assert api.post(f"{ingest}/alerts", json=alert, headers=auth).status_code == 200
    documents = [evaluation("t0"), rollout(5, "r-1"), evaluation("t1", messages=messages(4))]
    body = {"trajectories": documents}
    assert api.post(f"{ingest}/trajectories", json=body, headers=auth).json()["new"] == 3
    health = {"queued": 1, "sent": 1, "dropped": 0, "failed_sends": 0, "queue_size": 0,
              "queue_capacity": 10, "interval": 10.0}  # fmt: skip
    assert api.post(f"{ingest}/heartbeat", json=health, headers=auth).status_code == 200
    status = {"status": "failed", "exit_code": 1}
    assert api.post(f"{ingest}/status", json=status, headers=auth).status_code == 200
    assert api.post(f"{API}/{project}/runs/{run}/shares", json={}).status_code == 201
    arena = {"logs": [log("l1", 1, {"arena": 1.0}, project=project, run=run)]}
    assert api.post("/ingest", json=arena, headers=_arena()).status_code == 200
    with database_of(api).connect() as connection:
        run_id: int = connection.execute(
            select(runs.c.id).join(projects).where(projects.c.name == project, runs.c.name == run)
        ).scalar_one()
    return run_id


def _arena() -> dict[str, str]:
    return {"Authorization": f"Bearer {INGEST_SECRET}"}


def rows_of_run(connection: Connection, run_id: int, metric_ids: list[int]) -> dict[str, int]:
    """Rows anywhere in the schema that refer to the run (or to its metrics)."""
    found = {}
    for table in metadata.sorted_tables:
        conditions = []
        if "run_id" in table.c:
            conditions.append(table.c.run_id == run_id)
        if "metric_id" in table.c and metric_ids:
            conditions.append(table.c.metric_id.in_(metric_ids))
        if table is runs:
            conditions.append(runs.c.id == run_id)
        for condition in conditions:
            count = connection.execute(select(func.count()).where(condition)).scalar_one()
            if count:
                found[table.name] = found.get(table.name, 0) + count
    return found


def _metric_ids(api: TestClient, run_id: int) -> list[int]:
    with database_of(api).connect() as connection:
        return list(
            connection.execute(select(metrics.c.id).where(metrics.c.run_id == run_id)).scalars()
        )


def _project_rows(api: TestClient, project_id: int) -> dict[str, int]:
    """Rows anywhere in the schema that refer to the project."""
    found = {}
    with database_of(api).connect() as connection:
        for table in metadata.sorted_tables:
            if "project_id" in table.c:
                condition = table.c.project_id == project_id
                count = connection.execute(select(func.count()).where(condition)).scalar_one()
                if count:
                    found[table.name] = count
    return found


def _has_rows(api: TestClient, run_id: int, metric_ids: list[int], tables: set[str]) -> bool:
    with database_of(api).connect() as connection:
        return tables <= set(rows_of_run(connection, run_id, metric_ids))


def _purged(api: TestClient, run_id: int, metric_ids: list[int]) -> bool:
    with database_of(api).connect() as connection:
        return not rows_of_run(connection, run_id, metric_ids)


def test_a_deleted_run_leaves_nothing_in_any_table_or_blob_store(
    blob_api: TestClient, blob_settings: Settings
) -> None:
    doomed = fill_run(blob_api, "lab", "doomed")
    kept = fill_run(blob_api, "lab", "kept")
    doomed_metrics, kept_metrics = _metric_ids(blob_api, doomed), _metric_ids(blob_api, kept)
    alerting = {"alert_rules", "alert_watches", "alert_episodes"}
    # Both runs' alerts are judged (a moment after their points) before anything is counted.
    wait_for(
        lambda: (
            _has_rows(blob_api, doomed, doomed_metrics, alerting)
            and _has_rows(blob_api, kept, kept_metrics, alerting - {"alert_rules"})
        )
    )
    with database_of(blob_api).connect() as connection:
        before = rows_of_run(connection, doomed, doomed_metrics)
        kept_before = rows_of_run(connection, kept, kept_metrics)
    assert {"point_blocks", "point_block_data", "invalid_points", "log_lines", "events",
            "alerts", "observations", "trajectories", "trial_results", "eval_rounds",
            "share_links", "attempts", "run_tags", *alerting} <= set(before)  # fmt: skip
    assert len(blob_keys(blob_settings)) == 6

    answer = blob_api.delete(f"{API}/lab/runs/doomed")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"project": "lab", "run": "doomed", "deleted": True}
    assert blob_api.get(f"{API}/lab/runs/doomed").status_code == 404
    assert [r["run"] for r in blob_api.get(f"{API}/lab/runs").json()] == ["kept"]

    wait_for(lambda: _purged(blob_api, doomed, doomed_metrics))
    with database_of(blob_api).connect() as connection:
        assert rows_of_run(connection, kept, kept_metrics) == kept_before
    assert len(blob_keys(blob_settings)) == 3  # the kept run's bodies, only
    assert blob_api.delete(f"{API}/lab/runs/doomed").status_code == 404


def test_a_deleted_name_is_free_at_once_and_old_tokens_stop(api: TestClient) -> None:
    fill_run(api, "lab", "again")
    token = api.post(f"{API}/lab/runs/again/attempts").json()["token"]
    assert api.delete(f"{API}/lab/runs/again").status_code == 200
    made = api.post(f"{API}/lab/runs", json={"run": "again", "config": {"new": True}})
    assert made.status_code == 201, made.text
    assert made.json()["point_count"] == 0
    assert made.json()["tags"] == []
    points = {"series": [{"name": "loss", "steps": [1], "values": [0.5]}]}
    late = api.post(
        "/api/v1/ingest/scalars", json=points, headers={"Authorization": f"Bearer {token}"}
    )
    assert late.status_code == 401, late.text
    # The Arena route names runs: its next batch goes to the new run.
    arena = {"logs": [log("x", 3, {"m": 1.0}, project="lab", run="again")]}
    assert api.post("/ingest", json=arena, headers=_arena()).json()["run_created"] is False
    assert api.get(f"{API}/lab/runs/again").json()["point_count"] == 1


def test_a_deleted_project_goes_with_its_runs_and_members(api: TestClient) -> None:
    ids = [fill_run(api, "gone", name) for name in ("one", "two")]
    fill_run(api, "stays", "one")
    hook = {"url": "http://127.0.0.1:9/hook", "format": "json"}
    assert api.post(f"{API}/gone/webhooks", json=hook).status_code == 201
    metric_ids = [_metric_ids(api, run_id) for run_id in ids]
    with database_of(api).connect() as connection:
        project_id = connection.execute(
            select(projects.c.id).where(projects.c.name == "gone")
        ).scalar_one()
    assert {"alert_rules", "alert_rule_versions", "webhooks"} <= set(
        _project_rows(api, project_id)
    )  # the project's default rules, their version, the webhook
    assert api.delete(f"{API}/gone").status_code == 200
    assert api.get(f"{API}/gone/runs").status_code == 404
    assert [p["project"] for p in api.get(f"{API}").json()] == ["stays"]
    for run_id, metric in zip(ids, metric_ids, strict=True):
        wait_for(lambda run_id=run_id, metric=metric: _purged(api, run_id, metric))

    def project_gone() -> bool:
        with database_of(api).connect() as connection:
            return connection.execute(select(func.count()).select_from(projects)).scalar() == 1

    wait_for(project_gone)
    assert _project_rows(api, project_id) == {}
    assert api.post(f"{API}/gone/runs", json={"run": "one"}).status_code == 201
    assert api.get(f"{API}/stays/runs/one").json()["point_count"] > 0


def test_a_run_is_renamed_tagged_grouped_and_annotated(api: TestClient) -> None:
    api.post(f"{API}/lab/runs", json={"run": "r1", "config": {"lr": 1}, "group": "sweep-1"})
    answer = api.patch(
        f"{API}/lab/runs/r1",
        json={"display_name": "baseline (seed 1)", "tags": ["base", "seed-1", "base"],
              "note": "<b>not html</b>\nsecond line"},
    )  # fmt: skip
    assert answer.status_code == 200, answer.text
    run = api.get(f"{API}/lab/runs/r1").json()
    assert (run["run"], run["display_name"], run["group"], run["tags"], run["note"]) == (
        "r1", "baseline (seed 1)", "sweep-1", ["base", "seed-1"], "<b>not html</b>\nsecond line",
    )  # fmt: skip
    assert run["config"] == {"lr": 1}
    cleared = api.patch(f"{API}/lab/runs/r1", json={"group": "", "tags": []}).json()
    assert (cleared["group"], cleared["tags"], cleared["display_name"]) == (
        None, [], "baseline (seed 1)",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("body", "field", "rule"),
    [
        ({"config": {"lr": 2}}, "config", "unknown field"),
        ({}, "body", "name at least one"),
        ({"tags": "a"}, "tags", "must be a list"),
        ({"tags": ["ok", "no spaces"]}, "tags[1]", "letters, digits"),
        ({"tags": ["t"] * 33}, "tags", "at most 32"),
        ({"display_name": "x" * 257}, "display_name", "at most 256"),
        ({"group": "a b"}, "group", "letters, digits"),
        ({"note": "bell\x07"}, "note", "printable"),
    ],
)
def test_bad_changes_name_the_field_and_change_nothing(
    api: TestClient, body: dict[str, Any], field: str, rule: str
) -> None:
    api.post(f"{API}/lab/runs", json={"run": "r1", "tags": ["keep"]})
    answer = api.patch(f"{API}/lab/runs/r1", json=body)
    assert answer.status_code == 422, answer.text
    detail = answer.json()["error"]["details"][0]
    assert detail["field"] == field
    assert rule in detail["rule"]
    assert api.get(f"{API}/lab/runs/r1").json()["tags"] == ["keep"]


def test_display_names_of_runs_and_projects_take_256_characters(api: TestClient) -> None:
    """Any printable name people give, up to 256 characters, on both engines (PostgreSQL
    holds a column to its length); a project keeps the name it was created with."""
    long = "é" * 255 + "x"
    made = api.post(
        f"{API}/qwen2-5-evals/runs",
        json={"run": "r1", "display_name": long, "project_display_name": "Qwen2.5 evals"},
    )
    assert made.status_code == 201, made.text
    assert made.json()["display_name"] == long
    again = api.patch(f"{API}/qwen2-5-evals/runs/r1", json={"display_name": long[::-1]})
    assert again.status_code == 200, again.text
    later = api.post(
        f"{API}/qwen2-5-evals/runs", json={"run": "r2", "project_display_name": "another name"}
    )
    assert later.status_code == 201, later.text
    (listed,) = [p for p in api.get(API).json() if p["project"] == "qwen2-5-evals"]
    assert listed["display_name"] == "Qwen2.5 evals"
    bad = api.post(f"{API}/lab/runs", json={"run": "r3", "project_display_name": "a\tb"})
    assert bad.status_code == 422
    assert bad.json()["error"]["details"][0]["field"] == "project_display_name"
    assert api.get(f"{API}/lab/runs/r3").status_code == 404


def test_tags_group_and_note_at_creation_are_checked(api: TestClient) -> None:
    answer = api.post(f"{API}/lab/runs", json={"run": "r1", "tags": ["bad tag"]})
    assert answer.status_code == 422
    assert answer.json()["error"]["details"][0]["field"] == "tags[0]"
    assert api.get(f"{API}/lab/runs/r1").status_code == 404


def test_another_server_that_remembered_a_deleted_run_writes_to_the_new_one(
    api: TestClient,
) -> None:
    """A second server process on the same database (its own Arena ingest, which remembers
    the runs it wrote to) keeps writing under the name after the run is deleted."""
    other = ArenaIngest(database_of(api))
    first = parse_arena_batch({"logs": [log("o1", 1, {"m": 1.0}, project="lab", run="shared")]})
    old_id = asyncio.run(other.ingest(first)).run.id
    old_metrics = _metric_ids(api, old_id)
    assert api.delete(f"{API}/lab/runs/shared").status_code == 200
    wait_for(lambda: _purged(api, old_id, old_metrics))
    again = parse_arena_batch({"logs": [log("o2", 2, {"m": 2.0}, project="lab", run="shared")]})
    outcome = asyncio.run(other.ingest(again))
    assert outcome.run_created is True  # (SQLite may give the new run the old id)
    assert api.get(f"{API}/lab/runs/shared").json()["point_count"] == 1
