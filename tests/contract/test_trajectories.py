"""The trajectory contract: what a document may hold and how each broken rule is named, the
batch rules, explicit truncation, and the text retention rules (the deterministic trial
rank, the evaluation cap and its prefilter, the stratified per-step sample). Pure Python."""

from __future__ import annotations

import math
import subprocess
import sys
from collections import Counter
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuneplane.contract.errors import InvalidInput
from tuneplane.contract.json_body import NotFinite
from tuneplane.contract.limits import (
    EVAL_TEXT_ALL_MAX_TRIALS,
    EVAL_TEXT_SAMPLED_TRIALS,
    TRAJECTORY_BATCH_MAX,
    TRAJECTORY_MAX_BYTES,
    TRAJECTORY_MAX_MESSAGES,
)
from tuneplane.contract.trajectories import (
    CATEGORIES,
    evaluation_text_cap,
    may_be_selected,
    parse_timestamp,
    parse_trajectories,
    parse_trajectory,
    selection_rank,
    stratified,
    truncate,
)

MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": "What is 17 * 3?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "name": "python", "arguments": {"code": "17 * 3"}}],
        "tokens": {"input": 12, "output": 9},
        "ms": 420,
    },
    {"role": "tool", "tool_call_id": "c1", "tool_name": "python", "content": "51"},
    {"role": "assistant", "content": "51", "reasoning": "it printed 51"},
]


def evaluation(**changes: Any) -> dict[str, Any]:
    item = {
        "scope": "evaluation",
        "round_id": "val-7",
        "trial_id": "q17-s0",
        "trial_attempt": 0,
        "messages": MESSAGES,
        "total_messages": 4,
        "complete": True,
        "capture_policy": "all",
    }
    return {k: v for k, v in {**item, **changes}.items() if v is not ...}


def training(**changes: Any) -> dict[str, Any]:
    item = {
        "scope": "training",
        "step": 120,
        "trajectory_id": "r3",
        "diagnostic": "low_reward",
        "reward": 0.05,
        "collection_policy": "v118",
        "consumption_policy": 120,
        "messages": MESSAGES[:1],
        "total_messages": 40,
        "complete": False,
        "capture_policy": "sampled",
    }
    return {k: v for k, v in {**item, **changes}.items() if v is not ...}


def problems(item: object) -> list[str]:
    parsed, violations = parse_trajectory("t", item)
    assert (parsed is None) == bool(violations)
    return [str(v) for v in violations]


def test_an_evaluation_trajectory_and_its_identity() -> None:
    parsed, violations = parse_trajectory("t", evaluation())
    assert violations == []
    assert parsed is not None
    assert parsed.identity == "evaluation/val-7/q17-s0/0"
    assert (parsed.category, parsed.truncated, parsed.message_count) == (None, False, 4)
    assert parsed.document["messages"] == MESSAGES


def test_a_training_rollout_its_identity_and_category() -> None:
    parsed, _ = parse_trajectory("t", training())
    assert parsed is not None
    assert parsed.identity == "training/120/r3"
    assert (parsed.category, parsed.truncated) == ("low_reward", True)
    # A policy version given as a number is kept as its text.
    assert parsed.consumption_policy == "120"


