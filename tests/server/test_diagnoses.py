"""Failure diagnoses through the API, on SQLite and PostgreSQL: made when an attempt ends
failed, from its logs and metrics; re-run on request; never touching the run's status."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from fastapi.testclient import TestClient

from tests.server.conftest import admin_client
from tuneplane.contract.outbound import RULE, AllowList, parse_allow_list
from tuneplane.server.settings import DiagnosisSettings, Secret, Settings

RUN = "/api/v1/projects/demo/runs/job"
OOM = """\
Traceback (most recent call last):
  File "/home/me/train.py", line 30, in main
    loss = model(**batch).loss
  File "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1751, in _call
    return forward_call(*args, **kwargs)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total \
capacity of 79.10 GiB of which 1.06 GiB is free."""


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
    # The line's place in the tail, and where it is stored (the log view links to it).
    assert cuda["citations"] == [{"kind": "log", "line": 6, "seq": 6, "text": OOM.splitlines()[-1]}]
    assert "batch size" in cuda["next_action"]
    assert exception["code"] == "python_exception"
    assert "in main (/home/me/train.py, line 30)" in exception["detail"]
    run = api.get(RUN).json()
    assert (run["status"], run["exit_code"]) == ("failed", 1)  # as the job reported it
    # Its recording was news for the run's live stream, which follows updated_at.
    assert run["updated_at"] >= diagnosis["finished_at"]


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


class _ChatCompletions(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint on loopback: records each request, answers as told."""

    received: ClassVar[list[tuple[dict[str, str], dict[str, Any]]]] = []
    status: ClassVar[int] = 200
    #: Set to hold every answer until it is set (a slow model).
    go: ClassVar[threading.Event] = threading.Event()

    def do_POST(self) -> None:
        self.go.wait(30)
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.received.append(({k.lower(): v for k, v in self.headers.items()}, body))
        answer = {"choices": [{"message": {"role": "assistant", "content": "Lower the batch."}}]}
        payload = json.dumps(answer if self.status == 200 else {"error": "down"}).encode()
        self.send_response(self.status)
        if self.status == 307:
            self.send_header("location", "/v1/elsewhere")
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def llm() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ChatCompletions)
    _ChatCompletions.received.clear()
    _ChatCompletions.status = 200
    _ChatCompletions.go.set()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def _explained(
    settings: Settings, llm: str, allow: str | None = "127.0.0.1"
) -> Iterator[TestClient]:
    """The app with the language model stand-in on loopback, which the operator lists
    (``allow``: None, the default policy of public addresses only)."""
    listed = AllowList() if allow is None else parse_allow_list(allow)
    assert listed is not None
    configured = dataclasses.replace(
        settings,
        diagnosis=DiagnosisSettings(llm, "tiny-model", Secret("sk-diagnosis-key")),
        outbound_allow=listed,
    )
    yield from admin_client(configured)


def _explanation(api: TestClient, state: str) -> dict[str, Any]:
    """The diagnosis once its explanation reached ``state``."""
    deadline = time.monotonic() + 20
    while (diagnoses(api)[0]["explanation"] or {}).get("state") != state:
        assert time.monotonic() < deadline, diagnoses(api)
        time.sleep(0.05)
    (diagnosis,) = diagnoses(api)
    return diagnosis


def test_a_language_model_on_loopback_is_refused_unless_listed(
    settings: Settings, llm: str, caplog: pytest.LogCaptureFixture
) -> None:
    for api in _explained(settings, llm, allow=None):
        said = f"tuneplane: TUNEPLANE_DIAGNOSIS_URL: 127.0.0.1 is a loopback address; {RULE}"
        deadline = time.monotonic() + 10
        while said not in caplog.messages:  # said at start, by a task of its own
            assert time.monotonic() < deadline, caplog.messages
            time.sleep(0.05)
        token = start(api)
        log(api, token, OOM)
        end(api, token, 1)
        diagnosis = _explanation(api, "failed")
        assert diagnosis["state"] == "done"  # the rule findings stand
        assert [f["code"] for f in diagnosis["findings"]] == ["cuda_oom", "python_exception"]
        assert diagnosis["explanation"]["error"] == (
            f"TUNEPLANE_DIAGNOSIS_URL refused by policy: 127.0.0.1 is a loopback address; {RULE}"
        )
    assert _ChatCompletions.received == []


def test_a_language_model_that_redirects_is_not_followed(settings: Settings, llm: str) -> None:
    _ChatCompletions.status = 307
    for api in _explained(settings, llm):
        token = start(api)
        log(api, token, OOM)
        end(api, token, 1)
        assert "answered 307" in _explanation(api, "failed")["explanation"]["error"]
    assert len(_ChatCompletions.received) == 1  # /v1/elsewhere was never asked


