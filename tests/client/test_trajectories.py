"""``trajectory()`` from the SDK: to a real ``tuneplane serve`` on SQLite and PostgreSQL
(documents arrive once and read back as sent, retention caps agree with the server's,
a conflict is dropped and counted, the heartbeat carries the counters), and against a
simulated world for what needs no server (batches, the bounded queue, per-step samples,
refused input, the explicit truncation helper, the module-level function in a process)."""

from __future__ import annotations

import copy
import logging
import math
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import orjson
import pytest
import torch

import tuneplane
from tests.client.runs import PROJECT, Server
from tests.client.test_default_reporter import job_env, run_script
from tests.client.world import (
    Fate,
    Recorder,
    Request,
    accept_all,
    dead_url,
    proxy,
    recording_server,
)
from tuneplane import Reporter
from tuneplane.client.transport import RetryPolicy
from tuneplane.contract.limits import (
    INGEST_BODY_MAX_BYTES,
    ROLLOUT_SAMPLES_PER_STEP,
    TRAJECTORY_BATCH_MAX,
    TRAJECTORY_MAX_MESSAGES,
)
from tuneplane.contract.trajectories import may_be_selected, parse_trajectories, selection_rank

FAST = RetryPolicy(attempts=4, first_delay=0.01, max_delay=0.05)
#: Retries that outlast any test: the first batch stays in flight.
FOREVER = RetryPolicy(attempts=1000, first_delay=1.0, max_delay=1.0)
CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "What is 17 * 3?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "name": "python", "arguments": {"code": "17 * 3"}}],
        "tokens": {"input": 12, "output": 9, "cached": 4},
        "ms": 420,
    },
    {"role": "tool", "tool_call_id": "c1", "tool_name": "python", "content": "51"},
    {"role": "assistant", "content": "51", "reasoning": "the tool said so"},
]


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- the simulated world ---------------------------------------------------------------------


def accept_trajectories(request: Request) -> tuple[int, Any]:
    if request.path.endswith("/trajectories"):
        parse_trajectories(request.body)  # what our server would refuse fails the test
        return 200, {"new": len(request.body["trajectories"]), "duplicate": 0, "not_retained": 0}
    if request.path.endswith("/observations"):
        return 200, {"new": len(request.body["events"]), "duplicate": 0}
    return accept_all(request)


@pytest.fixture
def world() -> Iterator[tuple[str, Recorder]]:
    with recording_server(Recorder(answer=accept_trajectories)) as found:
        yield found


def reporter(
    url: str,
    *,
    run: str = "demo/grpo-7",
    token: str = "tpi_secret",  # noqa: S107 (the simulated server takes any)
    **options: Any,
) -> Reporter:
    settings: dict[str, Any] = {"flush_interval": 0.02, "retry": FAST, "status_retry": FAST}
    return Reporter(url, run, token, attempt=1, **{**settings, **options})


def sent(recorder: Recorder) -> list[dict[str, Any]]:
    return [d for r in recorder.to("/trajectories") for d in r.body["trajectories"]]


def rollout(step: int, n: int, **fields: Any) -> dict[str, Any]:
    return {"scope": "training", "step": step, "trajectory_id": f"r{n}", "messages": CHAT, **fields}


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_documents_arrive_once_in_batches_of_16_within_the_body_limit(
    world: tuple[str, Recorder],
) -> None:
    url, recorder = world
    text = "x" * 700_000  # five of these pass the body limit of 4 MiB
    with reporter(url) as r:
        for i in range(40):
            content = text if i % 8 == 0 else f"answer {i}"
            messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": content}]
            assert r.trajectory(
                scope="evaluation", round_id="val", trial_id=f"t{i}", messages=messages
            )
        assert r.flush(10)
        health = r.health()
    requests = recorder.to("/ingest/trajectories")
    assert all(1 <= len(q.body["trajectories"]) <= TRAJECTORY_BATCH_MAX for q in requests)
    assert all(len(orjson.dumps(q.body)) <= INGEST_BODY_MAX_BYTES for q in requests)
    assert [d["trial_id"] for d in sent(recorder)] == [f"t{i}" for i in range(40)]
    assert (health.trajectories_queued, health.trajectories_sent) == (40, 40)
    assert (health.trajectories_dropped, health.trajectories_queue_size) == (0, 0)
    assert health.trajectories_queue_capacity == 256


