"""Slow and vanishing clients against a real server process, over raw sockets: a trickled
body is cut off at the body deadline, slow bodies are bounded, a client gone mid-body is
not an error, and a live stream outlives the body deadline."""

from __future__ import annotations

import contextlib
import json
import selectors
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import INGEST_SECRET
from tests.helpers import log
from tests.serving import running_server
from tuneplane.contract.limits import BODIES_IN_FLIGHT_MAX, BODY_TIMEOUT_SECONDS_DEFAULT
from tuneplane.contract.settings import SettingError
from tuneplane.server.settings import Settings

TIMEOUT = 1.0
AUTH = {"Authorization": f"Bearer {INGEST_SECRET}"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    data = tmp_path_factory.mktemp("slow")
    output = data / "server.log"
    env = {"TUNEPLANE_INGEST_SECRET": INGEST_SECRET, "TUNEPLANE_BODY_TIMEOUT": str(TIMEOUT)}
    with running_server("--data-dir", str(data), env=env, output=output) as base:
        yield base, output


def _port(base: str) -> int:
    return int(base.rsplit(":", 1)[1])


def _start_body(port: int, length: int = 1000) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    head = (
        "POST /ingest HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {INGEST_SECRET}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    )
    sock.sendall(head.encode() + b"{")
    sock.setblocking(False)
    return sock


def _answer(raw: bytes) -> tuple[int, dict[str, str], dict[str, object]]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, json.loads(body)


def test_trickled_bodies_are_cut_off_and_bounded(server: tuple[str, Path]) -> None:
    """200 clients send a byte every 0.2 s: the first BODIES_IN_FLIGHT_MAX are cut off
    with 408 at the deadline, the rest refused at once with 503; every connection closes."""
    base, _ = server
    started = time.monotonic()
    socks = [_start_body(_port(base)) for _ in range(200)]
    received = {sock: b"" for sock in socks}
    closed_at: dict[socket.socket, float] = {}
    selector = selectors.DefaultSelector()
    for sock in socks:
        selector.register(sock, selectors.EVENT_READ)
    next_trickle = time.monotonic()
    while len(closed_at) < len(socks) and time.monotonic() - started < TIMEOUT + 10:
        if time.monotonic() >= next_trickle:
            for sock in socks:
                if sock not in closed_at:
                    # The server may have closed it; the read below sees that.
                    with contextlib.suppress(OSError):
                        sock.send(b" ")
            next_trickle += 0.2
        for key, _ in selector.select(timeout=0.05):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if chunk:
                received[sock] += chunk
            else:
                closed_at[sock] = time.monotonic() - started
                selector.unregister(sock)
    for sock in socks:
        sock.close()
    assert len(closed_at) == len(socks), "connections still open past the deadline"
    answers = [_answer(received[sock]) for sock in socks]
    timed_out = [a for a in answers if a[0] == 408]
    busy = [a for a in answers if a[0] == 503]
    assert len(timed_out) == BODIES_IN_FLIGHT_MAX
    assert len(busy) == len(socks) - BODIES_IN_FLIGHT_MAX
    _, headers, body = timed_out[0]
    assert headers["connection"] == "close"
    assert body["error"] == {
        "status": 408,
        "code": "body_timeout",
        "message": f"body: not received in full within {TIMEOUT:g} s (TUNEPLANE_BODY_TIMEOUT)",
    }
    _, headers, body = busy[0]
    assert headers["retry-after"] == "1"
    assert body["error"]["code"] == "busy"  # type: ignore[index]
    for sock, answer in zip(socks, answers, strict=True):
        if answer[0] == 408:
            assert TIMEOUT - 0.1 < closed_at[sock] < TIMEOUT + 3
        else:
            assert closed_at[sock] < TIMEOUT
    # The slots are free again: the server answers as before.
    batch = {"logs": [log("e1", 1, {"reward": 1.0}, project="slow", run="r")]}
    assert httpx.post(base + "/ingest", json=batch, headers=AUTH).status_code == 200


def test_a_client_gone_mid_body_is_not_an_error(tmp_path: Path) -> None:
    output = tmp_path / "server.log"
    env = {"TUNEPLANE_INGEST_SECRET": INGEST_SECRET}
    args = ("--data-dir", str(tmp_path), "--log-level", "debug")
    with running_server(*args, env=env, output=output) as base:
        for _ in range(20):
            sock = _start_body(_port(base))
            sock.close()
        time.sleep(0.5)
        batch = {"logs": [log("e1", 1, {"reward": 1.0}, project="gone", run="r")]}
        assert httpx.post(base + "/ingest", json=batch, headers=AUTH).status_code == 200
    printed = output.read_text()
    assert "Traceback" not in printed, printed
    assert "unhandled error" not in printed
    assert "Exception in ASGI application" not in printed
    # One line at debug level for each, shown when the server is asked for debug lines.
    gone = [line for line in printed.splitlines() if "client disconnected during" in line]
    assert len(gone) == 20, printed
    assert all(line.startswith("DEBUG:") for line in gone)


def test_a_live_stream_outlives_the_body_deadline(server: tuple[str, Path]) -> None:
    base, _ = server
    first = {"logs": [log("s1", 1, {"reward": 1.0}, project="live", run="r")]}
    assert httpx.post(base + "/ingest", json=first, headers=AUTH).status_code == 200
    url = base + "/api/v1/projects/live/runs/r/stream"
    with httpx.stream("GET", url, timeout=10) as stream:
        assert stream.status_code == 200
        time.sleep(TIMEOUT * 2)
        second = {"logs": [log("s2", 2, {"reward": 2.0}, project="live", run="r")]}
        assert httpx.post(base + "/ingest", json=second, headers=AUTH).status_code == 200
        seen = ""
        for text in stream.iter_text():
            seen += text
            if '"last_step":2' in seen.replace(" ", ""):
                break
    assert '"last_step":2' in seen.replace(" ", "")


@pytest.mark.parametrize("raw", ["nan", "inf", "0", "-1", "3601", "soon"])
def test_the_body_deadline_must_be_a_sane_number_of_seconds(raw: str) -> None:
    with pytest.raises(SettingError) as refused:
        Settings.from_env({"TUNEPLANE_BODY_TIMEOUT": raw})
    assert str(refused.value) == (
        f"TUNEPLANE_BODY_TIMEOUT={raw!r}: must be a finite number of seconds greater than 0 "
        "and at most 3600"
    )


def test_the_body_deadline_default() -> None:
    assert Settings.from_env({}).body_timeout == BODY_TIMEOUT_SECONDS_DEFAULT
    assert Settings.from_env({"TUNEPLANE_BODY_TIMEOUT": "2.5"}).body_timeout == 2.5
