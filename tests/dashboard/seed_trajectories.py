"""Runs with trajectories for the trajectory tests and screenshot, sent as a job sends them:
outcomes through ``/api/v1/ingest/observations``, documents through
``/api/v1/ingest/trajectories`` (an attempt's ingest token), early deletion through the
owner's ``DELETE …/trajectories``. The project is private: bodies need the content
permission.

- ``eval-run``, round ``val-t``: ``long`` (attempt 0 an execution error without text,
  attempt 1 a success with 60 messages of tool calls and hostile text), ``cut`` (truncated:
  5 of 40 messages kept), ``samp`` (sampled), ``del`` (deleted early), ``gone`` (no
  trajectory sent); round ``val-none`` declares ``text_samples: 0``, so ``hidden``'s text is
  not retained.
- ``eval-old``: ``old``'s text, sent to a server that keeps bodies for under a second.
- ``train-run``: 24 rollouts at each of steps 10, 20 and 30, every category, policies
  reported or not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.dashboard.seed_eval import XSS, new_attempt, population, post_observations, trial
from tuneplane.server import admin
from tuneplane.server.settings import Settings

PROJECT = "agents"
STEPS = (10, 20, 30)
PER_STEP = 24
LONG_MESSAGES = 60


def post_trajectories(base: str, token: str, documents: list[dict[str, Any]]) -> None:
    """Send documents in batches of at most 16, the protocol's limit."""
    for start in range(0, len(documents), 16):
        response = httpx.post(
            f"{base}/api/v1/ingest/trajectories",
            json={"trajectories": documents[start : start + 16]},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert response.status_code == 200, response.text


def conversation(count: int, *, markup: bool = True) -> list[dict[str, Any]]:
    """A question, tool calls with their results (with ``markup``, the question, arguments
    and output carry text that looks like HTML), an answer: ``count`` messages, ``count``
    even."""
    question = f"Question {XSS}" if markup else "What is 17 * 3? Check it with Python."
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    for k in range((count - 2) // 2):
        arguments = {"code": f"print({k})", "note": XSS} if markup else {"code": f"print({k})"}
        call = {"id": f"c{k}", "name": "python", "arguments": arguments}
        messages.append(
            {
                "role": "assistant",
                "content": f"step {k}",
                "tool_calls": [call],
                "tokens": {"input": 100 + k, "output": 10 + k},
                "ms": 250 + k,
            }
        )
        messages.append(
            {
                "role": "tool",
                "tool_call_id": f"c{k}",
                "tool_name": "python",
                "content": f"out-{k} {XSS}" if markup else str(k),
            }
        )
    messages.append({"role": "assistant", "content": "The answer is 51."})
    return messages


def evaluation(
    round_id: str, trial_id: str, attempt: int, messages: list[Any], **extra: Any
) -> dict[str, Any]:
    return {
        "scope": "evaluation",
        "round_id": round_id,
        "trial_id": trial_id,
        "trial_attempt": attempt,
        "messages": messages,
        "total_messages": len(messages),
        "complete": True,
        "capture_policy": "all",
        **extra,
    }


def seed_eval_run(base: str, admin_key: str, run: str = "eval-run", *, markup: bool = True) -> str:
    """The trial attempts of ``eval-run``; answers its ingest token."""
    token = new_attempt(base, admin_key, run, PROJECT)
    outcomes = [
        population("val-t", 6),
        {**population("val-none", 2), "event_id": "decl-val-none", "text_samples": 0},
        trial("val-t", "long", "infra_error", 0),
        trial("val-t", "long", "success", 1),
        *(trial("val-t", name, "success") for name in ("cut", "samp", "del", "gone")),
        trial("val-none", "hidden", "success"),
    ]
    post_observations(base, token, outcomes)
    short = conversation(4, markup=markup)
    post_trajectories(
        base,
        token,
        [
            evaluation("val-t", "long", 1, conversation(LONG_MESSAGES, markup=markup)),
            {
                **evaluation("val-t", "cut", 0, conversation(6, markup=markup)[:5]),
                "total_messages": 40,
                "complete": False,
            },
            # As an import sends it: every message kept, yet not declared complete.
            {
                **evaluation("val-t", "samp", 0, short),
                "capture_policy": "sampled",
                "complete": False,
            },
            evaluation("val-t", "del", 0, short),
            evaluation("val-none", "hidden", 0, short),
        ],
    )
    deleted = httpx.delete(
        f"{base}/api/v1/projects/{PROJECT}/runs/{run}/trajectories",
        params={"trial_id": "del"},
        headers={"Authorization": f"Bearer {admin_key}"},
    )
    assert deleted.json()["deleted"] == 1, deleted.text
    return token


def seed_expiring(base: str, admin_key: str) -> None:
    """``eval-old``, to be sent to a server keeping bodies for less than a second."""
    token = new_attempt(base, admin_key, "eval-old", PROJECT)
    post_observations(base, token, [population("val-o", 1), trial("val-o", "old", "success")])
    post_trajectories(base, token, [evaluation("val-o", "old", 0, conversation(4))])


def rollout(step: int, i: int, *, markup: bool = True) -> dict[str, Any]:
    kind = i % 6
    diagnostic = {0: "failure", 1: "anomaly", 2: "low_reward", 3: None}.get(kind, "representative")
    reward: float | None = {0: 0.0, 2: 0.05, 3: None}.get(kind, 0.8)
    document: dict[str, Any] = {
        "scope": "training",
        "step": step,
        "trajectory_id": f"s{step}-r{i:02d}",
        "diagnostic": diagnostic,
        "reward": reward,
        # Half the invalid ones were NaN (reward_invalid), half never had a reward.
        "reward_invalid": kind == 3 and i % 12 == 3,
        "collection_policy": f"v{step - 2}" if i % 2 == 0 else None,
        "consumption_policy": step if i % 3 == 0 else None,
        "messages": [
            {
                "role": "user",
                "content": f"rollout {i} {XSS}" if markup else f"Problem {i}: give the answer.",
            },
            {"role": "assistant", "content": "answer", "tokens": {"input": 8, "output": 3}},
        ],
        "total_messages": 2,
        "complete": True,
        "capture_policy": "sampled",
    }
    if kind == 2 and i % 12 == 8:  # one reward function gave none: the others' sum
        document["reward_missing"] = ["format"]
    return document


def seed_train_run(
    base: str, admin_key: str, run: str = "train-run", *, markup: bool = True
) -> str:
    token = new_attempt(base, admin_key, run, PROJECT)
    rollouts = [rollout(step, i, markup=markup) for step in STEPS for i in range(PER_STEP)]
    post_trajectories(base, token, rollouts)
    return token


def seed_for_screenshots(base: str, data_dir: Path, login: str, password: str) -> None:
    """``eval-run`` and ``train-run`` in the private project, ``login`` its owner with the
    content permission (bodies are shown to such members only)."""
    admin_key = (data_dir / "admin.key").read_text().strip()
    key = {"Authorization": f"Bearer {admin_key}"}
    admin.add_user(Settings.from_env({}, data_dir=str(data_dir)), login, password, admin=False)
    seed_eval_run(base, admin_key, markup=False)
    project = f"{base}/api/v1/projects/{PROJECT}"
    member = httpx.put(
        f"{project}/members/{login}", json={"role": "owner", "content": True}, headers=key
    )
    assert member.is_success, member.text
    private = httpx.patch(f"{project}/access", json={"visibility": "private"}, headers=key)
    assert private.is_success, private.text
    seed_train_run(base, admin_key, markup=False)
