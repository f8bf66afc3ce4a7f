"""Webhooks by the outbound policy (docs/configuration.md#outbound-calls), through the real
app on SQLite and PostgreSQL, with real receivers on loopback: loopback and private targets
refused at creation in every spelling, admitted when the operator lists them, judged again
at every delivery (DNS rebinding), and a delivery log that cannot tell an open port from a
closed one. Only the world's name resolution is stood in for, by the policy's resolver."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.server.conftest import admin_client
from tests.server.test_alert_rules import arena, rule
from tests.server.test_alert_rules import wait_for as wait_for_a_while
from tests.server.test_webhooks import P, Receiver, deliveries, hook, receiver
from tuneplane.contract.outbound import RULE, AllowList, parse_allow_list
from tuneplane.server.outbound import OutboundPolicy
from tuneplane.server.settings import Settings

__all__ = ["receiver"]  # the fixture, shared


def client_of(settings: Settings, allow: str | None) -> Iterator[TestClient]:
    """The app with quick alert checks and retries, and ``allow`` as the allow-list."""
    listed = AllowList() if allow is None else parse_allow_list(allow)
    assert listed is not None
    fast = replace(settings, alert_check_interval=0.2, webhook_retry=0.2, outbound_allow=listed)
    yield from admin_client(fast)


@pytest.fixture
def strict_api(settings: Settings) -> Iterator[TestClient]:
    """The default policy: public addresses only."""
    yield from client_of(settings, None)


@pytest.fixture
def loopback_api(settings: Settings) -> Iterator[TestClient]:
    """Loopback's 127.0.0.1 listed by the operator."""
    yield from client_of(settings, "127.0.0.1")


def policy_of(api: TestClient) -> OutboundPolicy:
    policy: OutboundPolicy = api.app.state.tuneplane.outbound  # type: ignore[attr-defined]
    return policy


class WorldDNS:
    """The world's name resolution, as the test says it is, counting the questions."""

    def __init__(self, **names: list[str]) -> None:
        self.names = names
        self.asked: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        if host not in self.names:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.names[host]


def latest(api: TestClient, webhook: dict[str, Any]) -> dict[str, Any]:
    """The webhook's latest delivery (an empty one until the alert queued it)."""
    found = deliveries(api, webhook["id"])
    return found[0] if found else {"state": None, "attempts": 0}


def project(api: TestClient) -> None:
    arena(api, 1, {"reward": 1.0})


def wait_for(probe: Callable[[], Any]) -> Any:
    return wait_for_a_while(probe, timeout=30)  # a loaded machine's alert may take a while


def alert_fires(api: TestClient) -> None:
    rule(api, kind="threshold", metric="reward", op="above", value=5)
    arena(api, 2, {"reward": 9.0})


REFUSED = {
    "http://127.0.0.1:5432/": "127.0.0.1 is a loopback address",
    "http://2130706433/": "2130706433 resolves to a loopback address",
    "http://127.1/": "127.1 resolves to a loopback address",
    "http://0x7f.1:8000/api/v1/projects": "0x7f.1 resolves to a loopback address",
    "http://[::1]/": "::1 is a loopback address",
    "https://[::ffff:127.0.0.1]/": "::ffff:127.0.0.1 is a loopback address",
    "http://localhost/": "localhost resolves to a loopback address",
    "http://LOCALHOST./": "localhost resolves to a loopback address",
    "http://0.0.0.0/": "0.0.0.0 is an unspecified address",
    "http://10.1.2.3/": "10.1.2.3 is a private address",
    "http://169.254.169.254/latest/meta-data/": "169.254.169.254 is a link-local address",
    "http://100.64.0.1/": "100.64.0.1 is a carrier-grade NAT address",
    "http://[fd00::1]/": "fd00::1 is a unique-local address",
}


def test_loopback_and_private_targets_are_refused_at_creation(
    strict_api: TestClient, receiver: Receiver
) -> None:
    project(strict_api)
    for url, why in {**REFUSED, receiver.base + "/hook": "127.0.0.1 is a loopback address"}.items():
        answer = strict_api.post(P + "/webhooks", json={"url": url})
        assert answer.status_code == 422, (url, answer.text)
        error = answer.json()["error"]
        assert error["details"] == [{"field": "url", "rule": f"{why}; {RULE}"}], url
        assert error["message"].startswith("url: ")
    unknown = strict_api.post(P + "/webhooks", json={"url": "http://no-such-host.invalid/"})
    assert unknown.json()["error"]["details"] == [
        {"field": "url", "rule": "no-such-host.invalid does not resolve"}
    ]
    assert strict_api.get(P + "/webhooks").json()["webhooks"] == []