def test_the_document_is_the_wire_contract_and_a_copy(world: tuple[str, Recorder]) -> None:
    url, recorder = world
    messages = copy.deepcopy(CHAT)
    with reporter(url) as r:
        assert r.trajectory(
            scope="evaluation",
            round_id="val",
            trial_id="q17",
            trial_attempt=np.int64(2),  # a NumPy integer is read as an int
            messages=messages,
            capture_policy="sampled",
        )
        messages[1]["content"] = "changed after the call"
        messages[2]["tool_calls"][0]["name"] = "changed too"
        messages.append({"role": "user", "content": "and a message more"})
        assert r.flush(10)
    [document] = sent(recorder)
    assert document == {
        "scope": "evaluation",
        "round_id": "val",
        "trial_id": "q17",
        "trial_attempt": 2,
        "capture_policy": "sampled",
        "messages": CHAT,
        "total_messages": 5,
        "complete": True,
    }


def test_timestamps_models_and_the_producers_totals_are_sent(
    world: tuple[str, Recorder],
) -> None:
    url, recorder = world
    stamped = [
        {"role": "user", "content": "q", "timestamp": "2025-11-19T22:54:26.919Z"},
        {
            "role": "assistant",
            "content": "a",
            "model": "gpt-4o",
            "timestamp": "2025-11-19T22:54:30",
        },
    ]
    totals = {"input": 982, "output": 145, "cached": 0, "cost_usd": 0.0039}
    with reporter(url) as r:
        assert r.trajectory(
            scope="evaluation", round_id="val", trial_id="q1", messages=stamped, metrics=totals
        )
        # Totals that break a rule are refused, never raised.
        assert not r.trajectory(
            scope="evaluation", round_id="val", trial_id="q2", messages=stamped, metrics=[1]
        )
        assert r.flush(10)
    [document] = sent(recorder)
    assert (document["messages"], document["metrics"]) == (stamped, totals)


@pytest.mark.parametrize(
    "reward",
    [math.nan, -math.inf, np.float32("nan"), torch.tensor(float("inf")), np.float64("nan")],
    ids=["nan", "-inf", "numpy-nan", "torch-inf", "numpy64-nan"],
)
def test_a_reward_that_is_not_finite_is_sent_as_invalid(
    world: tuple[str, Recorder], reward: object
) -> None:
    url, recorder = world
    with reporter(url) as r:
        assert r.trajectory(**rollout(1, 0, reward=reward, diagnostic="representative"))
        assert r.trajectory(**rollout(1, 1, reward=torch.tensor(0.25)))
        assert r.flush(10)
    invalid, finite = sorted(sent(recorder), key=lambda d: d["trajectory_id"])
    assert (invalid["reward"], invalid["reward_invalid"]) == (None, True)
    assert (finite["reward"], "reward_invalid" in finite) == (0.25, False)


@pytest.mark.parametrize(
    ("call", "logged"),
    [
        ({"scope": "eval", "messages": CHAT}, "trajectory.scope: must be one of evaluation"),
        ({"scope": "evaluation", "messages": CHAT}, "trajectory.round_id: required"),
        ({**rollout(1, 0), "messages": [{"role": "robot", "content": ""}]}, ".role: must be"),
        ({**rollout(1, 0), "messages": None}, "trajectory.messages: must be a list"),
        ({**rollout(1, 0), "messages": "hello"}, "trajectory.messages: must be a list"),
        ({**rollout(1, 0), "diagnostic": "low_reward"}, "low_reward needs the finite reward"),
        ({**rollout(1, 0), "reward": "high"}, "trajectory.reward: must be a finite number"),
        ({**rollout(1, 0), "total_messages": 2}, "total_messages: must be an integer of at"),
        ({**rollout(1, 0), "complete": True, "total_messages": 9}, "trajectory.complete: true"),
        (
            {**rollout(1, 0), "messages": [{"role": "user", "content": "", "ms": object()}]},
            "cannot be sent as JSON",
        ),
        (
            {**rollout(1, 0), "messages": [{"role": "user", "content": torch.ones(2)}]},
            "cannot be sent as JSON",
        ),
        ({**rollout(1, 0), "step": -1}, "trajectory.step: required for a training rollout"),
        ({**rollout(1, 0), "round_id": "val"}, "is an evaluation trajectory's field"),
    ],
)
def test_bad_input_is_refused_counted_and_logged_once(
    world: tuple[str, Recorder],
    caplog: pytest.LogCaptureFixture,
    call: dict[str, Any],
    logged: str,
) -> None:
    url, recorder = world
    with reporter(url) as r:
        assert r.trajectory(**call) is False
        assert r.trajectory(**call) is False
        assert r.flush(5)
        health = r.health()
    assert (health.trajectories_dropped, health.trajectories_queued) == (2, 0)
    assert health.trajectories_dropped_by_reason == {"invalid input": 2}
    [line] = [w for w in warnings(caplog) if "refused" in w]
    assert logged in line, line
    assert sent(recorder) == []


