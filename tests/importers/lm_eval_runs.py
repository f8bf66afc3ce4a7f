"""lm-eval output directories written into a test's tmp_path, shaped as lm_eval 0.4.8
writes them (the fixture's layout), and the fixture itself."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from tests.importers.cohort import FIXTURES, TWINS

LMEH = FIXTURES / "lm-eval" / "containers-olot" / "tests" / "data" / "lmeh"
STAMP = "2025-04-30T18-24-41.082644"
#: The twin run (tests/fixtures/lm-eval/arithmetic): one task cut to three documents.
TWIN_RUN = TWINS / "lm-eval" / "arithmetic"
TWIN_STAMP = "2025-06-11T09-02-17.513208"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def results(tasks: dict[str, int], **fields: Any) -> dict[str, Any]:
    """A results file for ``tasks`` (name -> effective documents), two filters each, the
    verdict figure first as lm-eval lists it."""
    return {
        "results": {
            task: {
                "alias": task,
                "exact_match,strict-match": 0.5,
                "exact_match_stderr,strict-match": 0.1,
                "exact_match,flexible-extract": 0.6,
                "exact_match_stderr,flexible-extract": 0.1,
            }
            for task in tasks
        },
        "group_subtasks": {task: [] for task in tasks},
        "configs": {
            task: {
                "task": task,
                "output_type": "generate_until",
                "metric_list": [{"metric": "exact_match", "higher_is_better": True}],
                "filter_list": [{"name": "strict-match"}, {"name": "flexible-extract"}],
                "metadata": {"version": 3.0, "model": "m", "base_url": "http://secret:1"},
            }
            for task in tasks
        },
        "versions": dict.fromkeys(tasks, 3.0),
        "n-shot": dict.fromkeys(tasks, 5),
        "higher_is_better": {task: {"exact_match": True} for task in tasks},
        "n-samples": {task: {"original": n, "effective": n} for task, n in tasks.items()},
        "config": {"model": "hf", "model_args": "pretrained=org/m,revision=step-9,token=sk-1"},
        "task_hashes": {task: sha(task) for task in tasks},
        "lm_eval_version": "0.4.8",
        "model_name": "org/m",
        **fields,
    }


def record(
    doc_id: int, value: object, filter_name: str = "strict-match", **fields: Any
) -> dict[str, Any]:
    prompt = f"Question: what is {doc_id} + 1?\nAnswer:"
    return {
        "doc_id": doc_id,
        "doc": {"question": f"{doc_id} + 1", "answer": str(doc_id + 1)},
        "target": str(doc_id + 1),
        "arguments": {"gen_args_0": {"arg_0": prompt, "arg_1": {"until": ["\n"]}}},
        "resps": [[f" {doc_id + 1} because"]],
        "filtered_resps": [str(doc_id + 1)],
        "filter": filter_name,
        "metrics": ["exact_match"],
        "doc_hash": sha(f"doc {doc_id}"),
        "prompt_hash": sha(prompt),
        "target_hash": sha(str(doc_id + 1)),
        "exact_match": value,
        **fields,
    }


def write_run(
    directory: Path,
    document: dict[str, Any],
    samples: dict[str, list[Any]],
    *,
    tail: str = "",
) -> Path:
    """``results_<STAMP>.json`` and a samples file per task (records as JSON lines, then
    ``tail`` as it is: a cut line, say)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"results_{STAMP}.json").write_text(json.dumps(document))
    for task, records in samples.items():
        lines = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)
        (directory / f"samples_{task}_{STAMP}.jsonl").write_text(lines + tail)
    return directory
