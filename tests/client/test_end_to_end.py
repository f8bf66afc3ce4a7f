"""``tuneplane run`` of a real training script against a real ``tuneplane serve`` process,
on SQLite and on PostgreSQL: every point and every log line arrives exactly once, even when
responses are lost on the way back."""

from __future__ import annotations

import threading

from tests.client import training_job
from tests.client.runs import Server, assert_everything_arrived_once, tuneplane_run
from tests.client.world import Fate, proxy

STEPS = 300


def test_a_training_run_arrives_exactly_once(server: Server) -> None:
    done = tuneplane_run(server.base, server.data_dir, "run-once", str(STEPS), "0")
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    # The command's output is passed through unchanged, byte for byte.
    assert done.stdout == b"\n".join(training_job.expected_stdout(STEPS))
    stderr = done.stderr.decode(errors="replace")
    assert "tuneplane: reporting e2e/run-once (attempt 1)" in stderr
    for line in training_job.expected_stderr(STEPS):
        assert line.decode() in stderr
    assert "delivered" not in stderr  # nothing lost, nothing to sum up

    run = assert_everything_arrived_once(server, "run-once", STEPS)
    assert (run["status"], run["exit_code"], run["attempt"]) == ("succeeded", 0, 1)
    transport = run["transport"]
    assert transport["state"] == "ok"
    assert (transport["sent"], transport["dropped"], transport["queue_size"]) == (3 * STEPS, 0, 0)


def test_retries_after_lost_responses_store_nothing_twice(server: Server) -> None:
    """The proxy lets the server start the attempt and store the first scalar batch and the
    first log batch, then cuts the connection before each answer: the clients retry, the
    server deduplicates (and the retried start returns the same attempt)."""
    lost: dict[bytes, int] = {}
    lock = threading.Lock()
    routes = (
        b"POST /api/v1/projects/e2e/runs/run-lossy/attempts ",
        b"POST /api/v1/ingest/scalars ",
        b"POST /api/v1/ingest/logs ",
    )

    def lose_first(request: bytes) -> Fate:
        for route in routes:
            if request.startswith(route):
                with lock:
                    lost[route] = lost.get(route, 0) + 1
                    return "lose" if lost[route] == 1 else "pass"
        return "pass"

    with proxy(server.base, lose_first) as url:
        done = tuneplane_run(url, server.data_dir, "run-lossy", str(STEPS), "0")
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert set(lost) == set(routes)
    assert all(count >= 2 for count in lost.values())  # each was sent again

    run = assert_everything_arrived_once(server, "run-lossy", STEPS)
    assert (run["status"], run["attempt"]) == ("succeeded", 1)
    transport = run["transport"]
    assert transport["failed_sends"] >= 1
    assert (transport["sent"], transport["dropped"]) == (3 * STEPS, 0)
    assert transport["state"] == "ok"  # failed sends are counted, but nothing was lost
