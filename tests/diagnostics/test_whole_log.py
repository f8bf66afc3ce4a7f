"""The whole stored log is searched, not only its tail, on SQLite and PostgreSQL: a cause
far from the end is found and says where it is, and a diagnosis says when the log it read
was cut and how much (``log_cut`` and ``log``, beside a ``log_cut`` finding)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.server.conftest import admin_client
from tests.server.test_diagnoses import OOM, diagnoses, end, start
from tuneplane.server.settings import Settings
from tuneplane.store import diagnoses as records

#: What a job prints after its cause: the other ranks going down, shutdown noise.
NOISE = "[rank{rank}]:[W socket.cpp:464] [c10d] waiting for rank 0 to shut down ({n})"


@pytest.fixture
def api(settings: Settings) -> Iterator[TestClient]:
    yield from admin_client(settings)


def post(api: TestClient, token: dict[str, str], texts: list[str], first: int = 0) -> None:
    for at in range(0, len(texts), 1000):
        lines = [{"seq": first + at + i, "stream": "stderr", "time": 1.0, "text": text}
                 for i, text in enumerate(texts[at : at + 1000])]  # fmt: skip
        answer = api.post("/api/v1/ingest/logs", json={"lines": lines}, headers=token)
        assert answer.is_success, answer.text


def finding(diagnosis: dict[str, Any], code: str) -> dict[str, Any]:
    return next(f for f in diagnosis["findings"] if f["code"] == code)


def test_an_oom_420_lines_before_the_end_is_found_and_says_where(api: TestClient) -> None:
    token = start(api)
    head = ["step 1 loss 2.3", *OOM.splitlines()]
    noise = [NOISE.format(rank=n % 8, n=n) for n in range(420)]
    post(api, token, head + noise)
    end(api, token, 1)
    (diagnosis,) = diagnoses(api)
    assert diagnosis["state"] == "done"
    cuda = diagnosis["findings"][0]
    assert (cuda["code"], cuda["confidence"]) == ("cuda_oom", "certain")
    last = len(head) - 1
    assert cuda["citations"][0] == {"kind": "log", "line": last, "seq": last, "text": head[-1]}
    assert f"(line {last})" in cuda["detail"]
    # The whole log was read: nothing says it was cut.
    assert all(f["code"] != "log_cut" for f in diagnosis["findings"])
    assert diagnosis["log_cut"] is False
    lines = len(head) + 420
    assert diagnosis["log"] == {"cut": False, "lines": lines, "read": lines, "unread": 0,
                                "missing": 0, "stopped": None}  # fmt: skip


def test_a_log_longer_than_the_search_reads_says_how_much_was_not_read(
    api: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(records, "LOG_SEARCH_MAX_LINES", 1000)
    token = start(api)
    early = ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]
    kernel = "[1234.5] Out of memory: Killed process 4242 (python) total-vm:99kB"
    texts = early + [NOISE.format(rank=1, n=n) for n in range(1500)] + [kernel]
    post(api, token, texts[:1000])
    post(api, token, texts[1000:], first=1010)  # ten lines the server never received
    end(api, token, 137)
    (diagnosis,) = diagnoses(api)
    codes = [f["code"] for f in diagnosis["findings"]]
    assert codes[0] == "host_oom"
    assert "cuda_oom" not in codes  # the OOM was not read
    assert codes[-1] == "log_cut"
    detail = finding(diagnosis, "log_cut")["detail"]
    assert "the log holds 1,502 lines and the search read the last 1,000" in detail
    assert "the first 502 were not read" in detail
    assert "10 lines the job printed never reached the server" in detail
    # Said as a field of the diagnosis too, with how much was read.
    assert diagnosis["log_cut"] is True
    assert diagnosis["log"] == {"cut": True, "lines": 1502, "read": 1000, "unread": 502,
                                "missing": 10, "stopped": None}  # fmt: skip
    kernel_cited = finding(diagnosis, "host_oom")["citations"][0]
    assert (kernel_cited["line"], kernel_cited["seq"], kernel_cited["text"]) == (1501, 1511, kernel)


def test_a_cause_repeated_by_every_rank_is_kept_within_bounds(api: TestClient) -> None:
    token = start(api)
    warn = "node-3:1181:1229 [3] NCCL WARN NET/IB : Got completion with error 12, opcode 0, len 0"
    texts = [warn] * 3000 + [NOISE.format(rank=2, n=n) for n in range(500)]
    post(api, token, texts)
    end(api, token, 1)
    (diagnosis,) = diagnoses(api)
    nccl = finding(diagnosis, "nccl_error")
    assert [c["line"] for c in nccl["citations"]] == [0, 1, 2, 3, 4]


def test_the_first_traceback_anywhere_in_the_log_is_the_one_named(api: TestClient) -> None:
    token = start(api)
    cause = [
        "[rank2]: Traceback (most recent call last):",
        '[rank2]:   File "/job/reward.py", line 77, in score',
        "[rank2]:     return table[answer]",
        "[rank2]: KeyError: 'final_answer'",
    ]
    shutdown = [
        "Traceback (most recent call last):",
        '  File "/venv/bin/torchrun", line 8, in <module>',
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: train.py FAILED",
    ]
    noise = [NOISE.format(rank=n % 8, n=n) for n in range(1200)]
    post(api, token, ["step 1 loss 2.3", *cause, *noise, *shutdown])
    end(api, token, 1)
    (diagnosis,) = diagnoses(api)
    exception = finding(diagnosis, "python_exception")
    assert exception["title"] == "The job raised KeyError"
    assert "in score (/job/reward.py, line 77) (line 4)" in exception["detail"]
    assert "1 later traceback followed it (the last: torch.distributed" in exception["detail"]
    assert [c["line"] for c in exception["citations"]] == [1, 4]
