"""A run whose job was restarted: each execution attempt reports its own round ``val-r``.

Execution 1 declares 4 trials and scores them all (q0-q2 successes, q3 a model failure);
execution 2 (the latest) declares 4 again and has reported only q0, a model failure. Event
IDs carry the execution attempt, as the SDK's do: a restart's outcomes are new events.
"""

from __future__ import annotations

from tests.dashboard.seed_eval import new_attempt, population, post_observations, trial

RESTART_RUN = "eval-restart"


def seed_restart(base: str, admin_key: str, run: str) -> str:
    first = new_attempt(base, admin_key, run)
    statuses = ["success", "success", "success", "failure"]
    post_observations(
        base,
        first,
        [population("val-r", 4), *(trial("val-r", f"q{i}", s) for i, s in enumerate(statuses))],
    )
    second = new_attempt(base, admin_key, run)
    again = [population("val-r", 4), trial("val-r", "q0", "failure")]
    post_observations(base, second, [{**e, "event_id": f"x2-{e['event_id']}"} for e in again])
    return run