def test_a_long_conversation_is_refused_never_cut_silently(
    world: tuple[str, Recorder], caplog: pytest.LogCaptureFixture
) -> None:
    url, recorder = world
    long = [{"role": "user", "content": f"turn {i}"} for i in range(TRAJECTORY_MAX_MESSAGES + 1)]
    large = [
        {"role": "user", "content": "y" * 600_000},
        {"role": "assistant", "content": "z" * 600_000},
    ]
    with reporter(url) as r:
        assert r.trajectory(**rollout(1, 0, messages=long)) is False
        assert r.trajectory(**rollout(1, 1, messages=large)) is False
        kept = tuneplane.truncate_messages(long)
        assert (len(kept.messages), kept.total_messages, kept.complete) == (1024, 1025, False)
        assert r.trajectory(scope="training", step=1, trajectory_id="r2", **kept._asdict())
        small = tuneplane.truncate_messages(large, max_bytes=700_000)
        assert (len(small.messages), small.total_messages, small.complete) == (1, 2, False)
        assert r.trajectory(scope="training", step=1, trajectory_id="r3", **small._asdict())
        assert r.flush(10)
        health = r.health()
    lines = [w for w in warnings(caplog) if "refused" in w]
    assert len(lines) == 2
    assert all("tuneplane.truncate_messages(messages)" in line for line in lines)
    assert "1025 messages, more than 1024" in lines[0]
    assert "more than 1024 KiB" in lines[1]
    assert health.trajectories_dropped_by_reason == {"invalid input": 2}
    documents = {d["trajectory_id"]: d for d in sent(recorder)}
    assert set(documents) == {"r2", "r3"}
    assert (documents["r2"]["total_messages"], documents["r2"]["complete"]) == (1025, False)
    assert documents["r2"]["messages"] == long[:1024]
    assert (documents["r3"]["total_messages"], documents["r3"]["complete"]) == (2, False)


def test_truncate_messages_refuses_limits_it_cannot_keep() -> None:
    for bad in ({"max_messages": 0}, {"max_messages": 1025}, {"max_bytes": 0}):
        with pytest.raises(ValueError, match="must be"):
            tuneplane.truncate_messages(CHAT, **bad)
    assert tuneplane.truncate_messages(CHAT) == (CHAT, 5, True)
    assert tuneplane.truncate_messages(CHAT, max_messages=2) == (CHAT[:2], 5, False)


def test_a_full_queue_drops_documents_counted_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    r = reporter(dead_url(), retry=FOREVER)
    started = time.perf_counter()
    answers = [
        r.trajectory(scope="evaluation", round_id="val", trial_id=f"t{i}", messages=CHAT)
        for i in range(300)
    ]
    assert time.perf_counter() - started < 2.0
    assert answers == [True] * 256 + [False] * 44
    health = r.health()
    assert (health.trajectories_queued, health.trajectories_queue_size) == (256, 256)
    assert health.trajectories_dropped_by_reason == {"queue full": 44}
    [line] = [w for w in warnings(caplog) if "dropped" in w]
    assert "queue full" in line
    assert "256 documents or 64 MiB" in line
    final = r.close(timeout=0.2)
    assert final.trajectories_sent == 0
    assert final.trajectories_dropped == 300
    summary = final.loss_summary()
    assert summary is not None
    assert "tuneplane: 0 of 300 trajectories delivered (300 dropped: " in summary