def test_a_listed_network_or_name_gets_its_deliveries(
    settings: Settings, receiver: Receiver
) -> None:
    port = receiver.base.rsplit(":", 1)[1]
    for api in client_of(settings, "127.0.0.0/8,localhost"):
        project(api)
        by_network = hook(api, f"http://127.1:{port}/network")
        by_name = hook(api, f"http://localhost:{port}/name")
        refused = api.post(P + "/webhooks", json={"url": f"http://[::1]:{port}/"})
        assert refused.status_code == 422  # ::1 is on no list
        alert_fires(api)
        for made in (by_network, by_name):
            assert wait_for(lambda a=api, made=made: latest(a, made)["state"] == "delivered")
    assert len(receiver.bodies("/network")) == 1
    assert len(receiver.bodies("/name")) == 1


def test_a_name_that_resolves_elsewhere_at_delivery_is_refused_then(
    strict_api: TestClient, receiver: Receiver
) -> None:
    port = receiver.base.rsplit(":", 1)[1]
    world = WorldDNS(**{"hooks.example": ["93.184.215.14"]})
    policy_of(strict_api).resolve = world
    project(strict_api)
    made = hook(strict_api, f"http://hooks.example:{port}/rebound")  # public: admitted
    world.names["hooks.example"] = ["93.184.215.14", "127.0.0.1"]  # the record changed
    alert_fires(strict_api)
    assert wait_for(lambda: latest(strict_api, made)["attempts"] >= 1)
    (tried,) = deliveries(strict_api, made["id"])
    assert tried["last_status"] is None
    assert tried["last_error"] == (
        f"refused by policy: hooks.example resolves to a loopback address; {RULE}"
    )
    assert receiver.got == []


def test_the_connection_goes_to_the_address_that_was_judged(
    loopback_api: TestClient, receiver: Receiver
) -> None:
    port = receiver.base.rsplit(":", 1)[1]
    # The system cannot resolve this name: only the judged address can be connected to.
    world = WorldDNS(**{"receiver.example": ["127.0.0.1"]})
    policy_of(loopback_api).resolve = world
    project(loopback_api)
    made = hook(loopback_api, f"http://receiver.example:{port}/named")
    alert_fires(loopback_api)
    assert wait_for(lambda: latest(loopback_api, made)["state"] == "delivered")
    ((headers, _body),) = receiver.bodies("/named")
    assert headers["host"] == f"receiver.example:{port}"  # the name, not the address
    assert world.asked == ["receiver.example", "receiver.example"]  # creation, delivery


def _listener(answer: Callable[[socket.socket], None]) -> Iterator[int]:
    """A TCP port on loopback that does ``answer`` to each connection."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            with connection:
                answer(connection)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


@pytest.fixture
def hangs_up() -> Iterator[int]:
    yield from _listener(lambda connection: None)


@pytest.fixture
def speaks_another_protocol() -> Iterator[int]:
    yield from _listener(lambda connection: connection.sendall(b"SSH-2.0-OpenSSH_9.6\r\n"))


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_a_closed_port_and_open_ones_read_the_same_in_the_delivery_log(
    loopback_api: TestClient, receiver: Receiver, hangs_up: int, speaks_another_protocol: int
) -> None:
    port = receiver.base.rsplit(":", 1)[1]
    project(loopback_api)
    urls = [
        f"http://127.0.0.1:{_closed_port()}/",
        f"http://127.0.0.1:{hangs_up}/",
        f"http://127.0.0.1:{speaks_another_protocol}/",
        f"https://127.0.0.1:{port}/tls",  # a TLS handshake with a plain HTTP server
    ]
    made = [hook(loopback_api, url) for url in urls]
    alert_fires(loopback_api)

    def logs() -> list[dict[str, Any]]:
        return [latest(loopback_api, webhook) for webhook in made]

    assert wait_for(lambda: all(log["attempts"] >= 1 for log in logs()))
    assert {(log["last_status"], log["last_error"]) for log in logs()} == {(None, "failed")}


def test_a_redirect_is_an_answer_not_a_second_call(
    loopback_api: TestClient, receiver: Receiver
) -> None:
    project(loopback_api)
    made = hook(loopback_api, receiver.base + "/moved")
    alert_fires(loopback_api)
    assert wait_for(lambda: latest(loopback_api, made)["attempts"] >= 1)
    tried = latest(loopback_api, made)
    assert (tried["last_status"], tried["last_error"]) == (307, "HTTP 307")
    assert receiver.bodies("/landed") == []
