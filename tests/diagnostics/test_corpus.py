"""The rules on real failure logs (tests/diagnostics/corpus, each from a public report):
every expected finding is made, and no finding a near miss must not make."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tuneplane.diagnostics import Evidence, LogLine, diagnose

CORPUS = Path(__file__).with_name("corpus")
CASES: list[dict[str, Any]] = json.loads((CORPUS / "cases.json").read_text())


@pytest.mark.parametrize("case", CASES, ids=[case["file"] for case in CASES])
def test_a_real_log_gets_the_findings_it_shows(case: dict[str, Any]) -> None:
    text = (CORPUS / case["file"]).read_text(errors="replace")
    lines = [LogLine(i, case["stream"], line) for i, line in enumerate(text.splitlines())]
    evidence = Evidence(lines=lines, exit_code=case["exit_code"])
    found = {finding.code for finding in diagnose(evidence)}
    assert set(case["expect"]) - found == set(), case["note"]
    assert set(case.get("must_not", ())) & found == set(), case["note"]


def test_the_corpus_covers_every_failure_code_twice() -> None:
    expected = [code for case in CASES for code in case["expect"]]
    for code in ("cuda_oom", "host_oom", "nccl_timeout", "nccl_error", "nan_loss",
                 "missing_file", "dataset_error", "tokenizer_error", "python_exception",
                 "preempted", "disk_full", "ingest_unreachable"):  # fmt: skip
        assert expected.count(code) >= 2, code