def test_the_queue_is_bounded_in_bytes_too() -> None:
    r = reporter(dead_url(), retry=FOREVER, trajectory_queue_bytes=100_000)
    big = [{"role": "user", "content": "b" * 30_000}]
    answers = [r.trajectory(**rollout(1, i, messages=big)) for i in range(5)]
    assert answers == [True, True, True, False, False]
    assert r.health().trajectories_dropped_by_reason == {"queue full": 2}
    r.close(timeout=0.2)


def categories(documents: list[dict[str, Any]]) -> Counter[str]:
    return Counter(d["trajectory_id"].split("-")[0] for d in documents)


def step_of_rollouts(r: Reporter, step: int, counts: dict[str, int]) -> None:
    """``counts`` rollouts of each diagnostic at ``step``, interleaved as they might come."""
    given = {"failure": {"diagnostic": "failure"}, "low": {"diagnostic": "low_reward"}}
    given |= {"nan": {"reward": math.nan}, "plain": {"reward": 1.0}}
    for i in range(max(counts.values())):
        for name, n in counts.items():
            if i < n:
                fields = {"reward": 0.01, **given[name]} if name == "low" else given[name]
                assert r.trajectory(
                    scope="training",
                    step=step,
                    trajectory_id=f"{name}-{i}",
                    messages=CHAT,
                    **fields,
                )


def test_a_step_keeps_a_stratified_sample_once_a_higher_step_arrives(
    world: tuple[str, Recorder],
) -> None:
    url, recorder = world
    with reporter(url) as r:
        step_of_rollouts(r, 1, {"failure": 10, "low": 5, "nan": 3, "plain": 40})
        time.sleep(0.3)
        assert sent(recorder) == []  # step 1 may still grow
        assert r.trajectory(**rollout(2, 0))
        recorder.wait_for(lambda: len(sent(recorder)) == ROLLOUT_SAMPLES_PER_STEP)
        assert r.health().trajectories_not_uploaded == 58 - ROLLOUT_SAMPLES_PER_STEP
        assert r.flush(10)  # step 2 goes at the flush
        health = r.health()
    first = [d for d in sent(recorder) if d["step"] == 1]
    assert categories(first) == {"failure": 10, "low": 5, "nan": 3, "plain": 14}
    # Within a category, the first ones to come.
    assert [d["trajectory_id"] for d in first if d["trajectory_id"].startswith("plain")] == [
        f"plain-{i}" for i in range(14)
    ]
    assert [d["step"] for d in sent(recorder)].count(2) == 1
    assert health.trajectories_queued == 59
    assert (health.trajectories_sent, health.trajectories_not_uploaded) == (33, 26)
    assert (health.trajectories_dropped, health.trajectories_queue_size) == (0, 0)


def test_a_step_that_waits_is_sent_without_a_flush(world: tuple[str, Recorder]) -> None:
    url, recorder = world
    with reporter(url) as r:
        for i in range(3):
            assert r.trajectory(**rollout(7, i))
        started = time.monotonic()
        recorder.wait_for(lambda: len(sent(recorder)) == 3, timeout=10)
        waited = time.monotonic() - started
    assert 1.5 <= waited <= 5.0


def test_a_late_rollout_gets_only_what_is_left_of_its_steps_cap(
    world: tuple[str, Recorder],
) -> None:
    url, recorder = world
    with reporter(url) as r:
        for i in range(30):
            assert r.trajectory(**rollout(1, i))
        assert r.trajectory(**rollout(2, 0))
        recorder.wait_for(lambda: len(sent(recorder)) == 30)
        for i in range(30, 40):
            assert r.trajectory(**rollout(1, i))  # asynchronous RL: step 1 again
        assert r.flush(10)
        health = r.health()
    per_step = Counter(d["step"] for d in sent(recorder))
    assert per_step == {1: ROLLOUT_SAMPLES_PER_STEP, 2: 1}
    assert health.trajectories_not_uploaded == 8