def test_a_configured_language_model_explains_beside_the_findings(
    settings: Settings, llm: str
) -> None:
    for api in _explained(settings, llm):
        token = start(api)
        log(api, token, "export HF_TOKEN=hf_abcdefghijklmnopqrstuv password=hunter2\n" + OOM)
        end(api, token, 1)
        deadline = time.monotonic() + 20
        while (diagnoses(api)[0]["explanation"] or {}).get("state") != "done":
            assert time.monotonic() < deadline, diagnoses(api)
            time.sleep(0.05)
        (diagnosis,) = diagnoses(api)
        assert diagnosis["explanation"] == {"state": "done", "model": "tiny-model",
                                            "text": "Lower the batch."}  # fmt: skip
        assert [f["code"] for f in diagnosis["findings"]] == ["cuda_oom", "python_exception"]
    ((headers, body),) = _ChatCompletions.received
    assert headers["authorization"] == "Bearer sk-diagnosis-key"
    assert body["model"] == "tiny-model"
    sent = body["messages"][1]["content"]
    assert "CUDA out of memory" in sent
    assert "cuda_oom" in sent
    assert "hf_abcdefghijklmnopqrstuv" not in sent
    assert "hunter2" not in sent
    assert "[redacted]" in sent


def test_no_secret_of_the_table_reaches_the_model_or_the_stored_diagnosis(
    settings: Settings, llm: str
) -> None:
    """The config's secret-named values and every form of the redaction table in the log:
    none of them in the request the model endpoint captured, nor in what is stored."""
    from tests.diagnostics.test_redact import SECRET_LINES

    config = {
        "wandb_api_key": "wandb-config-secret-1",
        "db_password": "db-config-secret-2",
        "aws_secret_access_key": "aws-config-secret-3",
        "training_args": {"hub_token": "hub-config-secret-4", "learning_rate": 1e-5},
    }
    secrets = [*(value for value in _leaves(config) if isinstance(value, str))]
    secrets += [secret for _, secret in SECRET_LINES]
    for api in _explained(settings, llm):
        made = api.post("/api/v1/projects/demo/runs", json={"run": "job", "config": config})
        assert made.status_code == 201, made.text
        token = {"Authorization": f"Bearer {api.post(RUN + '/attempts').json()['token']}"}
        log(api, token, "\n".join(line for line, _ in SECRET_LINES) + "\n" + OOM)
        end(api, token, 1)
        stored = _explanation(api, "done")
        assert stored["findings"][0]["code"] == "cuda_oom"
        stored_text = api.get(RUN + "/diagnoses").text
    ((_, body),) = _ChatCompletions.received
    sent = json.dumps(body)
    assert "CUDA out of memory" in sent
    assert [s for s in secrets if s in sent] == []
    assert [s for s in secrets if s in stored_text] == []


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    else:
        yield value


def test_a_rerun_answers_with_its_findings_and_the_explanation_on_its_way(
    settings: Settings, llm: str
) -> None:
    """``POST …/diagnoses`` answers once the rule findings are done, saying the explanation
    is running; it lands later, in the listed record (docs/diagnostics.md)."""
    for api in _explained(settings, llm):
        token = start(api)
        log(api, token, OOM)
        end(api, token, 1)
        _explanation(api, "done")
        _ChatCompletions.go.clear()  # the model is slow now
        again = api.post(RUN + "/diagnoses")
        assert again.status_code == 201, again.text
        assert again.json()["state"] == "done"
        assert again.json()["explanation"] == {"state": "running", "model": "tiny-model"}
        _ChatCompletions.go.set()
        deadline = time.monotonic() + 20
        while diagnoses(api)[0]["explanation"]["state"] != "done":
            assert time.monotonic() < deadline, diagnoses(api)
            time.sleep(0.05)


def test_a_failing_language_model_leaves_the_findings_and_the_status(
    settings: Settings, llm: str
) -> None:
    _ChatCompletions.status = 500
    for api in _explained(settings, llm):
        token = start(api)
        log(api, token, OOM)
        end(api, token, 1)
        deadline = time.monotonic() + 20
        while (diagnoses(api)[0]["explanation"] or {}).get("state") != "failed":
            assert time.monotonic() < deadline, diagnoses(api)
            time.sleep(0.05)
        (diagnosis,) = diagnoses(api)
        assert diagnosis["state"] == "done"
        assert "answered 500" in diagnosis["explanation"]["error"]
        assert api.get(RUN).json()["status"] == "failed"


def test_an_attempt_whose_heartbeat_stopped_is_diagnosed_as_lost(settings: Settings) -> None:
    quick = dataclasses.replace(settings, lost_heartbeat=0.4)
    for api in admin_client(quick):
        token = start(api)
        running = api.post("/api/v1/ingest/status", json={"status": "running"}, headers=token)
        assert running.status_code == 200, running.text
        beat = {"queued": 0, "sent": 0, "dropped": 0, "failed_sends": 0, "queue_size": 0,
                "queue_capacity": 10, "interval": 10}  # fmt: skip
        assert api.post("/api/v1/ingest/heartbeat", json=beat, headers=token).status_code == 200
        (diagnosis,) = diagnoses(api)
        assert (diagnosis["trigger"], diagnosis["state"]) == ("lost", "done")
        assert [f["code"] for f in diagnosis["findings"]] == ["heartbeat_lost"]
        assert api.get(RUN).json()["status"] == "running"  # unknown health is not a failure
        time.sleep(0.5)
        assert len(diagnoses(api)) == 1  # once
