"""Webhooks of alert rules (docs/alerts.md#webhooks), received by a real HTTP server on
loopback (which the operator lists in the outbound allow-list), on SQLite and PostgreSQL:
signed bodies in both formats, retries, the delivery log, and endpoints that are down or
slow, which never slow ingest."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.server.test_alert_rules import RULES, alerts, api, arena, rule, wait_for
from tuneplane.contract.outbound import parse_allow_list
from tuneplane.server.settings import Settings

__all__ = ["api"]  # the fixture, shared
P = "/api/v1/projects/demo"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The receivers are on loopback, which outbound calls reach only when listed."""
    return replace(settings, outbound_allow=parse_allow_list("127.0.0.1"))


@dataclass
class Receiver:
    """What the loopback server was sent: (path, headers, body) per request."""

    base: str
    got: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    failures_left: dict[str, int] = field(default_factory=dict)

    def bodies(self, path: str) -> list[tuple[dict[str, str], bytes]]:
        return [(headers, body) for p, headers, body in list(self.got) if p == path]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    held: dict[str, Receiver] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            found = held["r"]
            found.got.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            if self.path == "/slow":
                time.sleep(3)
            if self.path == "/moved":
                self.send_response(307)
                self.send_header("Location", "/landed")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            left = found.failures_left.get(self.path, 0)
            if left:
                found.failures_left[self.path] = left - 1
            self.send_response(500 if left else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    held["r"] = Receiver(f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield held["r"]
    server.shutdown()
    server.server_close()


def hook(api: TestClient, url: str, format: str = "json") -> dict[str, Any]:
    made = api.post(P + "/webhooks", json={"url": url, "format": format, "name": format})
    assert made.status_code == 201, made.text
    found: dict[str, Any] = made.json()
    return found


def deliveries(api: TestClient, webhook: int) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = api.get(f"{P}/webhooks/{webhook}/deliveries").json()["deliveries"]
    return found


def test_alerts_reach_webhooks_signed_in_both_formats(api: TestClient, receiver: Receiver) -> None:
    arena(api, 1, {"reward": 1.0})
    plain = hook(api, receiver.base + "/plain")
    slack = hook(api, receiver.base + "/slack", "slack")
    assert plain["secret"].startswith("whsec_")
    listed = api.get(P + "/webhooks").json()["webhooks"]
    assert [w["format"] for w in listed] == ["json", "slack"]
    assert all("secret" not in w for w in listed)  # shown once
    made = rule(api, kind="threshold", metric="reward", op="below", value=0.5)
    arena(api, 2, {"reward": 0.1})
    arena(api, 3, {"reward": 0.9})
    assert wait_for(
        lambda: len(receiver.bodies("/plain")) == 2 and len(receiver.bodies("/slack")) == 2
    )
    (opened_headers, opened), (_, resolved) = receiver.bodies("/plain")
    expected = "sha256=" + hmac.new(plain["secret"].encode(), opened, hashlib.sha256).hexdigest()
    assert opened_headers["x-tuneplane-signature"] == expected
    assert opened_headers["x-tuneplane-event"] == "alert.opened"
    payload = json.loads(opened)
    assert (payload["project"], payload["run"], payload["event"]) == ("demo", "r1", "alert.opened")
    assert payload["alert"]["alert_id"] == f"rule-{made['id']}-1"
    assert payload["rule"] == {"id": made["id"], "name": "threshold reward", "kind": "threshold"}
    assert json.loads(resolved)["event"] == "alert.resolved"
    slack_headers, slack_body = receiver.bodies("/slack")[0]
    digest = hmac.new(slack["secret"].encode(), slack_body, hashlib.sha256).hexdigest()
    assert slack_headers["x-tuneplane-signature"] == "sha256=" + digest
    assert json.loads(slack_body) == {"text": "[warn] demo/r1: reward below 0.5 at step 2"}
    assert wait_for(lambda: all(d["state"] == "delivered" for d in deliveries(api, plain["id"])))
    log = deliveries(api, plain["id"])
    assert [(d["event"], d["attempts"], d["last_status"]) for d in log] == [
        ("alert.resolved", 1, 200),
        ("alert.opened", 1, 200),
    ]


def test_a_failing_endpoint_is_retried_until_it_answers(
    api: TestClient, receiver: Receiver
) -> None:
    arena(api, 1, {"reward": 1.0})
    receiver.failures_left["/flaky"] = 2
    flaky = hook(api, receiver.base + "/flaky")
    rule(api, kind="threshold", metric="reward", op="above", value=5)
    arena(api, 2, {"reward": 9.0})
    assert wait_for(lambda: [d["state"] for d in deliveries(api, flaky["id"])] == ["delivered"])
    (delivered,) = deliveries(api, flaky["id"])
    assert (delivered["attempts"], delivered["last_status"], delivered["last_error"]) == (
        3, 200, None
    )  # fmt: skip
    ids = {headers["x-tuneplane-delivery"] for headers, _ in receiver.bodies("/flaky")}
    assert len(receiver.bodies("/flaky")) == 3
    assert len(ids) == 1  # the same delivery, tried three times


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_endpoints_down_or_slow_never_slow_ingest(api: TestClient, receiver: Receiver) -> None:
    arena(api, 1, {"reward": 1.0})
    down = hook(api, f"http://127.0.0.1:{_closed_port()}/gone")
    slow = hook(api, receiver.base + "/slow")
    rule(api, kind="threshold", metric="reward", op="above", value=5)
    took = []
    for step in range(2, 22):  # ten episodes opened, nine resolved
        started = time.monotonic()
        arena(api, step, {"reward": 9.0 if step % 2 else 1.0})
        took.append(time.monotonic() - started)
    assert max(took) < 1.0, took
    assert wait_for(lambda: len(alerts(api)) == 19)
    # Every try of the one that is down failed, then the delivery was given up (5 tries).
    gave_up = wait_for(
        lambda: all(d["state"] == "failed" for d in deliveries(api, down["id"])), timeout=40
    )
    assert gave_up
    first = deliveries(api, down["id"])[-1]
    assert first["attempts"] == 5
    assert first["last_status"] is None
    assert first["last_error"] == "failed"  # never why: that would tell open ports apart
    assert len(deliveries(api, slow["id"])) == 19
    assert api.get(RULES).status_code == 200


def test_a_bad_webhook_is_a_422_naming_its_field(api: TestClient) -> None:
    arena(api, 1, {"reward": 1.0})
    for body, field_name in [
        ({"url": "ftp://example.com/x"}, "url"),
        ({"url": "http://"}, "url"),
        ({"url": "https://example.com/x", "format": "teams"}, "format"),
        ({"url": "https://example.com/x", "secret": "mine"}, "secret"),
    ]:
        answer = api.post(P + "/webhooks", json=body)
        assert answer.status_code == 422, answer.text
        assert [d["field"] for d in answer.json()["error"]["details"]] == [field_name]
    assert api.delete(P + "/webhooks/7").status_code == 404
    assert api.get(P + "/webhooks/7/deliveries").status_code == 404