@pytest.mark.parametrize(("cap", "expected"), [("4", 4), ("0", 0)])
def test_the_rollout_cap_setting_lowers_or_disables_it(
    world: tuple[str, Recorder], cap: str, expected: int
) -> None:
    url, recorder = world
    env = {**job_env(url), "TUNEPLANE_JOB_ROLLOUT_UPLOAD_SAMPLES": cap}
    with Reporter.from_env(env, flush_interval=0.02, retry=FAST) as r:
        step_of_rollouts(r, 3, {"failure": 3, "plain": 5})
        assert r.flush(10)
        health = r.health()
    documents = sent(recorder)
    assert len(documents) == expected
    if expected:
        assert categories(documents) == {"failure": 2, "plain": 2}
    assert (health.trajectories_sent, health.trajectories_not_uploaded) == (expected, 8 - expected)
    assert health.trajectories_dropped == 0


def evaluation_round(r: Reporter, round_id: str, trials: list[str]) -> None:
    for trial in trials:
        assert r.trajectory(scope="evaluation", round_id=round_id, trial_id=trial, messages=CHAT)


def test_a_large_declared_round_uploads_only_trials_the_server_may_keep(
    world: tuple[str, Recorder],
) -> None:
    url, recorder = world
    trials = [f"q{i}" for i in range(2000)]
    with reporter(url, trajectory_queue_capacity=len(trials)) as r:
        assert r.declare_population("val-big", len(trials))
        evaluation_round(r, "val-big", trials)
        evaluation_round(r, "val-undeclared", trials[:300])  # another process declared it?
        assert r.flush(10)
        health = r.health()
    uploaded = [d["trial_id"] for d in sent(recorder) if d["round_id"] == "val-big"]
    assert uploaded == [t for t in trials if may_be_selected(t, 32, len(trials))]
    # The 32 the server keeps (those of lowest rank) are among them, far fewer than all.
    assert set(sorted(trials, key=selection_rank)[:32]) <= set(uploaded)
    assert 32 <= len(uploaded) <= 300
    assert len([d for d in sent(recorder) if d["round_id"] == "val-undeclared"]) == 300
    assert health.trajectories_not_uploaded == len(trials) - len(uploaded)
    assert health.trajectories_sent == len(uploaded) + 300
    assert health.trajectories_dropped == 0
    [population] = [e for q in recorder.to("/observations") for e in q.body["events"]]
    assert "text_samples" not in population  # the default rule: nothing declared


@pytest.mark.parametrize("samples", ["0", "5"])
def test_the_evaluation_cap_setting_is_declared_and_applied(
    world: tuple[str, Recorder], samples: str
) -> None:
    url, recorder = world
    trials = [f"q{i}" for i in range(1000)]
    env = {**job_env(url), "TUNEPLANE_JOB_VAL_UPLOAD_SAMPLES": samples}
    with Reporter.from_env(env, flush_interval=0.02, retry=FAST) as r:
        assert r.declare_population("val", len(trials))
        evaluation_round(r, "val", trials)
        assert r.flush(10)
        health = r.health()
    [population] = [e for q in recorder.to("/observations") for e in q.body["events"]]
    assert population["text_samples"] == int(samples)
    got = [d["trial_id"] for d in sent(recorder)]
    cap = int(samples)
    assert got == [t for t in trials if may_be_selected(t, cap, len(trials))]
    assert set(sorted(trials, key=selection_rank)[:cap]) <= set(got)
    assert len(got) < 100
    assert (cap == 0) == (got == [])
    assert health.trajectories_not_uploaded == len(trials) - len(got)


def test_a_refused_batch_is_dropped_counted_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def conflict(request: Request) -> tuple[int, Any]:
        if request.path.endswith("/trajectories"):
            error = {"status": 409, "code": "trajectory_conflict", "message": "already stored"}
            return 409, {"error": error}
        return accept_all(request)

    with recording_server(Recorder(answer=conflict)) as (url, recorder), reporter(url) as r:
        evaluation_round(r, "val", ["a", "b"])
        assert r.flush(10)
        evaluation_round(r, "val", ["c"])
        assert r.flush(10)
        health = r.health()
    # A 409 is not retried: each document was posted once.
    assert len(sent(recorder)) == 3
    assert health.trajectories_dropped_by_reason == {
        "rejected by server (409 trajectory_conflict)": 3
    }
    [line] = [w for w in warnings(caplog) if "409" in w]
    assert line == (
        "tuneplane: trajectories dropped (rejected by server (409 trajectory_conflict)): "
        "already stored"
    )


