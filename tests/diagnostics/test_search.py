"""The search of a whole log finds every line a rule would cite, tracebacks included: on
each log of the corpus, the findings made from the lines the search keeps (with their
context) are the findings made from every line."""

from __future__ import annotations

from typing import Any

import pytest

from tests.diagnostics.test_corpus import CASES, CORPUS
from tuneplane.diagnostics import Evidence, LogLine, diagnose, find_hits


def codes(lines: list[LogLine]) -> set[str]:
    return {f.code for f in diagnose(Evidence(lines=lines))}


@pytest.mark.parametrize("case", CASES, ids=[case["file"] for case in CASES])
def test_the_search_keeps_every_line_a_rule_cites(case: dict[str, Any]) -> None:
    texts = (CORPUS / case["file"]).read_text(errors="replace").splitlines()
    lines = [LogLine(i, "stderr", text) for i, text in enumerate(texts)]
    kept: set[int] = set()
    for at, _, context in find_hits(texts):
        kept.update(range(max(0, at - context), at + context + 1))
    searched = [line for line in lines if line.index in kept]
    assert codes(searched) == codes(lines)


def test_a_healthy_page_has_no_hits() -> None:
    page = [
        "{'loss': 0.4123, 'grad_norm': 1.21, 'learning_rate': 1e-05, 'epoch': 0.5}",
        "[INFO|trainer.py:2128] ***** Running training *****",
        " 45%|████▌     | 450/1000 [10:02<12:15,  1.34s/it]",
    ]
    assert find_hits(page) == []