@pytest.mark.parametrize(
    ("changes", "category"),
    [
        ({"diagnostic": None, "reward": 1.0}, "representative"),
        ({"diagnostic": ..., "reward": ...}, "invalid_reward"),
        (
            {"diagnostic": "representative", "reward": None, "reward_invalid": True},
            "invalid_reward",
        ),
        ({"diagnostic": "failure", "reward": None}, "failure"),
        ({"diagnostic": "anomaly", "reward": None, "reward_invalid": True}, "anomaly"),
        ({"diagnostic": "failure", "reward": 1.0}, "failure"),
        ({"diagnostic": "low_reward", "reward": 0.0}, "low_reward"),
        ({"diagnostic": None, "reward": 0}, "representative"),
    ],
)
def test_categories_follow_the_producer_and_the_reward(
    changes: dict[str, Any], category: str
) -> None:
    parsed, violations = parse_trajectory("t", training(**changes))
    assert violations == []
    assert parsed is not None
    assert parsed.category == category
    if changes.get("reward") is not None and changes["reward"] is not ...:
        assert parsed.reward == changes["reward"]
        assert parsed.document["reward"] == changes["reward"]


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ([], "t: must be an object"),
        (evaluation(scope="eval"), "t.scope: must be one of evaluation, training"),
        (evaluation(round_id=...), "t.round_id: required"),
        (evaluation(trial_attempt=-1), "t.trial_attempt: must be a nonnegative integer"),
        (evaluation(step=3), "t.step: is a training rollout's field"),
        (training(round_id="val-7"), "t.round_id: is an evaluation trajectory's field"),
        (training(step=-1), "t.step: required for a training rollout"),
        (training(diagnostic="bad"), "t.diagnostic: must be one of failure"),
        (training(reward=math.nan), "t.reward: must be a finite number or null"),
        (training(reward=NotFinite("NaN")), "t.reward: must be a finite number or null"),
        (training(reward=1.0, reward_invalid=True), "t.reward_invalid: true, but a finite"),
        (training(reward=None), "t.diagnostic: low_reward needs the finite reward"),
        (training(reward_missing="format"), "t.reward_missing: must be a list of 1-32"),
        (training(reward_missing=[]), "t.reward_missing: must be a list of 1-32"),
        (training(reward_missing=["a", "a"]), "t.reward_missing: must be a list of 1-32 distinct"),
        (training(reward_missing=["x" * 257]), "t.reward_missing: must be a list of 1-32"),
        (evaluation(reward_missing=["a"]), "t.reward_missing: is a training rollout's field"),
        (evaluation(messages="hi"), "t.messages: required: a list of at most 1024"),
        (evaluation(total_messages=3), "t.total_messages: must be an integer of at least"),
        (evaluation(total_messages=5), "t.complete: true, but total_messages (5) differs"),
        (evaluation(complete=None), "t.complete: required"),
        (evaluation(capture_policy="most"), "t.capture_policy: must be one of all, sampled"),
        (evaluation(extra=1), "t.extra: unknown field"),
    ],
)
def test_each_broken_rule_is_named(item: object, expected: str) -> None:
    assert any(problem.startswith(expected) for problem in problems(item)), problems(item)


def test_the_reward_functions_that_gave_none_are_kept_only_when_sent() -> None:
    partial, _ = parse_trajectory("t", training(reward_missing=["format", "my/judge"]))
    assert partial is not None
    assert partial.reward_missing == ("format", "my/judge")
    assert partial.document["reward_missing"] == ["format", "my/judge"]
    whole, _ = parse_trajectory("t", training())
    assert whole is not None
    # A document without it is stored as before: an earlier upload sent again is the same.
    assert whole.reward_missing is None
    assert "reward_missing" not in whole.document


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("hi", "t.messages[0]: must be an object"),
        ({"role": "robot", "content": ""}, "t.messages[0].role: must be one of"),
        ({"role": "user"}, "t.messages[0].content: required"),
        ({"role": "user", "content": "", "reasoning": 3}, "t.messages[0].reasoning: must be"),
        (
            {"role": "user", "content": "", "tool_calls": []},
            "t.messages[0].tool_calls: only an assistant",
        ),
        (
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1"}]},
            "t.messages[0].tool_calls[0].name: required",
        ),
        ({"role": "tool", "content": "", "tool_name": ""}, "t.messages[0].tool_name: must be"),
        ({"role": "user", "content": "", "tokens": {"input": -1}}, "t.messages[0].tokens.input"),
        ({"role": "user", "content": "", "tokens": {"sent": 1}}, "t.messages[0].tokens.sent"),
        ({"role": "user", "content": "", "ms": -1}, "t.messages[0].ms: must be a nonnegative"),
        ({"role": "user", "content": "", "mood": "ok"}, "t.messages[0].mood: unknown field"),
        (
            {"role": "user", "content": "", "timestamp": "2025-13-40T25:00:00Z"},
            "t.messages[0].timestamp: must be an ISO 8601 date and time",
        ),
        (
            {"role": "user", "content": "", "timestamp": 1732056870},
            "t.messages[0].timestamp: must be an ISO 8601",
        ),
        ({"role": "assistant", "content": "", "model": ""}, "t.messages[0].model: must be a"),
    ],
)
def test_each_message_rule_is_named(message: object, expected: str) -> None:
    item = evaluation(messages=[message], total_messages=1)
    assert any(problem.startswith(expected) for problem in problems(item)), problems(item)