def test_the_heartbeat_carries_the_trajectory_counters(world: tuple[str, Recorder]) -> None:
    url, recorder = world
    with reporter(url) as r:
        assert r.trajectory(**rollout(1, 0))
        assert not r.trajectory(scope="training", messages=CHAT)
        assert r.flush(10)
    last = recorder.to("/heartbeat")[-1].body
    assert {k: v for k, v in last.items() if k.startswith("trajectories_")} == {
        "trajectories_queued": 1,
        "trajectories_sent": 1,
        "trajectories_dropped": 1,
        "trajectories_queue_size": 0,
        "trajectories_queue_capacity": 256,
        "trajectories_not_uploaded": 0,
    }


MODULE_LEVEL = """
import tuneplane
chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
print(tuneplane.trajectory(scope="training", step=4, trajectory_id="r1", messages=chat))
print(tuneplane.trajectory(scope="training", step=4, trajectory_id="r2", messages="no"))
print("trained", flush=True)
"""


def test_the_module_level_function_in_a_training_process(world: tuple[str, Recorder]) -> None:
    url, recorder = world
    done = run_script(job_env(url), MODULE_LEVEL)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True\nFalse\ntrained\n"
    # The step's sample goes at exit; the refused one is summed up on stderr.
    assert [d["trajectory_id"] for d in sent(recorder)] == ["r1"]
    assert "tuneplane: 1 of 2 trajectories delivered (1 dropped: invalid input)" in done.stderr
    without = run_script({}, MODULE_LEVEL)
    assert without.stdout == "False\nFalse\ntrained\n"


# -- the real server -------------------------------------------------------------------------


@contextmanager
def reporting(
    server: Server, run: str, url: str | None = None, **options: Any
) -> Iterator[Reporter]:
    token = server.start_attempt(run)
    with reporter(url or server.base, token=token, run=f"{PROJECT}/{run}", **options) as r:
        yield r


def index(server: Server, run: str, **filters: Any) -> list[dict[str, Any]]:
    page = server.get(f"/api/v1/projects/{PROJECT}/runs/{run}/trajectories", limit=500, **filters)
    rows: list[dict[str, Any]] = page["items"]
    return rows


def messages_of(server: Server, run: str, row: dict[str, Any]) -> list[dict[str, Any]]:
    read = server.get(f"/api/v1/projects/{PROJECT}/runs/{run}/trajectories/{row['id']}")
    found: list[dict[str, Any]] = read["messages"]
    return found


def test_trajectories_arrive_once_and_read_back_as_sent(server: Server) -> None:
    run = fresh("trajectories")
    lost: list[bytes] = []

    def lose_the_first_answer(request: bytes) -> Fate:
        if b"/ingest/trajectories" in request and not lost:
            lost.append(request)
            return "lose"  # stored by the server; the SDK never hears it and sends again
        return "pass"

    with proxy(server.base, lose_the_first_answer) as url, reporting(server, run, url) as r:
        evaluation_round(r, "val-1", ["q1", "q2", "q3"])
        assert r.trajectory(
            **rollout(5, 0, reward=math.nan, collection_policy=118, consumption_policy="v120")
        )
        assert r.trajectory(**rollout(5, 1, diagnostic="low_reward", reward=np.float32(0.125)))
        assert r.flush(20)
        health = r.health()
    assert lost
    assert (health.trajectories_sent, health.trajectories_dropped) == (5, 0)
    rows = index(server, run)
    assert len(rows) == 5
    assert {(row["round_id"], row["trial_id"]) for row in rows if row["scope"] == "evaluation"} == {
        ("val-1", "q1"),
        ("val-1", "q2"),
        ("val-1", "q3"),
    }
    training = {row["trajectory_id"]: row for row in rows if row["scope"] == "training"}
    nan, low = training["r0"], training["r1"]
    assert (nan["reward"], nan["reward_invalid"], nan["category"]) == (None, True, "invalid_reward")
    assert (nan["collection_policy"], nan["consumption_policy"]) == ("118", "v120")
    assert (low["reward"], low["category"], low["step"]) == (0.125, "low_reward", 5)
    for row in rows:
        assert (row["complete"], row["total_messages"], row["truncated"]) == (True, 5, False)
        assert row["body"]["state"] == "stored"
        assert messages_of(server, run, row) == CHAT
    # The heartbeat at close carried the counters to the run's transport health.
    transport = server.run(run)["transport"]
    assert transport["state"] == "ok"
    assert (transport["trajectories_sent"], transport["trajectories_dropped"]) == (5, 0)
    assert (transport["trajectories_queue_capacity"], transport["trajectories_not_uploaded"]) == (
        256,
        0,
    )


