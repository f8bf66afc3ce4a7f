"""ATIF trajectories into contract messages: the goldens, continuations, lenient reading."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.importers.cohort import (
    ASYNC,
    DATAGEN,
    GOLDEN,
    TWIN_COHORT,
    TWIN_TRIAL,
    atif,
    make_trial,
)
from tests.shared_fixtures import TWINS, real_fixture
from tuneplane.contract.trajectories import parse_trajectory
from tuneplane.importers.atif import read_conversation


def golden(tmp_path: Path, name: str, *continuations: tuple[str, str]) -> Path:
    """A trial directory holding a golden file as agent/trajectory.json (and its
    continuations under the sibling names they are referred to by)."""
    (tmp_path / "agent").mkdir(parents=True)
    shutil.copy(GOLDEN / name, tmp_path / "agent" / "trajectory.json")
    for source, target in continuations:
        shutil.copy(GOLDEN / source, tmp_path / "agent" / target)
    return tmp_path


def valid(messages: list[dict[str, object]]) -> None:
    document = {
        "scope": "evaluation",
        "round_id": "r",
        "trial_id": "t",
        "trial_attempt": 0,
        "messages": messages,
        "total_messages": len(messages),
        "complete": True,
        "capture_policy": "all",
    }
    assert parse_trajectory("t", document)[1] == []


@real_fixture
def test_openhands_v1_5_tool_calls_and_their_answers(tmp_path: Path) -> None:
    conversation, problems = read_conversation(
        golden(tmp_path, "openhands/hello-world.trajectory.json")
    )
    assert problems == []
    assert conversation is not None
    assert conversation.schema_versions == ("ATIF-v1.5",)
    messages = conversation.messages
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "system",
        "system",
        "assistant",
        "tool",
        "assistant",
    ]
    call = messages[4]["tool_calls"][0]
    assert call["id"] == "call_fake_1"
    assert call["name"] == "str_replace_editor"
    assert call["arguments"]["command"] == "create"
    assert messages[4]["tokens"] == {"input": 100, "output": 50}
    assert messages[5]["tool_call_id"] == "call_fake_1"
    assert messages[5]["tool_name"] == "str_replace_editor"
    assert messages[5]["content"].startswith("File created successfully")
    valid(messages)


def test_a_v1_5_twin_reads_its_tool_call_answer_times_and_models() -> None:
    """The twin cohort's trajectory (ATIF v1.5, written here): the same rules as the
    OpenHands golden's, on a conversation of our own."""
    conversation, problems = read_conversation(TWIN_COHORT / TWIN_TRIAL)
    assert problems == []
    assert conversation is not None
    assert conversation.schema_versions == ("ATIF-v1.5",)
    messages = conversation.messages
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1]["tool_calls"] == [
        {"id": "call_1", "name": "bash", "arguments": {"command": "pytest -x -q"}}
    ]
    assert (messages[2]["tool_call_id"], messages[2]["tool_name"]) == ("call_1", "bash")
    assert messages[2]["content"] == "1 failed, 3 passed"
    assert {m.get("model") for m in messages if m["role"] == "assistant"} == {"claude-haiku-4-5"}
    assert messages[0]["timestamp"] < messages[1]["timestamp"] < messages[3]["timestamp"]
    valid(messages)


@real_fixture
def test_terminus_v1_6_reasoning_and_observations_without_a_call(tmp_path: Path) -> None:
    conversation, _ = read_conversation(
        golden(tmp_path, "terminus_2/hello-world-invalid-json.trajectory.json")
    )
    assert conversation is not None
    second = conversation.messages[1]
    assert second["role"] == "assistant"
    assert second["reasoning"].startswith("The task is straightforward")
    answer = conversation.messages[2]
    assert answer["role"] == "tool"
    assert "tool_call_id" not in answer  # terminus answers the keystrokes, not a call
    assert answer["content"].startswith("Previous response had parsing errors")
    valid(conversation.messages)


def _real_continuation(tmp_path: Path) -> Path:
    base = "terminus_2/hello-world-context-summarization-linear-history.trajectory"
    return golden(tmp_path, f"{base}.json", (f"{base}.cont-1.json", "trajectory.cont-1.json"))


