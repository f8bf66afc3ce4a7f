"""The optional written explanation: the same evidence the rules read, bounded and with
secrets taken out (:mod:`tuneplane.diagnostics.redact`), as the messages of an
OpenAI-compatible chat completion. Building the request and reading the answer are pure; the
server sends it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import orjson

from tuneplane.diagnostics.evidence import Evidence, Finding
from tuneplane.diagnostics.redact import redact_config, redact_text

#: What an explanation is sent at most: the log tail's last lines and characters, and the
#: config's bytes.
EXPLAIN_LINES: Final = 150
EXPLAIN_CHARS: Final = 24_000
EXPLAIN_CONFIG_BYTES: Final = 4_000
EXPLANATION_MAX_CHARS: Final = 8_000

SYSTEM_PROMPT: Final = (
    "You explain why a machine-learning training job failed, for the engineer who runs it. "
    "You are given the end of its output, metric trends, its configuration and the findings "
    "of rule-based checks. Say what most likely happened and what to try next, in a few "
    "short paragraphs. Say when the evidence is not enough. Do not repeat the log."
)


def _log_tail(evidence: Evidence) -> str:
    lines = [f"[{line.stream}] {line.text}" for line in evidence.lines[-EXPLAIN_LINES:]]
    tail = "\n".join(lines)
    return tail[-EXPLAIN_CHARS:]


def _trends(evidence: Evidence) -> str:
    rows = []
    for series in evidence.series:
        values = [v for _, v in series.points]
        finite = [v for v in values if v is not None]
        invalid = len(values) - len(finite)
        if not values:
            continue
        last_step = series.points[-1][0]
        summary = (
            f"{series.name}: {len(values)} points to step {last_step}"
            + (f", first {finite[0]:g}, min {min(finite):g}, last {finite[-1]:g}" if finite else "")
            + (f", {invalid} NaN/inf" if invalid else "")
        )
        rows.append(summary)
    return "\n".join(rows) or "(no metrics)"


def request_body(model: str, evidence: Evidence, findings: Sequence[Finding]) -> dict[str, Any]:
    """The chat completion request, every part redacted."""
    redacted = redact_config(evidence.config or {})
    config = orjson.dumps(redacted, default=str)[:EXPLAIN_CONFIG_BYTES].decode(errors="replace")
    found = "\n".join(f"- {f.code} ({f.confidence}): {f.detail}" for f in findings) or "(none)"
    exit_code = "unknown" if evidence.exit_code is None else str(evidence.exit_code)
    user = (
        f"Ending: {evidence.ending}, exit code {exit_code}\n\n"
        f"Rule findings:\n{found}\n\nMetric trends:\n{_trends(evidence)}\n\n"
        f"Config:\n{config}\n\nEnd of the output:\n{_log_tail(evidence)}"
    )
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": redact_text(user)},
        ],
        "temperature": 0,
    }


def read_answer(body: object) -> str:
    """The explanation in an OpenAI-compatible answer; ValueError naming what is missing."""
    try:
        content = body["choices"][0]["message"]["content"]  # type: ignore[index]
    except (KeyError, IndexError, TypeError) as exc:
        raise ValueError("the answer has no choices[0].message.content") from exc
    if not isinstance(content, str) or not content.strip():
        raise ValueError("the answer's message content is empty")
    return content.strip()[:EXPLANATION_MAX_CHARS]