def test_a_conflicting_resend_is_dropped_counted_and_stores_nothing(server: Server) -> None:
    run = fresh("conflict")
    with reporting(server, run) as r:
        evaluation_round(r, "val", ["q1"])
        assert r.flush(10)
        other = [{"role": "user", "content": "another execution"}]
        assert r.trajectory(scope="evaluation", round_id="val", trial_id="q1", messages=other)
        assert r.flush(10)
        evaluation_round(r, "val", ["q1", "q2"])  # the same again is a duplicate: fine
        assert r.flush(10)
        health = r.health()
    assert health.trajectories_dropped_by_reason == {
        "rejected by server (409 trajectory_conflict)": 1
    }
    assert health.trajectories_sent == 3
    rows = index(server, run)
    assert sorted(row["trial_id"] for row in rows) == ["q1", "q2"]
    [first] = [row for row in rows if row["trial_id"] == "q1"]
    assert messages_of(server, run, first) == CHAT
    assert server.run(run)["transport"]["state"] == "lossy"


def test_a_step_keeps_32_stratified_rollouts_on_the_server(server: Server) -> None:
    run = fresh("rollouts")
    with reporting(server, run) as r:
        step_of_rollouts(r, 1, {"failure": 10, "low": 5, "nan": 3, "plain": 40})
        step_of_rollouts(r, 2, {"plain": 2})
        assert r.flush(20)
        health = r.health()
    assert (health.trajectories_sent, health.trajectories_not_uploaded) == (34, 26)
    assert health.trajectories_dropped == 0  # the server's cap is never reached
    stored = Counter(row["category"] for row in index(server, run, scope="training", step=1))
    assert stored == {"failure": 10, "low_reward": 5, "invalid_reward": 3, "representative": 14}
    assert len(index(server, run, scope="training", step=2)) == 2


@pytest.mark.parametrize("samples", [None, 5])
def test_the_evaluation_prefilter_keeps_every_trial_the_server_keeps(
    server: Server, samples: int | None
) -> None:
    run = fresh("round")
    trials = [f"task{i}-s{i % 3}" for i in range(600)]
    with reporting(server, run, val_upload_samples=samples) as r:
        assert r.declare_population("val-600", len(trials))
        evaluation_round(r, "val-600", trials)
        assert r.flush(30)
        health = r.health()
    cap = 32 if samples is None else samples
    uploaded = [t for t in trials if may_be_selected(t, cap, len(trials))]
    assert (health.trajectories_sent, health.trajectories_dropped) == (len(uploaded), 0)
    assert health.trajectories_not_uploaded == len(trials) - len(uploaded)
    rows = index(server, run, round_id="val-600")
    assert sorted(row["trial_id"] for row in rows) == sorted(uploaded)
    kept = {row["trial_id"] for row in rows if row["body"]["state"] == "stored"}
    # The server keeps the text of the cap trials of lowest rank: each was uploaded.
    assert kept == set(sorted(trials, key=selection_rank)[:cap])
    assert {row["body"]["state"] for row in rows if row["trial_id"] not in kept} <= {"not_retained"}


def test_init_runs_report_trajectories_through_the_module_function(server: Server) -> None:
    from tests.client.test_init import script

    run = fresh("init")
    done = script(
        server,
        f"""
        import tuneplane
        tuneplane.init(project="{PROJECT}", name="{run}")
        chat = [{{"role": "user", "content": "hi"}}]
        assert tuneplane.trajectory(scope="training", step=3, trajectory_id="a", messages=chat)
        assert not tuneplane.trajectory(scope="training", step=3, messages=chat)
        tuneplane.finish()
        """,
    )
    assert done.returncode == 0, done.stderr
    [row] = index(server, run)
    assert (row["step"], row["trajectory_id"], row["category"]) == (3, "a", "invalid_reward")