def test_timestamps_models_and_the_producers_totals_are_kept() -> None:
    stamped = [
        {"role": "user", "content": "hi", "timestamp": "2025-11-19T22:54:26.919Z"},
        {
            "role": "assistant",
            "content": "ok",
            "model": "claude-haiku-4-5-20251001",
            "timestamp": "2025-11-19T23:54:30.166123456+01:00",
        },
        {"role": "assistant", "content": "then", "timestamp": "2025-11-19T22:54:31"},
    ]
    metrics = {"input": 982, "output": 145, "cached": 0, "cost_usd": 0.0039}
    parsed, violations = parse_trajectory(
        "t", evaluation(messages=stamped, total_messages=3, metrics=metrics)
    )
    assert violations == []
    assert parsed is not None
    assert parsed.document["messages"] == stamped
    assert parsed.document["metrics"] == metrics
    # Nanoseconds, an offset and none (read as UTC) are one clock.
    times = [parse_timestamp(m["timestamp"]) for m in stamped]
    assert [t.isoformat() if t else None for t in times] == [
        "2025-11-19T22:54:26.919000+00:00",
        "2025-11-19T23:54:30.166123+01:00",
        "2025-11-19T22:54:31+00:00",
    ]
    plain, _ = parse_trajectory("t", evaluation())
    assert plain is not None
    assert "metrics" not in plain.document  # earlier uploads keep their digest


@pytest.mark.parametrize(
    ("metrics", "expected"),
    [
        ([], "t.metrics: must be an object"),
        ({"input": -1}, "t.metrics.input: must be a nonnegative integer"),
        ({"cost_usd": math.inf}, "t.metrics.cost_usd: must be a nonnegative finite"),
        ({"cost_usd": -0.1}, "t.metrics.cost_usd: must be a nonnegative finite"),
        ({"steps": 3}, "t.metrics.steps: unknown field"),
    ],
)
def test_each_metrics_rule_is_named(metrics: object, expected: str) -> None:
    found = problems(evaluation(metrics=metrics))
    assert any(problem.startswith(expected) for problem in found), found


def test_limits_of_one_document() -> None:
    many = [{"role": "user", "content": ""}] * TRAJECTORY_MAX_MESSAGES
    assert problems(evaluation(messages=many, total_messages=len(many))) == []
    over = [*many, {"role": "user", "content": ""}]
    assert problems(evaluation(messages=over, total_messages=len(over)))[0].startswith(
        "t.messages: required: a list of at most 1024 messages"
    )
    big = [{"role": "user", "content": "x" * TRAJECTORY_MAX_BYTES}]
    [problem] = problems(evaluation(messages=big, total_messages=1))
    assert "a trajectory is at most 1024 KiB (truncate it and declare complete: false)" in problem


def test_a_batch_holds_1_to_16_and_one_identity_once() -> None:
    assert len(parse_trajectories({"trajectories": [evaluation(), training()]})) == 2
    for items in ([], [evaluation(trial_id=f"t{i}") for i in range(TRAJECTORY_BATCH_MAX + 1)]):
        with pytest.raises(InvalidInput) as raised:
            parse_trajectories({"trajectories": items})
        assert raised.value.violations[0].field == "trajectories"
    # The same document twice is one; the same identity with another body is refused.
    assert len(parse_trajectories({"trajectories": [evaluation(), evaluation()]})) == 2
    with pytest.raises(InvalidInput) as raised:
        parse_trajectories({"trajectories": [evaluation(), evaluation(capture_policy="sampled")]})
    assert str(raised.value.violations[0]) == (
        "trajectories[1]: differs from trajectories[0], which has the same identity"
    )


def test_the_stored_body_is_canonical() -> None:
    first, _ = parse_trajectory("t", evaluation())
    reordered = dict(reversed(list(evaluation().items())))
    second, _ = parse_trajectory("t", reordered)
    assert first is not None
    assert second is not None
    assert first.encoded() == second.encoded()


# -- truncation ----------------------------------------------------------------------------


def test_truncate_keeps_what_fits_and_declares_it() -> None:
    messages = [{"role": "user", "content": str(i)} for i in range(2000)]
    kept, total, complete = truncate(messages)
    assert (len(kept), total, complete) == (TRAJECTORY_MAX_MESSAGES, 2000, False)
    assert kept == messages[:TRAJECTORY_MAX_MESSAGES]
    item = evaluation(messages=kept, total_messages=total, complete=complete)
    assert problems(item) == []
    assert truncate(MESSAGES) == (MESSAGES, 4, True)


def test_truncate_bounds_bytes_and_never_cuts_inside_a_message() -> None:
    messages = [{"role": "user", "content": "x" * 1000} for _ in range(10)]
    kept, total, complete = truncate(messages, max_bytes=3500)
    assert (len(kept), total, complete) == (3, 10, False)
    assert all(m["content"] == "x" * 1000 for m in kept)
    # The first message stays, however large.
    kept, _, _ = truncate(messages, max_bytes=10)
    assert len(kept) == 1


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.text(max_size=300), max_size=60),
    st.integers(1, 80),
    st.integers(50, 20_000),
)
def test_truncate_always_makes_a_valid_declared_document(
    contents: list[str], max_messages: int, max_bytes: int
) -> None:
    messages = [{"role": "user", "content": text} for text in contents]
    kept, total, complete = truncate(messages, max_messages=max_messages, max_bytes=max_bytes)
    assert kept == messages[: len(kept)]
    assert total == len(messages)
    assert complete == (len(kept) == len(messages))
    assert len(kept) <= max_messages
    if len(kept) > 1:
        assert sum(len(orjson.dumps(m)) + 1 for m in kept) <= max_bytes
    assert problems(evaluation(messages=kept, total_messages=total, complete=complete)) == []


