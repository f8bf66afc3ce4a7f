"""Every route that takes a body refuses an oversized one before reading it whole, against a
real ``tuneplane serve`` process (docs/ingest.md: larger bodies are refused with 413 before
they are read in full).

The routes are the app's own: every POST, PUT and PATCH it answers, sent with the credential
its access rule names and with path parameters that name what exists, so each request gets
as far into its route as a real caller's would. The body is streamed (chunked, no length
declared) over a raw socket that stops sending as soon as the server answers, so the bytes
sent are the bytes the server took before it answered: a route that reads its body whole
before looking at its size takes all of it.
"""

from __future__ import annotations

import re
import selectors
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conftest import INGEST_SECRET
from tests.server.test_access import app_routes
from tests.serving import running_server
from tuneplane.contract.limits import ARENA_BODY_MAX_BYTES, INGEST_BODY_MAX_BYTES
from tuneplane.contract.trackio import TRACKIO_BODY_MAX_BYTES, WRITE_TOKEN_HEADER
from tuneplane.server.access import SESSION_COOKIE, rule_for
from tuneplane.server.app import create_app
from tuneplane.server.settings import Secret, Settings
from tuneplane.store import accounts
from tuneplane.store.database import Database

MiB = 1024 * 1024
#: The largest body any route reads (the Trackio protocol's; the others' limits are some
#: KiB): a route may take this much before it knows the body is too large.
LARGEST_LIMIT = max(ARENA_BODY_MAX_BYTES, INGEST_BODY_MAX_BYTES, TRACKIO_BODY_MAX_BYTES)


def _socket_slack() -> int:
    """What may be sent beyond what the route read: the client's send buffer and the
    server's receive buffer (each autotuned up to the kernel's maximum), and a chunk the
    server has read ahead."""
    try:
        most = [
            int(Path(f"/proc/sys/net/ipv4/tcp_{kind}mem").read_text().split()[2])
            for kind in ("w", "r")
        ]
    except (OSError, IndexError, ValueError):
        return 16 * MiB  # not Linux: loopback's buffers are some MiB each elsewhere too
    return sum(most) + MiB


