"""Every route of the app's OpenAPI description, fuzzed against a real ``tuneplane serve``
process on each engine: no request, however malformed and whoever sends it, gets a 5xx.

Schemathesis derives requests from ``/openapi.json`` (the hand-documented ``POST /ingest``
included): data that fits the description, data that breaks it, and the same with the path
naming a project, run, metric, round and trial that exist, so the routes get past their
404s. Every request is sent five times: with no credential, the Arena ingest secret, a user
API key (the admin key), a current ingest token of the seeded run and a share link to it.
Routes that take a body are also sent hostile JSON: repeated keys, NaN literals, deep
nesting, huge numbers.

The number of examples is bounded so the test takes well under a minute on two cores.
"""

from __future__ import annotations

import contextlib
import json
import os
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from tests.serving import running_server

SECRET = "fuzz-ingest-secret"
#: Examples per operation and kind of data; each is sent with five credentials.
EXAMPLES = int(os.environ.get("TUNEPLANE_FUZZ_EXAMPLES", "8"))
#: Path parameters that name what the seed stored.
KNOWN = {"project": "demo", "run": "r", "metric": "loss", "round_id": "val-1", "trial_id": "q1"}
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
SHA = "0" * 64


@dataclass
class Target:
    base: str
    http: httpx.Client
    admin: str
    token: str = ""
    share: str = ""
    failures: list[str] = field(default_factory=list)
    sent: int = 0

    def credentials(self) -> list[str | None]:
        return [
            None,
            f"Bearer {SECRET}",
            f"Bearer {self.admin}",
            f"Bearer {self.token}",
            f"Bearer {self.share}",
        ]

    def new_token(self) -> None:
        """A current ingest token: another route may have started a newer attempt."""
        answer = self.http.post(
            "/api/v1/projects/demo/runs/r/attempts",
            headers={"Authorization": f"Bearer {self.admin}"},
        )
        if answer.status_code == 201:
            self.token = answer.json()["token"]

    def send(self, label: str, request: dict[str, Any]) -> None:
        """Send ``request`` with each credential; a 5xx or a dropped connection is noted."""
        for credential in self.credentials():
            headers = {k: v for k, v in request["headers"].items() if k.lower() != "authorization"}
            if credential is not None:
                headers["Authorization"] = credential
            self.sent += 1
            try:
                with self.http.stream(**{**request, "headers": headers}) as response:
                    # A live stream never ends: its status line is the answer.
                    if not response.headers.get("content-type", "").startswith("text/event-stream"):
                        response.read()
                    status = response.status_code
            except httpx.HTTPError as exc:
                self.failures.append(f"{label}: {exc!r} ({_shown(request, credential)})")
                continue
            if status >= 500:
                self.failures.append(f"{label}: {status} ({_shown(request, credential)})")


def _shown(request: dict[str, Any], credential: str | None) -> str:
    body = request.get("content") or b""
    who = "no credential" if credential is None else credential.split()[1][:4] + "…"
    return (
        f"{request['method']} {request['url']} params={request.get('params')} as {who} "
        f"body={body[:300]!r}"
    )


def _request(case: Any, base: str) -> dict[str, Any]:
    """What schemathesis would send, for httpx (which streams what a route answers)."""
    kwargs = case.as_transport_kwargs(base_url=base)
    request: dict[str, Any] = {
        "method": kwargs["method"],
        "url": kwargs["url"],
        "headers": {str(k): str(v) for k, v in (kwargs.get("headers") or {}).items()},
        "params": kwargs.get("params"),
    }
    if "json" in kwargs:
        request["content"] = json.dumps(kwargs["json"]).encode()
    elif kwargs.get("data") is not None:
        data = kwargs["data"]
        request["content"] = data.encode() if isinstance(data, str) else data
    return request


# --- hostile bodies ---------------------------------------------------------------------------

_NAMES = st.sampled_from(
    [
        "logs",
        "alerts",
        "events",
        "series",
        "invalid",
        "lines",
        "run",
        "project",
        "config",
        "step",
        "steps",
        "values",
        "metrics",
        "fields",
        "type",
        "name",
        "event_id",
        "log_id",
        "status",
        "login",
        "password",
        "visibility",
        "role",
    ]
) | st.text(string.ascii_letters + ":/_ \u00e9", max_size=6)
_LEAVES = st.sampled_from(
    ["NaN", "Infinity", "-Infinity", "1e999", str(2**64), str(-(2**63) - 1), '"\\ud800"']
) | st.builds(
    json.dumps,
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.sampled_from(["demo", "r", "loss", "val-1", "q1", "event", "trial", "success", SHA]),
)


def _object(members: list[tuple[str, str]]) -> str:
    return "{" + ",".join(f"{json.dumps(key)}:{value}" for key, value in members) + "}"


_VALUES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4).map(lambda items: "[" + ",".join(items) + "]")
        | st.lists(st.tuples(_NAMES, inner), max_size=5).map(_object)
    ),
    max_leaves=24,
)