def _twin_continuation(tmp_path: Path) -> Path:
    return TWINS / "atif" / "continuation"


@pytest.mark.parametrize(
    "trial",
    [
        pytest.param(_real_continuation, marks=real_fixture, id="real"),
        pytest.param(_twin_continuation, id="twin"),
    ],
)
def test_a_continuation_is_joined_without_its_copied_context(
    tmp_path: Path, trial: Callable[[Path], Path]
) -> None:
    directory = trial(tmp_path)
    conversation, problems = read_conversation(directory)
    assert problems == []
    assert conversation is not None
    assert conversation.files == ("agent/trajectory.json", "agent/trajectory.cont-1.json")
    first = json.loads((directory / "agent" / "trajectory.json").read_text())
    second = json.loads((directory / "agent" / "trajectory.cont-1.json").read_text())
    fresh = [s for s in second["steps"] if not s.get("is_copied_context")]
    contents = [m["content"] for m in conversation.messages if m["role"] != "tool"]
    assert contents == [s["message"] for s in first["steps"] + fresh]
    assert conversation.subagent_refs == 1  # the summarization step's, not followed
    valid(conversation.messages)


def test_a_missing_continuation_a_loop_and_an_escape_are_problems(tmp_path: Path) -> None:
    missing = make_trial(
        tmp_path,
        "a",
        trajectory=atif(
            [{"step_id": 1, "source": "user", "message": "hi"}],
            continued_trajectory_ref="trajectory.cont-1.json",
        ),
    )
    (problem,) = read_conversation(missing)[1]
    assert problem.field == "continued_trajectory_ref"
    assert "does not exist" in problem.rule
    looping = make_trial(
        tmp_path,
        "b",
        trajectory=atif(
            [{"step_id": 1, "source": "user", "message": "hi"}],
            continued_trajectory_ref="trajectory.json",
        ),
    )
    assert "loop" in read_conversation(looping)[1][0].rule
    escaping = make_trial(
        tmp_path,
        "c",
        trajectory=atif(
            [{"step_id": 1, "source": "user", "message": "hi"}],
            continued_trajectory_ref="../../x.json",
        ),
    )
    assert "leaves the trial directory" in read_conversation(escaping)[1][0].rule


@real_fixture
def test_the_real_claude_code_v1_2_trajectory_reads_whole() -> None:
    conversation, problems = read_conversation(DATAGEN / ASYNC)
    assert problems == []
    assert conversation is not None
    assert conversation.schema_versions == ("ATIF-v1.2",)
    calls = sum(len(m.get("tool_calls", [])) for m in conversation.messages)
    answers = [m for m in conversation.messages if m["role"] == "tool"]
    assert calls == 33
    assert len(answers) == 30
    assert all(a["tool_name"] for a in answers)  # each matched to its call
    valid(conversation.messages)


def test_unknown_fields_are_kept_aside_never_fatal(tmp_path: Path) -> None:
    steps = [
        {"step_id": 1, "source": "user", "message": "hi", "colour": "red"},
        {
            "step_id": 2,
            "source": "agent",
            "message": [
                {"type": "text", "text": "look"},
                {"type": "image", "source": {"path": "shot.png"}},
            ],
            "llm_call_count": 1,
            "tool_calls": [
                {
                    "tool_call_id": "c1",
                    "function_name": "f",
                    "arguments": {},
                    "extra": {},
                    "future": 1,
                }
            ],
            "observation": {
                "results": [{"source_call_id": "c1", "content": "ok", "surprise": True}]
            },
            "metrics": {"prompt_tokens": 5, "completion_tokens": -1, "new_metric": 2},
        },
        {"step_id": 3, "source": "narrator", "message": "aside"},
    ]
    trial = make_trial(
        tmp_path, "t", trajectory=atif(steps, "ATIF-v1.8", trajectory_id="x", brand_new={})
    )
    conversation, problems = read_conversation(trial)
    assert problems == []
    assert conversation is not None
    assert conversation.unknown_fields == (
        "brand_new",
        "steps[].colour",
        "steps[].metrics.new_metric",
        "steps[].observation.results[].surprise",
        "steps[].source='narrator'",
        "steps[].tool_calls[].future",
    )
    assert conversation.messages[1]["content"] == "look\n[image: shot.png]"
    assert conversation.messages[1]["tokens"] == {"input": 5}
    valid(conversation.messages)