# -- text retention --------------------------------------------------------------------------


def test_selection_rank_depends_on_the_trial_id_alone() -> None:
    # Fixed values: every process, every run of a cohort and every release rank the same
    # trials alike (Python's own hash() would differ from one process to the next).
    assert selection_rank("q17-s0") == 337189714202584541
    assert selection_rank("q17-s1") == -7420431407243140126
    ranks = {selection_rank(f"t{i}") for i in range(10_000)}
    assert len(ranks) == 10_000
    assert all(-(2**63) <= rank < 2**63 for rank in ranks)


def test_selection_rank_is_the_same_in_another_process() -> None:
    script = "from tuneplane.contract.trajectories import selection_rank as r; print(r('x7'))"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert int(done.stdout) == selection_rank("x7")


def test_the_evaluation_text_cap() -> None:
    assert evaluation_text_cap(None, None) == EVAL_TEXT_ALL_MAX_TRIALS
    assert evaluation_text_cap(EVAL_TEXT_ALL_MAX_TRIALS, None) == EVAL_TEXT_ALL_MAX_TRIALS
    assert evaluation_text_cap(EVAL_TEXT_ALL_MAX_TRIALS + 1, None) == EVAL_TEXT_SAMPLED_TRIALS
    assert evaluation_text_cap(10_000, 500) == 500
    assert evaluation_text_cap(10, 0) == 0


def test_may_be_selected_keeps_every_trial_the_server_may_choose() -> None:
    trials = [f"q{i}-s{i % 4}" for i in range(5_000)]
    cap = EVAL_TEXT_SAMPLED_TRIALS
    server_keeps = sorted(trials, key=selection_rank)[:cap]
    uploaded = [t for t in trials if may_be_selected(t, cap, len(trials))]
    assert set(server_keeps) <= set(uploaded)
    # About four times the share, far fewer than all.
    assert cap <= len(uploaded) <= 8 * cap
    # A cohort within the cap, or of unknown size, uploads everything; a cap of 0 nothing.
    assert all(may_be_selected(t, cap, cap) for t in trials[:cap])
    assert all(may_be_selected(t, cap, None) for t in trials[:100])
    assert not any(may_be_selected(t, 0, None) for t in trials[:100])


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 200), st.integers(1, 3000))
def test_may_be_selected_never_leaves_out_a_chosen_trial(cap: int, expected: int) -> None:
    trials = [f"trial-{i}" for i in range(expected)]
    chosen = sorted(trials, key=selection_rank)[:cap]
    assert all(may_be_selected(t, cap, expected) for t in chosen)


def test_stratified_takes_each_category_in_turn_in_arrival_order() -> None:
    by_category = {
        "failure": ["f1", "f2", "f3"],
        "low_reward": ["l1"],
        "representative": [f"r{i}" for i in range(40)],
    }
    assert stratified(by_category, 6) == ["f1", "l1", "r0", "f2", "r1", "f3"]  # type: ignore[arg-type]
    assert len(stratified(by_category, 32)) == 32  # type: ignore[arg-type]
    assert stratified(by_category, 0) == []  # type: ignore[arg-type]
    assert stratified({}, 32) == []


@given(
    st.dictionaries(st.sampled_from(CATEGORIES), st.lists(st.integers(), max_size=50), max_size=5),
    st.integers(0, 40),
)
def test_stratified_is_fair_and_bounded(by_category: dict[Any, list[int]], cap: int) -> None:
    tagged = {c: [(c, i) for i in range(len(items))] for c, items in by_category.items()}
    chosen = stratified(tagged, cap)
    available = sum(len(items) for items in tagged.values())
    assert len(chosen) == min(cap, available)
    counts = Counter(category for category, _ in chosen)
    for category, items in tagged.items():
        picked = [item for item in chosen if item[0] == category]
        assert picked == items[: len(picked)]  # in arrival order
        # A category holding back is one that ran out, never one passed over.
        if counts[category] < len(items):
            assert all(n <= counts[category] + 1 for n in counts.values())
