"""lm-eval import: the fixture's real files and cases of our own, from files to snapshot."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.importers.lm_eval_runs import LMEH, STAMP, record, results, sha, write_run
from tests.shared_fixtures import TWINS, real_fixture
from tuneplane.contract.trajectories import selection_rank
from tuneplane.importers.lm_eval import SAMPLE_EVENT, TASK_EVENT, import_lm_eval, trial_id
from tuneplane.importers.problems import ImportRefused
from tuneplane.importers.snapshot import read_snapshot


def only(path: Path, **options: Any) -> dict[str, Any]:
    imported = import_lm_eval(str(path), **options)
    assert len(imported.snapshots) == 1
    return next(iter(imported.snapshots.values())).document


def sample_events(snapshot: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        e["fields"]["trial_id"]: e["fields"]
        for e in snapshot["events"]
        if e["name"] == SAMPLE_EVENT
    }


def refusal(path: Path) -> list[str]:
    with pytest.raises(ImportRefused) as refused:
        import_lm_eval(str(path))
    return [str(problem) for problem in refused.value.problems]


@dataclass(frozen=True)
class CutRun:
    """A run whose samples file was cut to a few documents, and what its import is."""

    directory: Path
    task: dict[str, str]
    expected: int
    checkpoint: str
    verdicts: list[tuple[str, str, float]]
    task_hash: str

    @property
    def samples(self) -> Path:
        return next(self.directory.glob("samples_*.jsonl"))


REAL = CutRun(
    LMEH,
    {"name": "gsm8k", "version": "3.0"},
    1319,
    "tinyllama",
    [("doc-0", "failure", 0.0), ("doc-1", "failure", 0.0), ("doc-2", "failure", 0.0)],
    "2330f4ebfcccaf66a892922df2819cdb1f118e448d076d3f42bdde4177678ac7",
)
#: The twin: lm_eval 0.4.8's files of a run of our own (arithmetic, a local model).
TWIN = CutRun(
    TWINS / "lm-eval" / "arithmetic",
    {"name": "arithmetic_2dm", "version": "1.0"},
    2000,
    "qwen-tiny",
    [("doc-0", "success", 1.0), ("doc-1", "failure", 0.0), ("doc-2", "success", 1.0)],
    "66968361bfa0d27845c483fb3e8fa417a3d0cb2c9ed4b1b8be71ee7dd9ee297f",
)


@pytest.mark.parametrize(
    "run", [pytest.param(REAL, marks=real_fixture, id="real"), pytest.param(TWIN, id="twin")]
)
def test_a_cut_run_is_one_round_of_its_documents_three_reported(run: CutRun) -> None:
    snapshot = only(run.directory)
    population = snapshot["population"]
    assert population["expected"] == run.expected
    assert population["task"] == run.task
    assert "text_samples" not in population
    # The file was cut to 3 documents: which documents and targets make the population
    # cannot be attested, so those digests are missing, not made up.
    assert sorted(population["digests"]) == ["settings", "verifier"]
    assert snapshot["round_id"].startswith(f"{run.task['name']}-")
    assert snapshot["checkpoint"] == {"name": run.checkpoint}
    trials = [(t["trial_id"], t["status"], t["reward"]) for t in snapshot["trials"]]
    assert trials == run.verdicts
    lines = [json.loads(line) for line in run.samples.read_text().splitlines()]
    events = sample_events(snapshot)
    for line, (_, _, reward) in zip(lines, run.verdicts, strict=True):
        fields = events[trial_id(line["doc_id"])]
        for name in ("doc_hash", "prompt_hash", "target_hash"):
            assert fields[name] == line[name]
        assert fields["exact_match,strict-match"] == reward
        # The cut file has no flexible-extract line: shown as missing.
        assert fields["missing"] == "filter flexible-extract"
    task = next(e["fields"] for e in snapshot["events"] if e["name"] == TASK_EVENT)
    assert task["verdict"] == "exact_match,strict-match"
    assert task["task_hash"] == run.task_hash
    assert (task["n_samples_effective"], task["documents_with_records"]) == (run.expected, 3)
    # A cohort of more than 128 keeps 32 texts: all three are among them.
    assert [t["trial_id"] for t in snapshot["trajectories"]] == ["doc-0", "doc-1", "doc-2"]
    first = snapshot["trajectories"][0]
    assert first["messages"][0] == {
        "role": "user",
        "content": lines[0]["arguments"]["gen_args_0"]["arg_0"],
    }
    assert first["messages"][1] == {"role": "assistant", "content": lines[0]["resps"][0][0]}
    assert sha(first["messages"][0]["content"]) == lines[0]["prompt_hash"]
    assert (first["capture_policy"], first["complete"]) == ("sampled", False)
    # The results file itself names the directory's one run too.
    assert only(next(run.directory.glob("results_*.json"))) == snapshot


def test_binary_values_decide_and_anything_else_is_kept_unscored(tmp_path: Path) -> None:
    values: list[object] = [1.0, 0, True, False, 0.5, 2, [["ref"], ["pred"]], None]
    records: list[Any] = []
    for doc_id, value in enumerate(values):
        records.append(record(doc_id, value))
        records.append(record(doc_id, 1.0, "flexible-extract"))
    run = write_run(tmp_path / "out", results({"t": len(values)}), {"t": records})
    snapshot = only(run)
    outcomes = [(t["status"], t["reward"]) for t in snapshot["trials"]]
    assert outcomes == [
        ("success", 1.0),
        ("failure", 0.0),
        ("success", 1.0),
        ("failure", 0.0),
        ("unscored", 0.5),
        ("unscored", 2.0),
        ("unscored", None),
        ("unscored", None),
    ]
    # Why each unscored document has no verdict is sent with it; a verdict needs no reason.
    reasons = [(t.get("reason_code"), t.get("reason")) for t in snapshot["trials"]]
    assert reasons[:4] == [(None, None)] * 4
    assert reasons[4] == ("non_binary_value", "exact_match,strict-match = 0.5: not binary")
    assert {code for code, _ in reasons[4:]} == {"non_binary_value"}
    events = sample_events(snapshot)
    assert events["doc-4"]["exact_match,strict-match"] == 0.5
    assert events["doc-4"]["exact_match,flexible-extract"] == 1.0
    assert events["doc-6"]["not_numbers"] == "exact_match,strict-match"
    assert "missing" not in events["doc-0"]
    # Every document has records under both filters, with hashes: all four digests.
    assert sorted(snapshot["population"]["digests"]) == [
        "cohort",
        "dataset",
        "settings",
        "verifier",
    ]


def test_the_verdict_is_the_first_figure_the_results_file_lists(tmp_path: Path) -> None:
    document = results({"t": 1})
    figures = document["results"]["t"]
    document["results"]["t"] = {k: figures[k] for k in reversed(list(figures))}
    records = [record(0, 0.0), record(0, 1.0, "flexible-extract")]
    assert only(write_run(tmp_path / "a", document, {"t": records}))["trials"][0]["status"] == (
        "success"
    )
    document["higher_is_better"]["t"]["exact_match"] = False
    trial = only(write_run(tmp_path / "b", document, {"t": records}))["trials"][0]
    assert (trial["status"], trial["reward"]) == ("unscored", 1.0)
    assert (trial["reason_code"], trial["reason"]) == (
        "lower_is_better",
        "exact_match is binary but lower is better: no verdict",
    )


def test_a_cut_last_line_is_skipped_with_a_warning_and_its_document_is_not_reported(
    tmp_path: Path,
) -> None:
    whole = json.dumps(record(1, 1.0))
    run = write_run(
        tmp_path / "out", results({"t": 2}), {"t": [record(0, 1.0)]}, tail=whole[: len(whole) // 2]
    )
    imported = import_lm_eval(str(run))
    (warning,) = imported.warnings
    assert f"samples_t_{STAMP}.jsonl: line 2: cut short" in warning
    snapshot = imported.snapshots["t"].document
    assert [t["trial_id"] for t in snapshot["trials"]] == ["doc-0"]
    assert snapshot["population"]["expected"] == 2
    assert "cohort" not in snapshot["population"]["digests"]
    task = next(e["fields"] for e in snapshot["events"] if e["name"] == TASK_EVENT)
    assert task["cut_line_skipped"] == 2
    # A whole last line without its end of line is a record like any other.
    run = write_run(tmp_path / "whole", results({"t": 2}), {"t": [record(0, 1.0)]}, tail=whole)
    assert len(import_lm_eval(str(run)).snapshots["t"].document["trials"]) == 2


def test_bad_records_are_refused_naming_the_file_line_and_rule(tmp_path: Path) -> None:
    records: list[Any] = [
        record(0, 1.0),
        "{not json",
        record(0, 0.0),
        {**record(1, 1.0), "doc_id": "one"},
        record(2, 1.0, prompt_hash="ABC"),
    ]
    run = write_run(tmp_path / "out", results({"t": 5}), {"t": [*records, record(3, 1.0)]})
    name = f"samples_t_{STAMP}.jsonl"
    problems = refusal(run)
    assert len(problems) == 4
    assert f"{name}: line 2: is not JSON" in problems[0]
    assert (
        f"{name}: line 3: doc_id 0 under filter 'strict-match' again (first on line 1)"
        in (problems[1])
    )
    assert problems[2].endswith(f"{name}: line 4.doc_id: required: a nonnegative integer")
    assert problems[3].endswith(f"{name}: line 5.prompt_hash: must be a SHA-256")


def test_the_results_file_must_declare_each_population(tmp_path: Path) -> None:
    document = results({"t": 2})
    del document["n-samples"]["t"]
    (problem,) = refusal(write_run(tmp_path / "a", document, {"t": [record(0, 1.0)]}))
    assert problem.endswith(f"results_{STAMP}.json: n-samples.t.effective: required: the "
                            "nonnegative number of documents evaluated (the population, after "
                            "any --limit)")  # fmt: skip
    document = results({"t": 1})
    (problem,) = refusal(write_run(tmp_path / "b", document, {"t": [record(0, 1), record(1, 1)]}))
    assert "holds 2 documents, more than the 1 of n-samples.t.effective" in problem
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / f"results_{STAMP}.json").write_text("{}")
    problems = refusal(tmp_path / "c")
    assert problems[0].endswith("results: required: an object by task (written by lm-eval 0.4)")


def test_a_limited_run_declares_its_effective_population_and_groups_are_not_rounds(
    tmp_path: Path,
) -> None:
    document = results({"a": 2, "b": 1}, group_subtasks={"g": ["a", "b"], "a": [], "b": []})
    document["results"]["g"] = {"exact_match,none": 0.5}
    document["n-samples"]["a"] = {"original": 1319, "effective": 2}
    document["config"]["limit"] = 2
    run = write_run(tmp_path / "out", document, {"a": [record(0, 1.0), record(1, 0.0)]})
    imported = import_lm_eval(str(run))
    assert sorted(imported.snapshots) == ["a", "b"]
    a, b = imported.snapshots["a"].document, imported.snapshots["b"].document
    assert a["population"]["expected"] == 2
    task = next(e["fields"] for e in a["events"] if e["name"] == TASK_EVENT)
    assert (task["limit"], task["n_samples_original"]) == (2, 1319)
    # No samples file: the round is declared, nothing reported, and it says so.
    assert (b["population"]["expected"], b["trials"]) == (1, [])
    assert imported.warnings == (f"{run / f'results_{STAMP}.json'}: b: no samples file",)
    task_b = next(e["fields"] for e in b["events"] if e["name"] == TASK_EVENT)
    assert task_b["missing"] == "samples_file"


def test_text_cap_follows_the_population_and_the_job_override(tmp_path: Path) -> None:
    small = write_run(
        tmp_path / "small", results({"t": 128}), {"t": [record(i, 1) for i in range(128)]}
    )
    assert len(only(small)["trajectories"]) == 128
    big = write_run(
        tmp_path / "big", results({"t": 200}), {"t": [record(i, 1) for i in range(200)]}
    )
    kept = [t["trial_id"] for t in only(big)["trajectories"]]
    lowest = sorted((trial_id(i) for i in range(200)), key=selection_rank)[:32]
    assert sorted(kept) == sorted(lowest)
    none = only(big, text_samples=0)
    assert (none["trajectories"], none["population"]["text_samples"]) == ([], 0)
    assert len(only(big, text_samples=5)["trajectories"]) == 5


def test_identity_and_what_the_checkpoint_keeps_of_the_model_arguments(tmp_path: Path) -> None:
    records = [record(0, 1.0)]
    first = only(write_run(tmp_path / "a", results({"t": 1}), {"t": records}))
    again = only(write_run(tmp_path / "b", results({"t": 1}), {"t": records}))
    changed = only(write_run(tmp_path / "c", results({"t": 1}), {"t": [record(0, 0.0)]}))
    assert first["round_id"] == again["round_id"] != changed["round_id"]
    assert first["checkpoint"] == {"name": "org/m@step-9"}
    assert "sk-1" not in json.dumps(first)
    assert "secret" not in json.dumps(first["population"])
    # The model's endpoint copied into the task's metadata is no part of the protocol.
    other = results({"t": 1})
    other["configs"]["t"]["metadata"]["base_url"] = "http://elsewhere:2"
    other["model_name"] = "org/other"
    second = only(write_run(tmp_path / "d", other, {"t": records}))
    assert second["population"]["digests"] == first["population"]["digests"]


def test_log_likelihood_requests_become_prompts_and_scored_answers(tmp_path: Path) -> None:
    choices = {
        "arguments": {
            "gen_args_0": {"arg_0": "Q: sky?\nA:", "arg_1": " blue"},
            "gen_args_1": {"arg_0": "Q: sky?\nA:", "arg_1": " green"},
        },
        "resps": [[[-1.5, True]], [[-7.25, False]]],
    }
    run = write_run(tmp_path / "out", results({"t": 1}), {"t": [record(0, 1.0, **choices)]})
    (trajectory,) = only(run)["trajectories"]
    assert [(m["role"], m["content"]) for m in trajectory["messages"]] == [
        ("user", "Q: sky?\nA: blue"),
        ("assistant", "[-1.5, true]"),
        ("user", "Q: sky?\nA: green"),
        ("assistant", "[-7.25, false]"),
    ]


def test_a_directory_of_two_runs_is_refused_and_the_command_writes_per_task(
    tmp_path: Path,
) -> None:
    run = write_run(tmp_path / "out", results({"t": 1, "u": 1}), {"t": [record(0, 1.0)]})
    (run / "results_2025-05-01T00-00-00.json").write_text("{}")
    (problem,) = refusal(run)
    assert "holds 2 results files" in problem
    (run / "results_2025-05-01T00-00-00.json").unlink()
    out = tmp_path / "snapshots"
    command = [sys.executable, "-m", "tuneplane.cli", "import", "lm-eval", str(run), "--out"]
    done = subprocess.run([*command, str(out)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["t.json", "u.json"]
    assert read_snapshot(str(out / "t.json")).trials[0]["status"] == "success"
    assert "2 snapshots written" in done.stderr
    (out / "stale.json").write_text("{}")
    done = subprocess.run([*command, str(out)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "holds other snapshots (stale.json): use a new directory" in done.stderr
    assert "nothing was written or uploaded" in done.stderr