@st.composite
def hostile_bodies(draw: Callable[..., Any]) -> bytes:
    """JSON text (or nearly): objects with the contracts' key names, sometimes a key twice,
    sometimes nested past every limit."""
    members = draw(st.lists(st.tuples(_NAMES, _VALUES), min_size=1, max_size=5))
    if draw(st.booleans()):
        members.append(members[draw(st.integers(0, len(members) - 1))])
    text = _object(members)
    depth = draw(st.sampled_from([0, 0, 0, 40, 600]))
    return ('{"config":' * depth + text + "}" * depth).encode()


# --- the server -------------------------------------------------------------------------------


def _seed(target: Target) -> None:
    """A run with points, a log line, observations and an evaluation round; an Arena run."""
    admin = {"Authorization": f"Bearer {target.admin}"}
    created = target.http.post(
        "/api/v1/projects/demo/runs", json={"run": "r", "config": {"lr": 0.1}}, headers=admin
    )
    assert created.status_code == 201, created.text
    shared = target.http.post("/api/v1/projects/demo/runs/r/shares", json={}, headers=admin)
    assert shared.status_code == 201, shared.text
    target.share = shared.json()["url"].partition("#")[2]
    target.new_token()
    token = {"Authorization": f"Bearer {target.token}"}
    writes = {
        "scalars": {"series": [{"name": "loss", "steps": [0, 1], "values": [1.0, 0.5]}]},
        "logs": {"lines": [{"seq": 0, "stream": "stdout", "time": 1.0, "text": "step 1: ok"}]},
        "observations": {
            "events": [
                {"event_id": "e1", "type": "event", "name": "done", "fields": {"x": 1}},
                {"event_id": "e2", "type": "population", "round_id": "val-1", "expected": 2},
                {
                    "event_id": "e3",
                    "type": "trial",
                    "round_id": "val-1",
                    "trial_id": "q1",
                    "trial_attempt": 0,
                    "status": "success",
                    "eligible": False,
                    "reward": 1.0,
                },
            ]
        },
    }
    for route, body in writes.items():
        answer = target.http.post(f"/api/v1/ingest/{route}", json=body, headers=token)
        assert answer.status_code == 200, answer.text
    arena = {
        "logs": [
            {"project": "demo", "run": "arena", "step": 1, "log_id": "a", "metrics": {"m": 1}}
        ],
        "alerts": [
            {"project": "demo", "run": "arena", "alert_id": "x", "title": "t", "level": "warn"}
        ],
    }
    answer = target.http.post("/ingest", json=arena, headers={"Authorization": f"Bearer {SECRET}"})
    assert answer.status_code == 200, answer.text


@pytest.fixture
def target(database_url: str, tmp_path: Path) -> Iterator[Target]:
    data = tmp_path / "data"
    log = tmp_path / "server.log"
    with (
        running_server(
            "--data-dir",
            str(data),
            "--database-url",
            database_url,
            env={"TUNEPLANE_INGEST_SECRET": SECRET},
            output=log,
        ) as base,
        httpx.Client(base_url=base, timeout=30) as http,
    ):
        found = Target(base, http, (data / "admin.key").read_text().strip())
        _seed(found)
        yield found
    # A stream that failed after its status line shows only in the server's log.
    printed = log.read_text()
    assert "Traceback" not in printed, printed[-6000:]


def _fuzz(strategy: Any, send: Callable[[Any], None]) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def run(example: Any) -> None:
        send(example)

    # Unsatisfiable: nothing to make invalid (an operation without parameters or body).
    with contextlib.suppress(Unsatisfiable):
        run()


def _hostile(target: Target, label: str, case: Any, body: bytes) -> None:
    request = _request(case, target.base)
    request["content"] = body
    request["headers"]["Content-Type"] = "application/json"
    target.send(label, request)


def test_no_request_to_any_route_gets_a_5xx(target: Target) -> None:
    schema = schemathesis.openapi.from_url(target.base + "/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert any(op.path == "/ingest" for op in operations), "POST /ingest must be described"
    # Deletions last: one may revoke the admin key the later operations are sent with.
    operations.sort(key=lambda op: op.method.upper() == "DELETE")
    for operation in operations:
        label = f"{operation.method.upper()} {operation.path}"
        target.new_token()
        known = {name: value for name, value in KNOWN.items() if "{" + name in operation.path}
        strategies = [
            operation.as_strategy(GenerationMode.POSITIVE),
            operation.as_strategy(GenerationMode.NEGATIVE),
        ]
        if known:
            strategies.append(operation.as_strategy(path_parameters=known))
        for strategy in strategies:
            _fuzz(
                strategy, lambda case, label=label: target.send(label, _request(case, target.base))
            )
        if operation.method.upper() in BODY_METHODS:
            case = operation.as_strategy(path_parameters=known or None)
            _fuzz(
                st.tuples(case, hostile_bodies()),
                lambda pair, label=label: _hostile(target, label, *pair),
            )
    assert target.sent > 1_000
    if os.environ.get("TUNEPLANE_FUZZ_REPORT"):
        Path(os.environ["TUNEPLANE_FUZZ_REPORT"]).write_text("\n".join(target.failures))
    assert not target.failures, "\n".join(dict.fromkeys(target.failures))
