"""Runs for the dashboard tests and screenshots, sent through the public API only: Arena
batches to ``POST /ingest`` and the run protocol (an API key, an attempt token) for SDK runs
with status, heartbeat, NaN/inf steps and log lines, and for evaluation outcomes and events
(``seed_eval``)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.dashboard.seed_eval import seed_evaluation
from tests.helpers import alert, log

SECRET = "dashboard-secret"
# The seeded projects are public, so the pages are read without signing in (the sign-in
# tests make private ones of their own).
ENV = {"TUNEPLANE_INGEST_SECRET": SECRET, "TUNEPLANE_DEFAULT_VISIBILITY": "public"}
PROJECT = "burtenshaw"
SDK_PROJECT = "lab"
XSS = "<img src=x onerror=alert(1)>"
ARENA_CONFIG = {
    "participant": "burtenshaw",
    "submission_id": "sub-0042",
    "model": "Qwen/Qwen2.5-0.5B-Instruct",
    "recipe": "grpo",
    "num_updates": 300,
}


@dataclass(frozen=True)
class Seeded:
    base: str
    admin_key: str
    #: the ingest token of the SDK run ``lab/sdk-run``
    token: str


def curve(run_seed: int, step: int) -> dict[str, float]:
    """Plausible RL curves: reward rising, loss falling, step time noisy."""
    noise = math.sin(step * 12.9898 + run_seed * 78.233) * 0.5
    reward = 1 - math.exp(-step / (80 + 20 * run_seed)) + 0.08 * noise
    return {
        "reward": round(reward, 5),
        "loss": round(2.2 * math.exp(-step / 120) + 0.05 + 0.04 * noise, 5),
        "arena/step_seconds": round(1.2 + 0.3 * abs(noise) + 0.2 * run_seed, 4),
        "train/kl": round(0.02 * math.log1p(step) + 0.004 * noise, 5),
        "train/entropy": round(1.5 * math.exp(-step / 400) + 0.02 * noise, 5),
        "eval/accuracy": round(min(0.95, 0.3 + step / 500 + 0.02 * noise), 5),
    }


def post_ingest(base: str, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(
        base + "/ingest", json=body, headers={"Authorization": f"Bearer {SECRET}"}, timeout=30
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def arena_run(base: str, run: str, run_seed: int, steps: int, *, project: str = PROJECT) -> None:
    for first in range(0, steps, 100):
        logs = [
            log(f"e{step}", step, curve(run_seed, step), project=project, run=run)
            for step in range(first, min(first + 100, steps))
        ]
        if first == 0:
            logs[0]["config"] = {**ARENA_CONFIG, "submission_id": f"sub-{run_seed:04d}"}
        post_ingest(base, {"logs": logs})


def arena_alerts(base: str, run: str, *, markup: bool = True) -> None:
    """The run's alerts; with ``markup``, one whose title and text look like HTML."""
    alerts = [
        alert(
            "reward-plateau-120",
            "Reward plateaued",
            level="info",
            run=run,
            step=120,
            text="Mean reward changed by less than 1% over 40 updates.",
        ),
        alert(
            "slow-step-180",
            "Step time above 2 s",
            level="warn",
            run=run,
            step=180,
            text="The sandbox pool is saturated; steps are queuing.",
        ),
        alert(
            "sandbox-cleanup-239",
            "Sandbox cleanup timed out",
            level="error",
            run=run,
            step=239,
            text="Training ended after 239 updates. Evaluation will use the last checkpoint.",
        ),
    ]
    if markup:
        alerts.append(
            alert(
                "xss-title",
                XSS,
                level="warn",
                run=run,
                step=10,
                text='<script>alert("text")</script> stays text',
            )
        )
    for one in alerts:
        # One alert per request: received_at orders them, newest first on the reports page.
        post_ingest(base, {"alerts": [one]})
        time.sleep(0.01)