def test_unknown_keys_of_content_parts_are_listed(tmp_path: Path) -> None:
    image = {"media_type": "image/png", "path": "shot.png"}
    steps = [
        {
            "step_id": 1,
            "source": "user",
            "message": [
                {"type": "text", "text": "look", "cache_control": {"type": "ephemeral"}},
                {"type": "image", "source": {**image, "width": 640}},
                {"type": "audio", "source": {"media_type": "audio/wav", "path": "a.wav"}},
            ],
        },
        {
            "step_id": 2,
            "source": "agent",
            "message": "run it",
            "tool_calls": [{"tool_call_id": "c1", "function_name": "f", "arguments": {}}],
            "observation": {
                "results": [
                    {
                        "source_call_id": "c1",
                        "content": [
                            {"type": "text", "text": "done", "annotations": []},
                            {"type": "image", "source": {**image, "alt": "a chart"}},
                            {"type": "video", "source": {"path": "clip.mp4"}},
                        ],
                    }
                ]
            },
        },
    ]
    trial = make_trial(tmp_path, "t", trajectory=atif(steps, "ATIF-v1.8"))
    conversation, problems = read_conversation(trial)
    assert problems == []
    assert conversation is not None
    assert conversation.unknown_fields == (
        "steps[].message[].cache_control",
        "steps[].message[].source.width",
        "steps[].observation.results[].content[].annotations",
        "steps[].observation.results[].content[].source.alt",
        "steps[].observation.results[].content[].type='video'",
    )
    assert conversation.messages[0]["content"] == "look\n[image: shot.png]\n[audio: a.wav]"
    assert conversation.messages[2]["content"] == "done\n[image: shot.png]\n[video: clip.mp4]"
    valid(conversation.messages)


@real_fixture
def test_the_real_goldens_have_no_unknown_keys(tmp_path: Path) -> None:
    for number, name in enumerate(sorted(p.name for p in GOLDEN.glob("*/*.trajectory.json"))):
        kind = next(GOLDEN.glob(f"*/{name}")).parent.name
        trial = golden(tmp_path / str(number), f"{kind}/{name}")
        conversation, problems = read_conversation(trial)
        if problems:  # a golden whose continuation is not beside it under its own name
            continue
        assert conversation is not None
        assert conversation.unknown_fields == (), name


def test_the_twins_have_no_unknown_keys_and_their_totals_are_the_last_files() -> None:
    """The twin trajectories (written here, in the goldens' formats): every key is one the
    reader knows, and the totals are the last file's final metrics (a continuation's are
    cumulative, more than its own steps hold)."""
    single, _ = read_conversation(TWIN_COHORT / TWIN_TRIAL)
    joined, _ = read_conversation(TWINS / "atif" / "continuation")
    assert single is not None
    assert joined is not None
    assert (single.unknown_fields, joined.unknown_fields) == ((), ())
    assert single.metrics == {"input": 48210, "output": 2210, "cached": 31000}
    assert joined.metrics == {"input": 1485, "output": 112}


@pytest.mark.parametrize("version", ["ATIF-v1.0", "ATIF-v1.1", "ATIF-v1.7", "ATIF-v1.8"])
def test_every_version_from_1_0_to_1_8_reads(tmp_path: Path, version: str) -> None:
    trial = make_trial(
        tmp_path, "t", trajectory=atif([{"step_id": 1, "source": "user", "message": "hi"}], version)
    )
    assert read_conversation(trial)[0] is not None


@pytest.mark.parametrize("version", ["ATIF-v1.9", "ATIF-v2.0", None, "1.6"])
def test_other_versions_are_refused(tmp_path: Path, version: str | None) -> None:
    trial = make_trial(tmp_path, "t", trajectory=atif([], version))
    (problem,) = read_conversation(trial)[1]
    assert problem.field == "schema_version"
    assert "ATIF-v1.0 to ATIF-v1.8" in problem.rule


