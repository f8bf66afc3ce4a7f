"""Trajectories through the API: upload, identity, caps, pages of messages, deletion and
expiry, on SQLite and PostgreSQL, with bodies in a directory and in a real S3-compatible
server process."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
import zlib
from pathlib import Path
from typing import Any

import boto3
import httpx
import orjson
import pytest
from fastapi.testclient import TestClient

from tests.serving import running_server
from tuneplane.contract.trajectories import selection_rank
from tuneplane.server.app import create_app
from tuneplane.server.settings import Settings
from tuneplane.server.sweeper import sweep_once
from tuneplane.store.schema import body_sweeps, pending_bodies, trajectories

RUN = "/api/v1/projects/demo/runs/agent"


def attempt(api: TestClient, run: str = "agent") -> dict[str, str]:
    api.post("/api/v1/projects/demo/runs", json={"run": run})
    token = api.post(f"/api/v1/projects/demo/runs/{run}/attempts").json()["token"]
    return {"Authorization": f"Bearer {token}"}


def messages(count: int, text: str = "step") -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{text} {i}"}
        for i in range(count)
    ]


def evaluation(trial_id: str, trial_attempt: int = 0, **extra: Any) -> dict[str, Any]:
    conversation = extra.pop("messages", messages(3))
    return {
        "scope": "evaluation",
        "round_id": extra.pop("round_id", "val"),
        "trial_id": trial_id,
        "trial_attempt": trial_attempt,
        "messages": conversation,
        "total_messages": len(conversation),
        "complete": True,
        "capture_policy": "all",
        **extra,
    }


def rollout(step: int, trajectory_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "scope": "training",
        "step": step,
        "trajectory_id": trajectory_id,
        "messages": messages(2),
        "total_messages": 2,
        "complete": True,
        "capture_policy": "sampled",
        **extra,
    }


def send(api: TestClient, token: dict[str, str], *documents: dict[str, Any]) -> Any:
    return api.post("/api/v1/ingest/trajectories", json={"trajectories": list(documents)},
                    headers=token)  # fmt: skip


def index(api: TestClient, **filters: Any) -> dict[str, Any]:
    answer = api.get(RUN + "/trajectories", params=filters)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def stored_keys(api: TestClient) -> set[str]:
    database = api.app.state.tuneplane.database  # type: ignore[attr-defined]
    with database.connect() as connection:
        rows = connection.execute(trajectories.select()).all()
    return {row.body_key for row in rows if row.body_key}


def blob_keys(settings: Settings) -> set[str]:
    """What the blob store holds, read from the store itself (a directory or the bucket)."""
    if settings.blob_url is None:
        root = settings.data_dir / "blobs"
        return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
    bucket, _, prefix = settings.blob_url.removeprefix("s3://").partition("/")
    listed = boto3.client("s3").list_objects_v2(Bucket=bucket)
    return {item["Key"].removeprefix(prefix + "/") for item in listed.get("Contents", [])}


def test_a_trajectory_is_stored_paged_and_a_resend_is_a_duplicate(
    blob_api: TestClient, blob_settings: Settings
) -> None:
    token = attempt(blob_api)
    tool_call = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "name": "python", "arguments": {"code": "17 * 3"}}],
        "tokens": {"input": 12, "output": 9},
        "ms": 420.5,
    }
    conversation = [*messages(60), tool_call, {"role": "tool", "tool_call_id": "c1",
                                               "content": "51"}]  # fmt: skip
    documents = (evaluation("q1", messages=conversation), rollout(7, "r0", reward=0.25))
    first = send(blob_api, token, *documents)
    assert first.status_code == 200, first.text
    assert first.json() == {"new": 2, "duplicate": 0, "not_retained": 0}
    again = send(blob_api, token, *documents)
    assert again.json() == {"new": 0, "duplicate": 2, "not_retained": 0}

    listed = index(blob_api, scope="evaluation")
    assert listed["total"] == 1
    (row,) = listed["items"]
    assert row["trial_id"] == "q1"
    assert (row["message_count"], row["total_messages"], row["truncated"]) == (62, 62, False)
    assert row["body"]["state"] == "stored"
    page = blob_api.get(f"{RUN}/trajectories/{row['id']}", params={"offset": 50, "limit": 10})
    assert page.status_code == 200, page.text
    assert [m["content"] for m in page.json()["messages"]] == [f"step {i}" for i in range(50, 60)]
    assert page.json()["next_offset"] == 60
    last = blob_api.get(f"{RUN}/trajectories/{row['id']}", params={"offset": 60}).json()
    assert last["messages"] == [tool_call, conversation[-1]]
    assert last["next_offset"] is None
    # Each body is in the blob store once, under the key its row holds.
    assert stored_keys(blob_api) == blob_keys(blob_settings)
    assert len(blob_keys(blob_settings)) == 2


def test_a_changed_resend_is_refused_and_stores_nothing_of_its_batch(api: TestClient) -> None:
    token = attempt(api)
    assert send(api, token, rollout(1, "r0", reward=0.5)).json()["new"] == 1
    changed = send(api, token, rollout(2, "fresh"), rollout(1, "r0", reward=0.75))
    assert changed.status_code == 409, changed.text
    error = changed.json()["error"]
    assert error["code"] == "trajectory_conflict"
    assert "training/1/r0" in error["message"]
    assert error["details"] == [
        {"field": "trajectories[1].reward", "rule": "differs from the stored one"}
    ]
    different_text = send(
        api, token, {**rollout(1, "r0", reward=0.5), "messages": messages(2, "x")}
    )
    assert different_text.json()["error"]["details"][0]["field"] == "trajectories[0].messages"
    assert index(api)["total"] == 1  # "fresh" was not stored either


@pytest.mark.parametrize(
    ("document", "field", "rule"),
    [
        (evaluation("q", messages=messages(1025)), "messages", "at most 1024 messages"),
        (evaluation("q", messages=[{"role": "user", "content": "x" * (1024 * 1024)}]), "",
         "at most 1024 KiB"),
        ({**evaluation("q"), "total_messages": 5}, "complete", "a truncated conversation"),
        ({**evaluation("q"), "reward": 1.0}, "reward", "training rollout's field"),
        ({**rollout(1, "r"), "colour": "red"}, "colour", "unknown field"),
        (rollout(1, "r", diagnostic="bad"), "diagnostic", "must be one of"),
        (rollout(1, "r", diagnostic="low_reward"), "diagnostic", "needs the finite reward"),
        ({**rollout(1, "r"), "messages": [{"role": "robot", "content": "hi"}]},
         "messages[0].role", "must be one of"),
        ({**rollout(1, "r"), "messages": [{"role": "user", "content": "hi", "tool_calls": []}]},
         "messages[0].tool_calls", "only an assistant message"),
    ],
)  # fmt: skip
def test_bad_documents_are_refused_naming_the_field(
    api: TestClient, document: dict[str, Any], field: str, rule: str
) -> None:
    token = attempt(api)
    answer = send(api, token, rollout(5, "fine"), document)
    assert answer.status_code == 422, answer.text
    violation = answer.json()["error"]["details"][0]
    assert violation["field"] == f"trajectories[1].{field}".rstrip(".")
    assert rule in violation["rule"]
    assert index(api)["total"] == 0


def test_a_training_step_keeps_at_most_32_rollouts(api: TestClient) -> None:
    token = attempt(api)
    for start in range(0, 32, 16):
        batch = [rollout(3, f"r{i}") for i in range(start, start + 16)]
        assert send(api, token, *batch).json()["new"] == 16
    refused = send(api, token, rollout(4, "other-step"), rollout(3, "r32"))
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "retention_cap"
    assert "step 3" in refused.json()["error"]["message"]
    assert index(api, scope="training", step=4)["total"] == 0
    assert send(api, token, rollout(4, "other-step")).json()["new"] == 1


def _declare(api: TestClient, token: dict[str, str], expected: int, **extra: Any) -> None:
    event = {"event_id": "pop", "type": "population", "round_id": "val", "expected": expected,
             **extra}  # fmt: skip
    answer = api.post("/api/v1/ingest/observations", json={"events": [event]}, headers=token)
    assert answer.status_code == 200, answer.text


def _retained(api: TestClient, run: str = "agent") -> set[str]:
    rows = api.get(f"/api/v1/projects/demo/runs/{run}/trajectories",
                   params={"scope": "evaluation", "limit": 500}).json()["items"]  # fmt: skip
    return {row["trial_id"] for row in rows if row["body"]["state"] == "stored"}


def test_a_large_cohort_keeps_the_text_of_the_same_32_trials_in_any_order(
    api: TestClient, settings: Settings
) -> None:
    trial_ids = [f"task{i}-s0" for i in range(80)]
    lowest = set(sorted(trial_ids, key=selection_rank)[:32])
    for run, seed in (("agent", 1), ("agent-again", 2)):
        token = attempt(api, run)
        _declare(api, token, expected=500)
        shuffled = random.Random(seed).sample(trial_ids, len(trial_ids))
        for start in range(0, 80, 16):
            answer = send(api, token, *(evaluation(t) for t in shuffled[start : start + 16]))
            assert answer.status_code == 200, answer.text
        assert _retained(api, run) == lowest
    listed = index(api, scope="evaluation", limit=500)
    assert listed["total"] == 80  # every trial is indexed; 48 without their text
    assert sum(row["body"]["state"] == "not_retained" for row in listed["items"]) == 48
    # The bodies of trials that lost their place are gone from the store.
    assert len(blob_keys(settings)) == 64
    assert stored_keys(api) == blob_keys(settings)


def test_a_declared_text_cap_overrides_the_default_and_zero_keeps_none(api: TestClient) -> None:
    token = attempt(api)
    _declare(api, token, expected=10, text_samples=3)
    assert send(api, token, *(evaluation(f"t{i}") for i in range(10))).json() == {
        "new": 3, "duplicate": 0, "not_retained": 7,
    }  # fmt: skip
    token = attempt(api, "silent")
    _declare(api, token, expected=10, text_samples=0)
    assert send(api, token, evaluation("t0")).json()["not_retained"] == 1
    assert _retained(api, "silent") == set()


def test_an_owner_deletes_bodies_early_and_the_counts_stay(
    blob_api: TestClient, blob_settings: Settings
) -> None:
    token = attempt(blob_api)
    trial = {"event_id": "t", "type": "trial", "round_id": "val", "trial_id": "q1",
             "trial_attempt": 0, "status": "failure", "eligible": False}  # fmt: skip
    blob_api.post("/api/v1/ingest/observations", json={"events": [trial]}, headers=token)
    send(blob_api, token, evaluation("q1"), evaluation("q2"))
    answer = blob_api.delete(RUN + "/trajectories", params={"trial_id": "q1"})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"deleted": 1, "removed_now": 1}
    rows = {row["trial_id"]: row for row in index(blob_api)["items"]}
    assert rows["q1"]["body"]["state"] == "deleted"
    assert rows["q1"]["body"]["since"] > 0
    assert rows["q2"]["body"]["state"] == "stored"
    read = blob_api.get(f"{RUN}/trajectories/{rows['q1']['id']}").json()
    assert read["messages"] is None
    assert read["body"]["state"] == "deleted"
    counts = blob_api.get(RUN + "/evaluation").json()["rounds"][0]["counts"]
    assert counts["failure"] == 1
    assert len(blob_keys(blob_settings)) == 1


def test_the_sweeper_expires_bodies_and_records_what_it_removed(
    blob_settings: Settings,
) -> None:
    settings = dataclasses.replace(blob_settings, trajectory_days=1e-9)
    app = create_app(settings)
    with TestClient(app, raise_server_exceptions=False) as api:
        api.headers["Authorization"] = f"Bearer {(settings.data_dir / 'admin.key').read_text()}"
        token = attempt(api)
        send(api, token, rollout(1, "a"), rollout(1, "b"))
        # Expired already (a day of a billionth), though not yet swept: it reads as expired.
        assert {row["body"]["state"] for row in index(api)["items"]} == {"expired"}
        state = app.state.tuneplane
        expired, removed = asyncio.run(sweep_once(state))
        assert (expired, removed.deleted, removed.failures) == (2, 2, 0)
        assert blob_keys(settings) == set()
        with state.database.connect() as connection:
            sweep = connection.execute(body_sweeps.select()).one()
        assert (sweep.expired, sweep.deleted_bodies, sweep.failures) == (2, 2, 0)
        assert sweep.bytes > 0
        rows = index(api)["items"]
        assert [row["body"]["state"] for row in rows] == ["expired", "expired"]
        assert rows[0]["body"]["since"] == pytest.approx(rows[0]["body"]["expires_at"])


def test_an_orphaned_body_is_deleted_by_the_sweeper(api: TestClient, settings: Settings) -> None:
    """A crash between writing a body and committing its row leaves a pending key."""
    state = api.app.state.tuneplane  # type: ignore[attr-defined]
    state.blobs.put("runs/1/1/orphan.json.z", zlib.compress(orjson.dumps({"messages": []})))
    state.database.run_write(
        lambda c: c.execute(pending_bodies.insert().values(body_key="runs/1/1/orphan.json.z",
                                                           created_at=0.0))
    )  # fmt: skip
    assert blob_keys(settings) == {"runs/1/1/orphan.json.z"}
    asyncio.run(sweep_once(state))
    assert blob_keys(settings) == set()
    with state.database.connect() as connection:
        assert connection.execute(pending_bodies.select()).all() == []


def test_an_unreachable_blob_store_is_a_503_that_stores_nothing(
    settings: Settings, s3_bucket: str, tmp_path: Path
) -> None:
    dead = dataclasses.replace(settings, blob_url=f"s3://{s3_bucket}/bodies")
    boto3.client("s3").delete_bucket(Bucket=s3_bucket)  # the world outside breaks
    with TestClient(create_app(dead), raise_server_exceptions=False) as api:
        api.headers["Authorization"] = f"Bearer {(dead.data_dir / 'admin.key').read_text()}"
        token = attempt(api)
        answer = send(api, token, rollout(1, "a"))
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"]["code"] == "blob_store_unavailable"
        assert f"s3://{s3_bucket}/bodies" in answer.json()["error"]["message"]
        assert answer.headers["retry-after"] == "5"
        assert index(api)["total"] == 0
        # What may have been written is on record for the sweeper, once the store is back.
        state = api.app.state.tuneplane  # type: ignore[attr-defined]
        with state.database.connect() as connection:
            (_pending,) = connection.execute(pending_bodies.select()).all()
        boto3.client("s3").create_bucket(Bucket=s3_bucket)
        state.database.run_write(lambda c: c.execute(pending_bodies.update().values(created_at=0)))
        asyncio.run(sweep_once(state))
        with state.database.connect() as connection:
            assert connection.execute(pending_bodies.select()).all() == []


def test_filters_run_over_the_whole_index_before_pagination(api: TestClient) -> None:
    token = attempt(api)
    for step in range(1, 5):
        batch = [
            rollout(step, "fail", diagnostic="failure"),
            rollout(step, "low", diagnostic="low_reward", reward=0.01),
            rollout(step, "nan", reward=None, reward_invalid=True),
            rollout(step, "plain", reward=0.9, collection_policy=7),
        ]
        assert send(api, token, *batch).status_code == 200
    low = index(api, scope="training", category="low_reward", limit=3)
    assert (low["total"], len(low["items"])) == (4, 3)
    rest = index(api, scope="training", category="low_reward", limit=3, after=low["next"])
    assert [row["step"] for row in low["items"] + rest["items"]] == [1, 2, 3, 4]
    assert rest["next"] is None
    invalid = index(api, scope="training", category="invalid_reward", step=2)["items"]
    assert [(row["trajectory_id"], row["reward"], row["reward_invalid"]) for row in invalid] == [
        ("nan", None, True)
    ]
    plain = index(api, scope="training", category="representative", step=3)["items"][0]
    assert (plain["collection_policy"], plain["consumption_policy"]) == ("7", None)
    assert index(api, scope="training")["steps"] == [4, 3, 2, 1]
    bad = api.get(RUN + "/trajectories", params={"category": "failed"})
    assert bad.status_code == 422
    assert bad.json()["error"]["details"][0]["field"] == "category"


def test_a_running_server_sweeps_expired_bodies_on_its_own(tmp_path: Path) -> None:
    """The periodic sweep of a real server process (SQLite, bodies in a directory)."""
    quick = {"TUNEPLANE_SWEEP_INTERVAL": "0.2", "TUNEPLANE_TRAJECTORY_DAYS": "0.00002"}
    with running_server("--data-dir", str(tmp_path), env=quick) as base:
        admin = {"Authorization": f"Bearer {(tmp_path / 'admin.key').read_text().strip()}"}
        httpx.post(f"{base}/api/v1/projects/demo/runs", json={"run": "agent"}, headers=admin)
        token = httpx.post(f"{base}{RUN}/attempts", headers=admin).json()["token"]
        body = {"trajectories": [rollout(1, "a")]}
        headers = {"Authorization": f"Bearer {token}"}
        stored = httpx.post(f"{base}/api/v1/ingest/trajectories", json=body, headers=headers)
        assert stored.json()["new"] == 1, stored.text
        assert len(list((tmp_path / "blobs").rglob("*.json.z"))) == 1
        deadline = time.monotonic() + 20
        while list((tmp_path / "blobs").rglob("*.json.z")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert list((tmp_path / "blobs").rglob("*.json.z")) == []
        (row,) = httpx.get(f"{base}{RUN}/trajectories", headers=admin).json()["items"]
        assert row["body"]["state"] == "expired"


def test_trajectory_writes_are_news_for_the_run_and_found_by_id(api: TestClient) -> None:
    """Uploads and early deletions move the run's updated_at, which its live stream follows."""
    token = attempt(api)

    def updated() -> float:
        stamp: float = api.get(RUN).json()["updated_at"]
        return stamp

    before = updated()
    send(api, token, rollout(1, "a"), rollout(1, "b"))
    uploaded = updated()
    assert uploaded > before
    (row,) = index(api, scope="training", step=1, trajectory_id="b")["items"]
    assert row["trajectory_id"] == "b"
    api.delete(RUN + "/trajectories", params={"trajectory_id": "b"})
    assert updated() > uploaded
    states = {r["trajectory_id"]: r["body"]["state"] for r in index(api)["items"]}
    assert states == {"a": "stored", "b": "deleted"}
