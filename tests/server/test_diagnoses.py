"""Failure diagnoses through the API, on SQLite and PostgreSQL: made when an attempt ends
failed, from its logs and metrics; re-run on request; never touching the run's status."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tuneplane.server.app import create_app
from tuneplane.server.settings import Settings

RUN = "/api/v1/projects/demo/runs/job"
OOM = """\
Traceback (most recent call last):
  File "/home/me/train.py", line 30, in main
    loss = model(**batch).loss
  File "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1751, in _call
    return forward_call(*args, **kwargs)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total \
capacity of 79.10 GiB of which 1.06 GiB is free."""


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        key = (settings.data_dir / "admin.key").read_text().strip()
        client.headers["Authorization"] = f"Bearer {key}"
        yield client


def start(api: TestClient) -> dict[str, str]:
    api.post("/api/v1/projects/demo/runs", json={"run": "job"})
    token = api.post(RUN + "/attempts").json()["token"]
    return {"Authorization": f"Bearer {token}"}


def log(api: TestClient, token: dict[str, str], text: str) -> None:
    lines = [{"seq": i, "stream": "stderr", "time": 1.0, "text": t}
             for i, t in enumerate(text.splitlines())]  # fmt: skip
    assert api.post("/api/v1/ingest/logs", json={"lines": lines}, headers=token).is_success


def end(api: TestClient, token: dict[str, str], exit_code: int) -> None:
    body = {"status": "failed", "exit_code": exit_code}
    answer = api.post("/api/v1/ingest/status", json=body, headers=token)
    assert answer.status_code == 200, answer.text


def diagnoses(api: TestClient, count: int = 1) -> list[dict[str, Any]]:
    """The run's diagnoses once ``count`` of them have finished."""
    deadline = time.monotonic() + 20
    while True:
        found: list[dict[str, Any]] = api.get(RUN + "/diagnoses").json()["diagnoses"]
        if sum(d["state"] != "running" for d in found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_a_failed_attempt_is_diagnosed_from_its_log_tail(api: TestClient) -> None:
    token = start(api)
    log(api, token, "step 1 loss 2.3\n" + OOM)
    end(api, token, 1)
    (diagnosis,) = diagnoses(api)
    assert (diagnosis["attempt"], diagnosis["trigger"], diagnosis["state"]) == (1, "failed", "done")
    cuda, exception = diagnosis["findings"]
    assert (cuda["code"], cuda["confidence"]) == ("cuda_oom", "certain")
    assert cuda["citations"] == [{"kind": "log", "line": 6, "text": OOM.splitlines()[-1]}]
    assert "batch size" in cuda["next_action"]
    assert exception["code"] == "python_exception"
    assert "in main (/home/me/train.py, line 30)" in exception["detail"]
    run = api.get(RUN).json()
    assert (run["status"], run["exit_code"]) == ("failed", 1)  # as the job reported it


def test_nan_onset_is_found_in_the_metrics_and_a_retried_ending_is_diagnosed_once(
    api: TestClient,
) -> None:
    token = start(api)
    series = {
        "series": [{"name": "train/loss", "steps": [1, 2], "values": [2.0, 1.5]}],
        "invalid": [{"name": "train/loss", "steps": [3, 4], "kinds": ["nan", "inf"]}],
    }
    stored = api.post("/api/v1/ingest/scalars", json=series, headers=token)
    assert stored.status_code == 200, stored.text
    end(api, token, 1)
    end(api, token, 1)  # the runner retried its report
    (diagnosis,) = diagnoses(api)
    (nan,) = diagnosis["findings"]
    assert nan["code"] == "nan_loss"
    assert [(c["step"], c["value"]) for c in nan["citations"]] == [(2, 1.5), (3, None)]


def test_a_diagnosis_is_run_again_on_request(api: TestClient) -> None:
    token = start(api)
    end(api, token, 137)
    diagnoses(api)
    again = api.post(RUN + "/diagnoses")
    assert again.status_code == 201, again.text
    assert (again.json()["trigger"], again.json()["state"]) == ("rerun", "done")
    assert [f["code"] for f in again.json()["findings"]] == ["host_oom"]
    assert len(diagnoses(api, 2)) == 2
    missing = api.post(RUN + "/diagnoses", params={"attempt": 9})
    assert missing.status_code == 404
    assert "no execution attempt 9" in missing.json()["error"]["message"]