def test_a_legacy_litellm_trajectory_is_refused_as_not_supported(tmp_path: Path) -> None:
    trial = make_trial(tmp_path, "t")
    (trial / "agent").mkdir()
    (trial / "agent" / "litellm-trajectory.jsonl").write_text('{"messages": []}\n')
    conversation, (problem,) = read_conversation(trial)
    assert conversation is None
    assert problem.file.endswith("agent/litellm-trajectory.jsonl")
    assert "legacy litellm trajectories are not supported" in problem.rule


def test_no_trajectory_is_no_conversation_and_a_broken_one_a_problem(tmp_path: Path) -> None:
    assert read_conversation(make_trial(tmp_path, "none")) == (None, [])
    broken = make_trial(tmp_path, "broken")
    (broken / "agent").mkdir()
    (broken / "agent" / "trajectory.json").write_text('{"schema_version": "ATIF-v1.6", "steps": ')
    assert "is not JSON" in read_conversation(broken)[1][0].rule


@real_fixture
def test_the_real_claude_code_steps_keep_their_timestamps_and_models() -> None:
    conversation, _ = read_conversation(DATAGEN / ASYNC)
    assert conversation is not None
    raw = json.loads((DATAGEN / ASYNC / "agent" / "trajectory.json").read_text())
    stepped = [m for m in conversation.messages if m["role"] != "tool"]
    assert [m["timestamp"] for m in stepped] == [s["timestamp"] for s in raw["steps"]]
    assert stepped[0]["timestamp"] == "2025-11-19T22:54:30.166Z"
    # A step names its own model (claude-code hands work to haiku and sonnet); the one
    # that names none is the agent's, as ATIF defines it.
    assert stepped[0]["model"] == "claude-haiku-4-5-20251001"
    assert stepped[1]["model"] == "claude-sonnet-4-5-20250929"
    unnamed = [m for m, s in zip(stepped, raw["steps"], strict=True) if "model_name" not in s]
    assert [(m["role"], m.get("model")) for m in unnamed] == [("user", None)]
    assert {m["model"] for m in stepped if m["role"] == "assistant"} == {
        "claude-haiku-4-5-20251001",
        "claude-sonnet-4-5-20250929",
    }
    assert conversation.metrics == {"input": 1114893, "output": 14550, "cached": 1109340}
    valid(conversation.messages)


@real_fixture
def test_the_goldens_totals_are_the_last_files_final_metrics(tmp_path: Path) -> None:
    conversation, _ = read_conversation(
        golden(tmp_path / "a", "terminus_2/hello-world-timeout.trajectory.json")
    )
    assert conversation is not None
    assert conversation.metrics == {
        "input": 982,
        "output": 145,
        "cached": 0,
        "cost_usd": 0.0039050000000000005,
    }
    assert [m.get("model") for m in conversation.messages if m["role"] == "assistant"] == [
        "gpt-4o"
    ] * 3
    assert not any("timestamp" in m for m in conversation.messages)  # the goldens have none
    base = "terminus_2/hello-world-context-summarization-linear-history.trajectory"
    directory = golden(
        tmp_path / "b", f"{base}.json", (f"{base}.cont-1.json", "trajectory.cont-1.json")
    )
    joined, _ = read_conversation(directory)
    assert joined is not None
    # Harbor writes the cumulative totals in the continuation (more than both files' steps).
    assert joined.metrics is not None
    assert joined.metrics["input"] == 7802


def test_a_malformed_timestamp_is_named_and_left_out(tmp_path: Path) -> None:
    steps = [
        {"step_id": 1, "source": "user", "message": "hi", "timestamp": "yesterday"},
        {"step_id": 2, "source": "agent", "message": "ok", "timestamp": "2025-11-19T22:54:30"},
    ]
    trial = make_trial(
        tmp_path,
        "t",
        trajectory=atif(steps, final_metrics={"total_prompt_tokens": -3, "total_cost_usd": 1}),
    )
    conversation, problems = read_conversation(trial)
    assert problems == []
    assert conversation is not None
    assert "timestamp" not in conversation.messages[0]
    assert conversation.messages[1]["timestamp"] == "2025-11-19T22:54:30"  # naive, as written
    assert "steps[].timestamp (not an ISO 8601 date and time)" in conversation.unknown_fields
    assert conversation.metrics == {"cost_usd": 1}
    valid(conversation.messages)
