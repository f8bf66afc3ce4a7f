"""The pipelined scalar path: a request written before the previous batch's successor is
built, its answer read later, against a real server."""

from __future__ import annotations

import socket

import pytest

from tests.client.runs import PROJECT, Server
from tuneplane.client.pipeline import Pipeline

SCALARS = "/api/v1/ingest/scalars"


def batch(first: int, count: int) -> dict[str, object]:
    steps = list(range(first, first + count))
    return {"series": [{"name": "pipe/loss", "steps": steps, "values": [s / 10 for s in steps]}]}


@pytest.mark.parametrize(
    ("url", "proxies", "used"),
    [
        ("http://127.0.0.1:8000", {}, True),
        ("http://tp.internal", {}, True),
        ("https://tp.example.com", {}, False),  # TLS goes through httpx
        ("http://127.0.0.1:8000/prefix", {}, False),  # a path prefix: left to httpx
        ("http://tp.internal:8000", {"HTTP_PROXY": "http://proxy:3128"}, False),
        (
            "http://tp.internal:8000",
            {"HTTP_PROXY": "http://proxy:3128", "NO_PROXY": "tp.internal"},
            True,
        ),
    ],
)
def test_the_pipeline_is_used_only_for_direct_plain_http(
    monkeypatch: pytest.MonkeyPatch, url: str, proxies: dict[str, str], used: bool
) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in proxies.items():
        monkeypatch.setenv(name, value)
    assert (Pipeline.for_server(url, "tpi_x", 5.0) is not None) is used


def test_one_request_in_flight_at_a_time_and_every_point_stored(server: Server) -> None:
    token = server.start_attempt("pipelined")
    pipeline = Pipeline.for_server(server.base, token, 10.0)
    assert pipeline is not None
    try:
        assert pipeline.begin(SCALARS, batch(0, 500))
        with pytest.raises(AssertionError):
            pipeline.begin(SCALARS, batch(500, 500))  # one request in flight at a time
        assert pipeline.finish()
        for first in range(500, 2000, 500):
            assert pipeline.begin(SCALARS, batch(first, 500))
            assert pipeline.finish()
    finally:
        pipeline.close()
    summary = server.get(f"/api/v1/projects/{PROJECT}/runs/pipelined/metrics/pipe/loss")
    assert (summary["count"], summary["first_step"], summary["last_step"]) == (2000, 0, 1999)


def test_a_refused_request_or_an_unreachable_server_is_reported(server: Server) -> None:
    refused = Pipeline.for_server(server.base, "tpi_wrong", 10.0)
    assert refused is not None
    assert refused.begin(SCALARS, batch(0, 1))
    assert refused.finish() is False  # 401: the caller sends it again its own way
    refused.close()

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    nobody = Pipeline.for_server(f"http://127.0.0.1:{port}", "tpi_x", 2.0)
    assert nobody is not None
    assert nobody.begin(SCALARS, batch(0, 1)) is False
    nobody.close()
