"""Observation events and evaluation outcomes for the dashboard tests and screenshots, sent
through the run protocol (an attempt's ingest token), as a training job would send them.

``lab/eval-base`` and ``lab/eval-tuned`` hold the rounds the tests read:

- ``val-1``: 140 trials declared; base reports 130 (78 successes, 26 model failures, 13
  execution errors, 13 unscored), tuned reports 120, all scored: the difference is withheld.
- ``val-open``: results without a declaration (unknown population), base only.
- ``val-full``: 20 trials declared and all scored on both sides: the difference is shown.

``eval-base`` also has a health snapshot followed by more than 100 other events, three
snapshots of the distribution ``rollout/reward`` and an event named like markup.
"""

from __future__ import annotations

from typing import Any

import httpx

PROJECT = "lab"
XSS = "<img src=x onerror=alert(1)>"
DIGESTS = {"dataset": "1" * 64, "cohort": "2" * 64, "verifier": "3" * 64, "settings": "4" * 64}
BOUNDS = [0, 1, 2, 4, 8]
#: ``rollout/reward`` at steps 10, 20, 30; the newest (step 30) is drawn as bars.
HISTOGRAMS = {10: [9, 6, 3, 1, 0, 0], 20: [4, 7, 6, 3, 1, 0], 30: [1, 3, 8, 6, 2, 1]}
#: The current status of base's trial ``q{i:03d}`` in ``val-1``.
BASE_STATUSES = ["success"] * 6 + ["failure"] * 2 + ["infra_error", "unscored"]
HISTORY_TRIAL = "q003"


def base_status(i: int) -> str:
    return BASE_STATUSES[i % 10]


def new_attempt(base: str, admin_key: str, run: str, project: str = PROJECT) -> str:
    """Create the run (if new) and an execution attempt; answer its ingest token."""
    key = {"Authorization": f"Bearer {admin_key}"}
    created = httpx.post(f"{base}/api/v1/projects/{project}/runs", json={"run": run}, headers=key)
    assert created.status_code in (200, 201), created.text
    attempt = httpx.post(f"{base}/api/v1/projects/{project}/runs/{run}/attempts", headers=key)
    assert attempt.status_code == 201, attempt.text
    token: str = attempt.json()["token"]
    return token


def post_observations(base: str, token: str, events: list[dict[str, Any]]) -> None:
    """Send events in batches of at most 32, the protocol's limit."""
    for start in range(0, len(events), 32):
        response = httpx.post(
            f"{base}/api/v1/ingest/observations",
            json={"events": events[start : start + 32]},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert response.status_code == 200, response.text


def population(round_id: str, expected: int) -> dict[str, Any]:
    return {
        "event_id": f"decl-{round_id}",
        "type": "population",
        "round_id": round_id,
        "expected": expected,
        "digests": DIGESTS,
        "task": {"name": "gsm8k", "version": "1.0"},
    }


def trial(
    round_id: str, trial_id: str, status: str, attempt: int = 0, **extra: Any
) -> dict[str, Any]:
    return {
        "event_id": f"{round_id}-{trial_id}-a{attempt}",
        "type": "trial",
        "round_id": round_id,
        "trial_id": trial_id,
        "trial_attempt": attempt,
        "status": status,
        "eligible": False,
        "reward": 1.0 if status == "success" else 0.0 if status == "failure" else None,
        **extra,
    }


def eval_base(base: str, admin_key: str, *, markup: bool = True) -> None:
    token = new_attempt(base, admin_key, "eval-base")
    health = {
        "event_id": "health-5",
        "type": "health",
        "step": 5,
        "fields": {"gpu_mem_gb": 61.5, "queue": 3},
    }
    retries = [
        trial(
            "val-1",
            HISTORY_TRIAL,
            "infra_error",
            0,
            error_type=XSS if markup else "VerifierTimeoutError",
            reason_code="verifier_timeout",
            reason=f"the verifier timed out {XSS}"
            if markup
            else "the verifier timed out after 600 s",
        ),
        trial("val-1", HISTORY_TRIAL, "failure", 1),
    ]
    val_1 = [trial("val-1", f"q{i:03d}", base_status(i)) for i in range(130)]
    # The last attempt of q003 (success) arrives before its older attempts.
    val_1[3] = trial("val-1", HISTORY_TRIAL, "success", 2)
    open_round = [trial("val-open", f"o{i}", "success" if i % 2 else "failure") for i in range(5)]
    full = [
        trial("val-full", f"f{i:02d}", "failure" if i % 4 == 0 else "success") for i in range(20)
    ]
    distributions = [
        {
            "event_id": f"dist-{step}",
            "type": "distribution",
            "name": "rollout/reward",
            "step": step,
            "histogram": {"bounds": BOUNDS, "counts": counts},
        }
        for step, counts in HISTOGRAMS.items()
    ]
    named = (
        [{"event_id": "markup", "type": "event", "name": XSS, "step": 31, "fields": {"note": XSS}}]
        if markup
        else []
    )
    named += [
        {
            "event_id": "done-32",
            "type": "event",
            "name": "rollout/done",
            "step": 32,
            "fields": {"tokens": 512, "env": "math"},
        },
    ]
    post_observations(
        base,
        token,
        [
            health,
            population("val-1", 140),
            *val_1,
            *retries,
            *open_round,
            population("val-full", 20),
            *full,
            *distributions,
            *named,
        ],
    )


def eval_tuned(base: str, admin_key: str) -> None:
    token = new_attempt(base, admin_key, "eval-tuned")
    val_1 = [
        trial("val-1", f"q{i:03d}", "success" if i % 10 < 8 else "failure") for i in range(120)
    ]
    full = [
        trial("val-full", f"f{i:02d}", "failure" if i % 5 == 0 else "success") for i in range(20)
    ]
    post_observations(
        base, token, [population("val-1", 140), *val_1, population("val-full", 20), *full]
    )


def seed_evaluation(base: str, admin_key: str, *, markup: bool = True) -> None:
    eval_base(base, admin_key, markup=markup)
    eval_tuned(base, admin_key)
