"""Where the guard decides: a read decides on the connection its route reads with (one
connection per request), and a request broken in some other way is still refused first to a
caller who may not see the project (docs/access.md)."""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import event

from tests.server.conftest import SECRET_PROJECT, World

_RUN = f"/api/v1/projects/{SECRET_PROJECT}/runs/r1"


def _checkouts(world: World, reads: list[tuple[str, str]]) -> list[int]:
    """How many connections the request threads took out of the pool for each read, the
    fewest of three tries (the server's own background work takes some now and then)."""
    engine = world.client.app.state.tuneplane.database.engine  # type: ignore[attr-defined]
    counted: list[int] = []

    def on_checkout(*_: Any) -> None:
        if threading.current_thread().name.startswith("AnyIO worker"):
            counted[-1] += 1

    event.listen(engine, "checkout", on_checkout)
    try:
        for caller, path in reads * 3:
            counted.append(0)
            answer = world.client.get(path, headers=world.callers[caller])
            assert answer.status_code in (200, 404), answer.text
    finally:
        event.remove(engine, "checkout", on_checkout)
    return [min(counted[index :: len(reads)]) for index in range(len(reads))]


def test_a_read_and_its_decision_share_one_connection(world: World) -> None:
    reads = [
        ("owner_read_key", _RUN),
        ("viewer", _RUN),
        ("share_link", _RUN),
        ("outsider", _RUN),
        ("anonymous", _RUN),
        ("owner_read_key", "/api/v1/projects"),
        ("anonymous", "/api/v1/projects"),
        ("owner_read_key", _RUN + "/points?metric=loss&max_points=10"),
    ]
    assert _checkouts(world, reads) == [1] * len(reads)


def test_a_bad_parameter_is_refused_as_the_project_would_be(world: World) -> None:
    client, callers = world.client, world.callers
    bad = _RUN + "/points?metric=loss&max_points=many"
    for caller in ("anonymous", "outsider", "other_share_link"):
        answer = client.get(bad, headers=callers[caller])
        assert answer.status_code == 404, (caller, answer.text)
        assert answer.json()["error"]["code"] == "not_found"
    refused = client.get(bad, headers=callers["revoked_key"])
    assert refused.status_code == 401, refused.text
    for caller in ("owner_read_key", "viewer", "share_link"):
        answer = client.get(bad, headers=callers[caller])
        assert answer.status_code == 422, (caller, answer.text)
        assert "max_points" in answer.json()["error"]["message"]
    missing = client.get("/api/v1/projects/nowhere/runs/r1/points?metric=loss&max_points=x")
    assert missing.status_code == 404, missing.text