def sdk_run(base: str, admin_key: str, *, markup: bool = True) -> str:
    """``lab/sdk-run``: created with the API key, scalars with NaN/inf steps, status,
    heartbeat and log lines through its attempt token (with ``markup``, a config value and
    a line that look like HTML). Answers the token."""
    note = XSS if markup else "lr sweep 2 of 4"
    token = start_sdk_run(base, admin_key, "sdk-run", {"lr": 1e-5, "batch_size": 64, "note": note})
    auth = {"Authorization": f"Bearer {token}"}
    steps = list(range(0, 400))
    body = {
        "series": [
            {
                "name": "train/loss",
                "steps": steps,
                "values": [2 * math.exp(-s / 90) for s in steps],
            },
            {"name": "train/reward", "steps": steps, "values": [math.tanh(s / 150) for s in steps]},
        ],
        "invalid": [
            {"name": "train/loss", "steps": [400, 401, 402], "kinds": ["nan", "inf", "-inf"]}
        ],
    }
    answer = httpx.post(f"{base}/api/v1/ingest/scalars", json=body, headers=auth)
    assert answer.status_code == 200, answer.text
    for path, payload in (
        ("status", {"status": "running"}),
        (
            "heartbeat",
            {
                "queued": 800,
                "sent": 800,
                "dropped": 0,
                "failed_sends": 0,
                "queue_size": 0,
                "queue_capacity": 100000,
                "interval": 10.0,
            },
        ),
    ):
        response = httpx.post(f"{base}/api/v1/ingest/{path}", json=payload, headers=auth)
        assert response.status_code == 200, response.text
    third = XSS if markup else "step 2 loss 1.978"
    post_logs(base, token, 0, ["loading model Qwen2.5-0.5B", "step 1 loss 2.000", third])
    post_logs(base, token, 3, ["CUDA warning: falling back to eager attention"], stream="stderr")
    return token


def start_sdk_run(base: str, admin_key: str, run: str, config: Any = None) -> str:
    """Create a run of ``lab`` with the API key and start an attempt: its ingest token."""
    key = {"Authorization": f"Bearer {admin_key}"}
    created = httpx.post(
        f"{base}/api/v1/projects/{SDK_PROJECT}/runs",
        json={"run": run, "config": config},
        headers=key,
    )
    assert created.status_code in (200, 201), created.text
    attempt = httpx.post(
        f"{base}/api/v1/projects/{SDK_PROJECT}/runs/{run}/attempts", json={}, headers=key
    )
    assert attempt.status_code == 201, attempt.text
    token: str = attempt.json()["token"]
    return token


def post_scalars(base: str, token: str, body: dict[str, Any]) -> None:
    answer = httpx.post(
        f"{base}/api/v1/ingest/scalars", json=body, headers={"Authorization": f"Bearer {token}"}
    )
    assert answer.status_code == 200, answer.text


def post_logs(
    base: str, token: str, first_seq: int, texts: list[str], stream: str = "stdout"
) -> None:
    lines = [
        {"seq": first_seq + i, "stream": stream, "time": time.time(), "text": text}
        for i, text in enumerate(texts)
    ]
    response = httpx.post(
        f"{base}/api/v1/ingest/logs",
        json={"lines": lines},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, response.text


def seed(base: str, data_dir: Path, *, markup: bool = True) -> Seeded:
    """The runs every dashboard test reads. Without ``markup`` (the screenshots), no text
    that looks like HTML, which the tests use to check user text stays text."""
    admin_key = (data_dir / "admin.key").read_text().strip()
    arena_run(base, "grpo-qwen-7", 0, 300)
    arena_run(base, "grpo-qwen-8", 1, 240)
    arena_alerts(base, "grpo-qwen-7", markup=markup)
    post_ingest(
        base,
        {
            "alerts": [
                alert(
                    "setup-failed",
                    "Sandbox image pull failed",
                    run="alert-only",
                    text="No training step ran.",
                )
            ]
        },
    )
    token = sdk_run(base, admin_key, markup=markup)
    # The Logs tab is read without signing in: the SDK project shows its logs to everyone.
    shown = httpx.patch(
        f"{base}/api/v1/projects/{SDK_PROJECT}/access",
        json={"public_logs": True},
        headers={"Authorization": f"Bearer {admin_key}"},
    )
    assert shown.status_code == 200, shown.text
    seed_evaluation(base, admin_key, markup=markup)
    return Seeded(base=base, admin_key=admin_key, token=token)
