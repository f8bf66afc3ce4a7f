"""Inspect AI import: real logs written here by Inspect's own mock model, from logs to
snapshot, and through the command line and a ``tuneplane run`` job to a real server."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.client.runs import PROJECT, Server
from tests.importers.inspect_logs import write_logs
from tests.importers.jobs import body, events, job, rounds, trajectories, trials
from tuneplane.contract.ids import task_and_repeat
from tuneplane.contract.observations import CHECKPOINT_EVENT
from tuneplane.importers.inspect_eval import import_inspect, sample_key, trial_id
from tuneplane.importers.inspect_protocol import SAMPLE_EVENT, TASK_EVENT
from tuneplane.importers.problems import ImportRefused
from tuneplane.importers.snapshot import (
    read_snapshot,
    read_snapshots,
    write_snapshot_files,
)

OUTCOMES = {
    "7-r0": ("success", 1.0),
    "7-r1": ("success", 1.0),
    "add-1-r0": ("success", 1.0),
    "add-1-r1": ("success", 1.0),
    "add-2-r0": ("failure", 0.0),
    "add-2-r1": ("failure", 0.0),
}


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("inspect")
    write_logs(out)
    return out


def one(path: Path, **options: Any) -> dict[str, Any]:
    imported = import_inspect(str(path), **options)
    assert len(imported.snapshots) == 1
    return next(iter(imported.snapshots.values())).document


def the_log(logs: Path, kind: str) -> Path:
    (found,) = (logs / kind).glob(f"*.{'json' if kind == 'json' else 'eval'}")
    return found


def refusal(path: Path) -> list[str]:
    with pytest.raises(ImportRefused) as refused:
        import_inspect(str(path))
    return [str(problem) for problem in refused.value.problems]


def outcomes(snapshot: dict[str, Any]) -> dict[str, list[tuple[Any, ...]]]:
    found: dict[str, list[tuple[Any, ...]]] = {}
    for t in snapshot["trials"]:
        found.setdefault(t["trial_id"], []).append(
            (t["status"], t["reward"], t["error_type"], t.get("reason_code"), t.get("reason"))
        )
    return found


def test_samples_are_trials_and_epochs_their_repeats_in_both_formats(logs: Path) -> None:
    eval_log, json_log = one(logs / "eval"), one(logs / "json")
    for snapshot in (eval_log, json_log):
        assert snapshot["source"] == "inspect"
        assert snapshot["round_id"].startswith("arith-")
        population = snapshot["population"]
        # Four samples planned, two epochs each.
        assert population["expected"] == 8
        assert population["task"] == {"name": "arith", "version": "2"}
        assert sorted(population["digests"]) == ["cohort", "dataset", "settings", "verifier"]
        # The model is the checkpoint, never part of the protocol.
        assert snapshot["checkpoint"] == {"name": "mockllm/model"}
        found = outcomes(snapshot)
        assert {t: found[t][-1][:2] for t in OUTCOMES} == OUTCOMES
        assert all(len(found[t]) == 1 for t in OUTCOMES)
        assert all(t["eligible"] is False for t in snapshot["trials"])
    # One evaluation written in two formats: the same protocol, the same outcomes.
    assert eval_log["population"]["digests"] == json_log["population"]["digests"]
    assert outcomes(eval_log) == outcomes(json_log)
    assert eval_log["round_id"] != json_log["round_id"]  # two runs: two rounds


def test_an_errored_sample_is_an_infra_error_with_its_message_and_each_retry_an_attempt(
    logs: Path,
) -> None:
    snapshot = one(logs / "eval")
    error = "RuntimeError('the sandbox went away')"
    errored = ("infra_error", None, "RuntimeError", "sample_error", error)
    for trial in ("boom-r0", "boom-r1"):
        # retry_on_error=1: Inspect ran it again, and it failed again.
        assert outcomes(snapshot)[trial] == [errored, errored]
        attempts = [t["trial_attempt"] for t in snapshot["trials"] if t["trial_id"] == trial]
        assert attempts == [0, 1]
    notes = [e for e in snapshot["evidence"] if e["trial_id"] == "boom-r1"]
    assert [(e["epoch"], e["retry"], e["reason"]) for e in notes] == [(2, 0, error), (2, 1, error)]
    # A binary verdict needs no reason; the other scorer's value is kept as evidence.
    (right,) = [e for e in snapshot["evidence"] if e["trial_id"] == "add-1-r0"]
    assert right["scores"] == {"match": "C", "length": "1"}


def test_only_binary_scores_decide_and_the_rest_are_unscored_with_why(logs: Path) -> None:
    snapshot = one(logs / "graded")
    found = {t: v[-1] for t, v in outcomes(snapshot).items()}
    assert found == {
        "value-0-r0": ("success", 1.0, None, None, None),
        "value-1-r0": ("failure", 0.0, None, None, None),
        "value-2-r0": ("unscored", 0.5, None, "non_binary_score", "graded = 0.5: not binary"),
        "value-3-r0": ("unscored", None, None, "non_binary_score", "graded = P: not binary"),
        "value-4-r0": ("success", 1.0, None, None, None),
        "value-5-r0": ("failure", 0.0, None, None, None),
        "value-6-r0": ("success", 1.0, None, None, None),
        "value-7-r0": ("unscored", 2.0, None, "non_binary_score", "graded = 2: not binary"),
        "value-8-r0": ("success", 1.0, None, None, None),
        "value-9-r0": ("unscored", None, None, "non_binary_score", "graded = N: not binary"),
    }


def test_the_task_is_the_protocol_evidence_and_the_model_is_not(logs: Path) -> None:
    snapshot = one(logs / "eval")
    (event,) = [e for e in snapshot["events"] if e["name"] == TASK_EVENT]
    fields = event["fields"]
    assert fields["round_id"] == snapshot["round_id"]
    assert (fields["task"], fields["version"], fields["epochs"]) == ("arith", 2, 2)
    assert fields["solver"] == "system_message, sandbox_check, use_tools, generate"
    assert (fields["scorers"], fields["verdict"]) == ("match, length", "match")
    assert (fields["trials_planned"], fields["trials_reported"]) == (8, 8)
    assert fields["dataset_samples"] == 4
    parts = {k.removeprefix("settings.") for k in fields if k.startswith("settings.")}
    assert {"task", "dataset", "plan", "scorers", "config", "inspect_ai"} <= parts
    assert "mockllm" not in json.dumps({k: v for k, v in fields.items() if k != "log"})
    # The graded task differs in its task, plan and scorers, not in Inspect's version.
    (other,) = [e for e in one(logs / "graded")["events"] if e["name"] == TASK_EVENT]
    differ = sorted(k for k in parts if fields[f"settings.{k}"] != other["fields"][f"settings.{k}"])
    assert {"task", "plan", "scorers", "dataset"} <= set(differ)
    assert "inspect_ai" not in differ


def test_every_scorer_s_value_is_sent_beside_the_trial(logs: Path) -> None:
    snapshot = one(logs / "eval")
    samples = {
        e["fields"]["trial_id"]: e["fields"]
        for e in snapshot["events"]
        if e["name"] == SAMPLE_EVENT
    }
    assert sorted(samples) == sorted([*OUTCOMES, "boom-r0", "boom-r1"])
    right = samples["add-1-r1"]
    assert (right["sample_id"], right["epoch"]) == ("add-1", 2)
    assert (right["score.match"], right["score.length"]) == ("C", 1)
    # Two calls of the mock model, 20 and 5 tokens each.
    assert (right["input_tokens"], right["output_tokens"]) == (40, 10)
    assert "score.match" not in samples["boom-r0"]
    graded = [e["fields"] for e in one(logs / "graded")["events"] if e["name"] == SAMPLE_EVENT]
    values = {f["trial_id"]: f["score.graded"] for f in graded}
    assert (values["value-2-r0"], values["value-3-r0"], values["value-4-r0"]) == (0.5, "P", True)


def test_the_model_is_kept_out_of_the_settings_digest(logs: Path, tmp_path: Path) -> None:
    raw = json.loads(the_log(logs, "json").read_text())
    raw["eval"]["model"] = "org/other-model@step-2"
    raw["eval"]["model_args"] = {"api_key": "secret"}
    raw["eval"]["model_base_url"] = "http://model-service:8000/v1"
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / the_log(logs, "json").name).write_text(json.dumps(raw))
    mine, theirs = one(logs / "json"), one(tmp_path / "other")
    assert theirs["checkpoint"] == {"name": "org/other-model@step-2"}
    assert mine["population"]["digests"] == theirs["population"]["digests"]
    assert "secret" not in json.dumps(theirs)


def test_messages_and_tool_calls_are_trajectories_redacted_first(logs: Path) -> None:
    snapshot = one(logs / "json", redactor=lambda text: text.replace("3", "<n>"))
    (kept,) = [t for t in snapshot["trajectories"] if t["trial_id"] == "add-1-r0"]
    assert (kept["trial_attempt"], kept["capture_policy"], kept["complete"]) == (
        0,
        "sampled",
        False,
    )
    roles = [m["role"] for m in kept["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    call = kept["messages"][2]["tool_calls"][0]
    assert (call["name"], call["arguments"]) == ("add", {"x": 1, "y": 2})
    assert [m.get("model") for m in kept["messages"]] == [
        None,
        None,
        "mockllm/model",
        None,
        "mockllm/model",
    ]
    tool = kept["messages"][3]
    assert (tool["tool_call_id"], tool["tool_name"]) == (call["id"], "add")
    assert (tool["content"], kept["messages"][4]["content"]) == ("<n>", "<n>")
    # Every trial of a round of at most 128 keeps its text; an errored one its conversation
    # so far (its last attempt's).
    assert len(snapshot["trajectories"]) == 8
    (boom,) = [t for t in snapshot["trajectories"] if t["trial_id"] == "boom-r0"]
    assert boom["trial_attempt"] == 1
    none = one(logs / "json", text_samples=0)
    assert (none["trajectories"], none["population"]["text_samples"]) == ([], 0)


def test_a_stopped_evaluation_shows_what_it_did_not_run_as_not_reported(
    logs: Path, tmp_path: Path
) -> None:
    raw = json.loads(the_log(logs, "json").read_text())
    raw["status"] = "cancelled"
    raw["samples"] = [s for s in raw["samples"] if s["epoch"] == 1]
    (tmp_path / "cut.json").write_text(json.dumps(raw))
    imported = import_inspect(str(tmp_path / "cut.json"))
    (snapshot,) = imported.snapshots.values()
    assert snapshot.document["population"]["expected"] == 8
    assert sorted({t["trial_id"] for t in snapshot.trials}) == [
        "7-r0",
        "add-1-r0",
        "add-2-r0",
        "boom-r0",
    ]
    (warning,) = imported.warnings
    assert "status is 'cancelled'" in warning
    # Every sample ran in one epoch at least, so which samples were given is attested.
    assert "dataset" in snapshot.document["population"]["digests"]


def test_snapshots_are_written_one_per_log_and_read_back(logs: Path, tmp_path: Path) -> None:
    both = tmp_path / "logs"
    shutil.copytree(logs / "eval", both / "eval")
    shutil.copytree(logs / "graded", both / "graded")
    imported = import_inspect(str(both))
    # Inside the log directory: the snapshots' names are never taken for logs.
    written = write_snapshot_files(imported.snapshots, str(both / "snapshots"))
    assert len(written) == 2
    assert all(Path(p).name.startswith("inspect-") for p in written)
    assert {read_snapshot(p).round_id.split("-")[0] for p in written} == {"arith", "graded"}
    again = import_inspect(str(both))
    assert write_snapshot_files(again.snapshots, str(both / "snapshots")) == written


def test_bad_logs_are_refused_naming_the_file(logs: Path, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert refusal(tmp_path / "empty") == [
        f"{tmp_path / 'empty'}: holds no Inspect log (.eval or .json)"
    ]
    assert refusal(tmp_path / "nowhere") == [f"{tmp_path / 'nowhere'}: does not exist"]
    not_zip = tmp_path / "2026-01-01T00-00-00-00-00_x_abc.eval"
    not_zip.write_bytes(b"not a zip")
    (problem,) = refusal(not_zip)
    assert problem.startswith(f"{not_zip}: is not an Inspect .eval log (not a zip file")
    not_log = tmp_path / "2026-01-01T00-00-00-00-00_x_abc.json"
    not_log.write_text('{"status": "success"}')
    (problem,) = refusal(not_log)
    assert problem.startswith(f"{not_log}: is not a log Inspect can read: ValidationError")
    stranger = json.loads(the_log(logs, "json").read_text())
    stranger["samples"][0]["id"] = "stranger"
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / the_log(logs, "json").name).write_text(json.dumps(stranger))
    (problem,) = refusal(tmp_path / "odd")
    assert "samples: 1 samples the evaluation did not plan, e.g. 'stranger-r" in problem
    twice = json.loads(the_log(logs, "json").read_text())
    (first, second) = [s for s in twice["samples"] if s["epoch"] == 1][:2]
    second["id"] = first["id"]
    (tmp_path / "twice").mkdir()
    (tmp_path / "twice" / the_log(logs, "json").name).write_text(json.dumps(twice))
    (problem,) = refusal(tmp_path / "twice")
    assert problem.endswith(f"samples: two samples make trial '{first['id']}-r0'")


def test_logs_are_read_only_up_to_their_limits(logs: Path, tmp_path: Path) -> None:
    huge = tmp_path / "2026-01-01T00-00-00-00-00_x_abc.json"
    with open(huge, "wb") as handle:
        handle.truncate(256 * 1024 * 1024 + 1)  # sparse: nothing is written
    (problem,) = refusal(huge)
    assert problem == (
        f"{huge}: is 268435457 bytes: an Inspect log is read up to 256 MiB; it was not read"
    )
    # A small .eval whose zip directory says it unpacks to 4 GB is not handed to Inspect.
    bomb = tmp_path / "bomb.eval"
    data = bytearray(the_log(logs, "eval").read_bytes())
    directory = data.index(b"PK\x01\x02")
    data[directory + 24 : directory + 28] = (0xF0000000).to_bytes(4, "little")
    bomb.write_bytes(bytes(data))
    (problem,) = refusal(bomb)
    assert problem.startswith(f"{bomb}: unpacks to ")
    assert problem.endswith("bytes: an .eval log is read up to 1024 MiB; it was not read")
    assert zipfile.is_zipfile(bomb)


def test_sample_ids_that_are_no_ids_make_trial_ids_of_their_own() -> None:
    # The sample is the trial's task and the epoch its repeat, as the server reads them.
    assert task_and_repeat(trial_id("add-1", 2)) == ("add-1", 1)
    assert task_and_repeat(trial_id("q-r1", 1)) == ("q-r1", 0)
    assert sample_key(7) == "7"
    assert sample_key("a/b c") != sample_key("a-b c")
    assert sample_key("a/b c").startswith("a-b-c-")
    assert len(sample_key("x" * 500)) <= 116


def test_the_light_client_never_imports_inspect_and_says_which_extra_it_needs(
    tmp_path: Path,
) -> None:
    code = (
        "import sys\n"
        "from tuneplane.cli import main\n"
        "from tuneplane.importers import inspect_eval\n"
        "assert 'inspect_ai' not in sys.modules\n"
        "sys.modules['inspect_ai'] = None  # as on a machine without it\n"
        f"sys.exit(main(['import', 'inspect', {str(tmp_path)!r}, '--out', 'never']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=os.environ, cwd=tmp_path
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"tuneplane: {tmp_path}: needs the inspect_ai package, which is not installed: "
        "pip install 'tuneplane[inspect]'",
        "tuneplane: nothing was written or uploaded",
    ]
    assert not (tmp_path / "never").exists()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tuneplane.cli", "import", "inspect", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_command_writes_a_snapshot_per_log_and_refuses_bad_logs_in_one_line(
    logs: Path, tmp_path: Path
) -> None:
    out = tmp_path / "snapshots"
    done = cli(str(logs / "graded"), "--out", str(out))
    assert done.returncode == 0, done.stderr
    (written,) = out.iterdir()
    assert read_snapshot(str(written)).document["population"]["expected"] == 10
    assert "10 planned trials, 10 with results (0 not yet reported)" in done.stderr
    assert "1 snapshots written to" in done.stderr
    bad = tmp_path / "2026-01-01T00-00-00-00-00_x_abc.eval"
    bad.write_bytes(b"not a zip")
    done = cli(str(bad), "--out", str(tmp_path / "never"))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"tuneplane: {bad}: is not an Inspect .eval log (not a zip file: File is not a zip file)",
        "tuneplane: nothing was written or uploaded",
    ]
    assert not (tmp_path / "never").exists()


def test_an_import_uploads_inside_tuneplane_run_and_the_round_shows_its_trials(
    logs: Path, server: Server, tmp_path: Path
) -> None:
    run = f"inspect-upload-{tmp_path.name}"
    out = tmp_path / "snapshots"
    script = (
        f"$TUNEPLANE import inspect {shlex.quote(str(logs / 'eval'))} --out {out} --upload && "
        f"$TUNEPLANE import upload {out}"
    )
    done = job(server, run, script)
    assert done.returncode == 0, done.stderr
    (snapshot,) = read_snapshots([str(out)])
    found = rounds(server, run)
    assert list(found) == [snapshot.round_id]
    shown = found[snapshot.round_id]
    assert shown["expected"] == 8
    assert shown["task"] == {"name": "arith", "version": "2"}
    assert sorted(shown["digests"]) == ["cohort", "dataset", "settings", "verifier"]
    counts = shown["counts"]
    assert (counts["success"], counts["failure"], counts["infra_error"]) == (4, 2, 2)
    assert shown["not_yet_reported"]["value"] == 0
    page = trials(server, run, snapshot.round_id)
    assert {t: page[t]["status"] for t in OUTCOMES} == {t: s for t, (s, _) in OUTCOMES.items()}
    boom = page["boom-r1"]
    assert (boom["status"], boom["error_type"], boom["reason_code"]) == (
        "infra_error",
        "RuntimeError",
        "sample_error",
    )
    assert boom["reason"] == "RuntimeError('the sandbox went away')"
    history = server.get(
        f"/api/v1/projects/{PROJECT}/runs/{run}/evaluation/{snapshot.round_id}/trials/boom-r1"
    )
    assert len(history["attempts"]) == 2  # Inspect's retry, then the error it logged
    index = trajectories(server, run, snapshot.round_id)
    assert len(index) == 8
    (item,) = [i for i in index if i["trial_id"] == "add-2-r0"]
    stored = body(server, run, item)
    assert [m["role"] for m in stored["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert stored["messages"][2]["tool_calls"][0]["name"] == "add"
    assert [e["fields"]["checkpoint"] for e in events(server, run, CHECKPOINT_EVENT)] == [
        "mockllm/model"
    ]
    (task,) = events(server, run, TASK_EVENT)
    assert task["fields"]["verdict"] == "match"
    # The replay of the same snapshot added nothing.
    (replay,) = [line for line in done.stderr.splitlines() if "delivered:" in line][1:]
    assert "(0 new," in replay, replay