SOCKET_SLACK = _socket_slack()
#: A route that took more than this read past its limit.
BOUND = LARGEST_LIMIT + SOCKET_SLACK
CHUNK = 64 * 1024
#: The body sent (whole chunks of it): twice the bound, so a route that reads it whole is
#: plainly over it.
BODY_BYTES = -(-2 * BOUND // CHUNK) * CHUNK
PASSWORD = "a long passphrase"
PROJECT, RUN, LOGIN = "limits", "r1", "member"
#: Real values for the path parameters of the routes that take a body.
PATH_VALUES = {"project": PROJECT, "run": RUN, "login": LOGIN, "rule_id": "1", "job_id": "1"}
#: Routes that read no body: their answer about what the path names (no job 1) is theirs.
NO_BODY = {"/api/v1/projects/{project}/launch/jobs/{job_id}/cancel"}
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_PARAMETER = re.compile(r"\{(\w+)(?::\w+)?\}")


@dataclass
class Server:
    base: str
    port: int
    admin_key: str
    session: dict[str, str]
    log: Path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server on SQLite (body limits are above the store), with a project, a run, a
    member to name and a signed-in administrator's session (API keys never manage keys)."""
    data = tmp_path_factory.mktemp("limits")
    database = Database(f"sqlite:///{data / 'tuneplane.db'}")
    database.migrate()
    digest = accounts.hash_password(PASSWORD)
    for login in ("admin", LOGIN):
        database.run_write(
            lambda c, login=login: accounts.add_user(
                c, login, password_hash=digest, is_admin=login == "admin"
            )
        )
    database.close()
    log = data / "server.log"
    env = {"TUNEPLANE_INGEST_SECRET": INGEST_SECRET}
    with running_server("--data-dir", str(data), env=env, output=log) as base:
        admin_key = (data / "admin.key").read_text().strip()
        made = httpx.post(
            f"{base}/api/v1/projects/{PROJECT}/runs",
            json={"run": RUN},
            headers={"Authorization": f"Bearer {admin_key}"},
        )
        assert made.status_code == 201, made.text
        signed_in = httpx.post(
            f"{base}/api/v1/session", json={"login": "admin", "password": PASSWORD}
        )
        assert signed_in.status_code == 200, signed_in.text
        session = {
            "Cookie": f"{SESSION_COOKIE}={signed_in.cookies[SESSION_COOKIE]}",
            "Origin": base,
            "X-CSRF-Token": signed_in.json()["csrf_token"],
        }
        port = int(base.rsplit(":", 1)[1])
        yield Server(base, port, admin_key, session, log)
    printed = log.read_text()
    assert "Traceback" not in printed, printed[-6000:]


def _credential(server: Server, action: str) -> dict[str, str]:
    """The headers of the caller each kind of access rule admits."""
    if action == "arena-secret":
        return {"Authorization": f"Bearer {INGEST_SECRET}"}
    if action == "ingest-token":
        # A fresh token each time: a route may have started a newer attempt of the run.
        issued = httpx.post(
            f"{server.base}/api/v1/projects/{PROJECT}/runs/{RUN}/attempts",
            headers={"Authorization": f"Bearer {server.admin_key}"},
        )
        assert issued.status_code == 201, issued.text
        return {"Authorization": f"Bearer {issued.json()['token']}"}
    if action == "trackio-token":
        return {WRITE_TOKEN_HEADER: server.admin_key}
    if action == "sign-in":
        return {}
    if action == "manage-account":
        return server.session
    return {"Authorization": f"Bearer {server.admin_key}"}


@dataclass
class Answer:
    #: None: the connection was closed before a status line arrived.
    status: int | None
    #: Bytes of the body sent before the server answered (or closed the connection).
    sent: int
    #: The server closed (or reset) the connection: a refusal too, if early enough.
    closed: bool = False


def _chunks(declared: bool) -> Iterator[bytes]:
    """The body on the wire: ``BODY_BYTES`` of an unfinished JSON string, chunked unless
    its length was declared."""
    piece = b'{"padding": "' + b"a" * (CHUNK - 13)
    for _ in range(BODY_BYTES // CHUNK):
        yield piece if declared else b"%x\r\n%s\r\n" % (len(piece), piece)
    if not declared:
        yield b"0\r\n\r\n"


def upload(
    server: Server, method: str, path: str, headers: dict[str, str], *, declared: bool = False
) -> Answer:
    """Send ``BODY_BYTES`` to ``path`` until the server answers; what it took and said."""
    framing = f"Content-Length: {BODY_BYTES}" if declared else "Transfer-Encoding: chunked"
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{server.port}", framing]
    lines += ["Content-Type: application/json", *(f"{k}: {v}" for k, v in headers.items())]
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    sock.setblocking(False)
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
    body, pending, sent, received = _chunks(declared), b"", 0, b""
    closed, deadline = False, time.monotonic() + 60
    try:
        while b"\r\n" not in received and time.monotonic() < deadline:
            for _, events in selector.select(timeout=0.5):
                if events & selectors.EVENT_READ:
                    try:
                        chunk = sock.recv(65536)
                    except ConnectionError:
                        chunk = b""
                    if not chunk:
                        return Answer(_status(received), sent, closed=True)
                    received += chunk
                elif events & selectors.EVENT_WRITE:
                    pending = pending or next(body, b"")
                    if not pending:  # all of it sent: now only the answer is awaited
                        selector.modify(sock, selectors.EVENT_READ)
                        continue
                    try:
                        taken = sock.send(pending)
                    except ConnectionError:
                        # Closed by the server, which may have answered first: read that.
                        closed = True
                        selector.modify(sock, selectors.EVENT_READ)
                        continue
                    sent, pending = sent + taken, pending[taken:]
        return Answer(_status(received), sent, closed)
    finally:
        selector.close()
        sock.close()


def _status(received: bytes) -> int | None:
    line = received.partition(b"\r\n")[0].split()
    return int(line[1]) if len(line) >= 2 and line[1].isdigit() else None


def _body_routes(data_dir: Path) -> list[tuple[str, str]]:
    """Every (method, path template) of the app whose requests carry a body."""
    settings = Settings(
        data_dir=data_dir,
        database_url=f"sqlite:///{data_dir / 'routes.db'}",
        ingest_secret=Secret(INGEST_SECRET),
    )
    routes = app_routes(create_app(settings))
    return sorted((method, path) for method, path in routes if method in BODY_METHODS)


def _concrete(path: str) -> str:
    """``path`` with each parameter naming something that exists."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        assert name in PATH_VALUES, f"{path}: add a real value for {{{name}}} to PATH_VALUES"
        return PATH_VALUES[name]

    return _PARAMETER.sub(value, path)


def test_every_route_refuses_an_oversized_body_before_reading_it_whole(
    server: Server, tmp_path: Path
) -> None:
    routes = _body_routes(tmp_path)
    # The Arena route and the Trackio protocol are among them.
    assert ("POST", "/ingest") in routes
    assert ("POST", "/api/bulk_log") in routes
    answers: dict[str, Answer] = {}
    for method, path in routes:
        rule = rule_for(method, path)
        assert rule is not None, f"{method} {path}: no access rule"
        headers = _credential(server, str(rule.action))
        answers[f"{method} {path}"] = upload(server, method, _concrete(path), headers)
    shown = "\n".join(
        f"{route}: {answer.status} after {answer.sent / MiB:.1f} MiB"
        + (" (closed)" if answer.closed else "")
        for route, answer in answers.items()
    )
    failed = [
        route
        for route, answer in answers.items()
        if answer.sent > BOUND
        or (answer.status is not None and answer.status >= 500)
        or (answer.status is None and not answer.closed)
    ]
    assert failed == [], f"read past the limit or failed (bound {BOUND / MiB:.0f} MiB):\n{shown}"
    # The credentials got each request into its route: nothing was refused for who sent it.
    refused = [
        r
        for r, a in answers.items()
        if a.status in (401, 403, 404) and r.split(" ", 1)[1] not in NO_BODY
    ]
    assert refused == [], f"refused before the route read anything:\n{shown}"


def test_a_declared_length_over_the_limit_is_refused_before_the_body_is_sent(
    server: Server,
) -> None:
    answer = upload(server, "POST", "/ingest", _credential(server, "arena-secret"), declared=True)
    assert answer.status == 413, answer
    # Refused on the header: nothing of the body was read, only buffered.
    assert answer.sent <= SOCKET_SLACK, answer
