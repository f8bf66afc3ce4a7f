"""The blob store is checked when the server starts and by readiness: a missing bucket on the
real S3-compatible test server, or a blob directory that takes no write, is said in the
server's log at start and makes ``/healthz`` a 503 naming the blob store, until it is back;
the trajectories it refused meanwhile are counted on their round."""

from __future__ import annotations

import dataclasses
import logging
import shutil
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
from fastapi.testclient import TestClient

from tuneplane.server.app import create_app
from tuneplane.server.settings import Settings


def _said_at_start(caplog: pytest.LogCaptureFixture, text: str) -> str:
    """The start check runs beside the server's start: wait a little for its line."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for record in caplog.records:
            if text in record.getMessage():
                return record.getMessage()
        time.sleep(0.02)
    raise AssertionError(f"{text!r} not logged: {caplog.text}")


def _unready(api: TestClient, where: str, why: str) -> None:
    answer = api.get("/healthz")
    assert answer.status_code == 503, answer.text
    error = answer.json()["error"]
    assert error["code"] == "blob_store_unavailable"
    assert error["message"].startswith(f"blob store unavailable ({where}): {why}")
    assert answer.headers["retry-after"] == "5"
    assert api.get("/livez").status_code == 200  # restarting would not bring it back


def test_a_missing_bucket_is_said_at_start_and_fails_readiness(
    settings: Settings, s3_bucket: str, caplog: pytest.LogCaptureFixture
) -> None:
    where = f"s3://{s3_bucket}/bodies"
    boto3.client("s3").delete_bucket(Bucket=s3_bucket)  # the world outside breaks
    caplog.set_level(logging.WARNING, logger="tuneplane")
    app = create_app(dataclasses.replace(settings, blob_url=where))
    with TestClient(app, raise_server_exceptions=False) as api:
        line = _said_at_start(caplog, "blob store unavailable")
        assert line == (
            f"tuneplane: blob store unavailable ({where}): the bucket {s3_bucket!r} does not "
            "exist; trajectory bodies cannot be stored until it answers (/healthz answers 503 "
            "meanwhile)"
        )
        _unready(api, where, f"the bucket {s3_bucket!r} does not exist")
        boto3.client("s3").create_bucket(Bucket=s3_bucket)
        ready = api.get("/healthz")
        assert ready.status_code == 200, ready.text
        assert ready.json()["blobs"] == "ok"


def test_a_blob_directory_that_takes_no_write_fails_readiness(
    settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "bodies"
    caplog.set_level(logging.WARNING, logger="tuneplane")
    with TestClient(create_app(dataclasses.replace(settings, blob_url=str(root)))) as api:
        assert api.get("/healthz").json()["blobs"] == "ok"
        # The volume goes away under the server (a file where the directory was: even the
        # superuser cannot write into it).
        shutil.rmtree(root)
        root.write_bytes(b"")
        _unready(api, str(root), "the directory is not writable (Not a directory)")
        root.unlink()
        root.mkdir()
        assert api.get("/healthz").status_code == 200
    assert "blob store unavailable" not in caplog.text  # it answered when the server started


def _evaluation(trial_id: str) -> dict[str, Any]:
    return {
        "scope": "evaluation", "round_id": "val-1", "trial_id": trial_id, "trial_attempt": 0,
        "messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}],
        "total_messages": 2, "complete": True, "capture_policy": "all",
    }  # fmt: skip


def test_trajectories_the_blob_store_refused_are_counted_on_their_round(
    settings: Settings, s3_bucket: str
) -> None:
    where = f"s3://{s3_bucket}/bodies"
    with TestClient(create_app(dataclasses.replace(settings, blob_url=where))) as api:
        api.headers["Authorization"] = f"Bearer {(settings.data_dir / 'admin.key').read_text()}"
        api.post("/api/v1/projects/demo/runs", json={"run": "evals"})
        token = api.post("/api/v1/projects/demo/runs/evals/attempts").json()["token"]
        ingest = {"Authorization": f"Bearer {token}"}
        events = [{"event_id": "d", "type": "population", "round_id": "val-1", "expected": 3}]
        events += [
            {"event_id": f"t{i}", "type": "trial", "round_id": "val-1", "trial_id": f"q{i}",
             "trial_attempt": 0, "status": "success", "eligible": False}
            for i in range(3)
        ]  # fmt: skip
        sent = api.post("/api/v1/ingest/observations", json={"events": events}, headers=ingest)
        assert sent.status_code == 200, sent.text

        def send(*trial_ids: str) -> int:
            batch = {"trajectories": [_evaluation(t) for t in trial_ids]}
            return api.post("/api/v1/ingest/trajectories", json=batch, headers=ingest).status_code

        def not_stored() -> int:
            found: int = api.get("/api/v1/projects/demo/runs/evals/evaluation").json()["rounds"][0][
                "trajectories_not_stored"
            ]
            return found

        assert send("q0") == 200
        s3 = boto3.client("s3")  # the bucket goes: the outcomes land, the text does not
        for item in s3.list_objects_v2(Bucket=s3_bucket)["Contents"]:
            s3.delete_object(Bucket=s3_bucket, Key=item["Key"])
        s3.delete_bucket(Bucket=s3_bucket)
        for _ in range(2):  # the producer's retries count each trajectory once
            assert send("q0", "q1", "q2") == 503
        assert not_stored() == 2  # q0 was stored before
        s3.create_bucket(Bucket=s3_bucket)
        assert send("q1") == 200
        assert not_stored() == 1
