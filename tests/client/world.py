"""The world outside the SDK, simulated: a tiny HTTP server that records what it is sent
and answers as told, a port nobody listens on, and a proxy that loses responses."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from tests.serving import free_port


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


#: Decides the answer to a request: ``(status, json body)``.
Answer = Callable[[Request], tuple[int, Any]]


def accept_all(request: Request) -> tuple[int, Any]:
    if request.path.endswith("/scalars"):
        points = sum(len(s["steps"]) for s in request.body.get("series", []))
        invalid = sum(len(s["steps"]) for s in request.body.get("invalid", []))
        return 200, {"points": {"new": points, "corrected": 0}, "invalid": invalid}
    if request.path.endswith("/logs"):
        return 200, {"new": len(request.body["lines"]), "duplicate": 0}
    return 200, {}


@dataclass
class Recorder:
    """What the fake server received, in order; ``answer`` may be replaced at any time."""

    answer: Answer = accept_all
    requests: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def to(self, suffix: str) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.path.endswith(suffix)]

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError("condition not met in time")
            time.sleep(0.01)


@contextmanager
def recording_server(recorder: Recorder | None = None) -> Iterator[tuple[str, Recorder]]:
    """A real HTTP server on a free port; yields its base URL and the recorder."""
    seen = recorder or Recorder()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            request = Request(
                "POST", self.path, dict(self.headers.items()), json.loads(raw) if raw else None
            )
            with seen.lock:
                seen.requests.append(request)
            status, body = seen.answer(request)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def dead_url() -> str:
    """A URL where nothing listens: connections are refused at once."""
    return f"http://127.0.0.1:{free_port()}"


#: What the proxy does with one request: forward it and pass the answer back ("pass"),
#: forward it but lose the answer ("lose"), or cut the connection at once ("cut").
Fate = Literal["pass", "lose", "cut"]


@contextmanager
def proxy(target: str, fate: Callable[[bytes], Fate]) -> Iterator[str]:
    """A TCP proxy in front of ``target`` (``http://host:port``) that decides the fate of
    each request: a network that fails after the server did the work ("lose"), or a server
    that is gone ("cut")."""
    host, port = target.removeprefix("http://").split(":")
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stopping = threading.Event()

    def read_message(sock: socket.socket) -> bytes:
        """One HTTP/1.1 message: headers, then Content-Length bytes of body."""
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return data
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
        return head + b"\r\n\r\n" + body

    def handle(client: socket.socket) -> None:
        with client:
            upstream: socket.socket | None = None
            try:
                while True:
                    request = read_message(client)
                    if not request:
                        return
                    decided = fate(request)
                    if decided == "cut":
                        return
                    if upstream is None:
                        upstream = socket.create_connection((host, int(port)))
                    upstream.sendall(request)
                    response = read_message(upstream)
                    if decided == "lose":
                        return  # the server answered; the client never hears it
                    client.sendall(response)
            except OSError:
                return
            finally:
                if upstream is not None:
                    upstream.close()

    def serve() -> None:
        while not stopping.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=handle, args=(client,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stopping.set()
        thread.join()
        listener.close()
