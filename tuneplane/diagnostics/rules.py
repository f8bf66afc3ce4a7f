"""``diagnose(evidence)``: every finding the rules make of a failed attempt, the surest
first. Rules only read the evidence; none of them can change a run."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from dataclasses import replace
from typing import Final

from tuneplane.diagnostics.evidence import (
    CONFIDENCE_ORDER,
    Citation,
    Evidence,
    Finding,
    LogLine,
)
from tuneplane.diagnostics.patterns import PATTERNS, Pattern
from tuneplane.diagnostics.redact import redact_text
from tuneplane.diagnostics.tracebacks import last_traceback
from tuneplane.diagnostics.trends import metric_findings

#: Lines of the tail one finding cites at most.
MAX_CITED_LINES: Final = 5
#: Exit codes a shell or a launcher reports for a process killed by a signal.
_KILLED: Final = {137, -9}
_TERMINATED: Final = {143, -15}


def shorten(text: str, limit: int = 300) -> str:
    """``text`` cut at a word within ``limit`` characters, the cut marked."""
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    return cut.rstrip() + " …"


def _cite(line: LogLine) -> Citation:
    return Citation(line=line.index, text=line.text[:500], seq=line.seq)


def _pattern_finding(pattern: Pattern, evidence: Evidence) -> Finding | None:
    cited = [
        line
        for line in evidence.lines
        if pattern.shows.search(line.text)
        and not (pattern.unless is not None and pattern.unless.search(line.text))
    ]
    if not cited:
        return None
    more = f" (and {len(cited) - 1} more lines)" if len(cited) > 1 else ""
    return Finding(
        pattern.code,
        pattern.title,
        pattern.confidence,
        f"{shorten(cited[0].text.strip())}{more}",
        pattern.next_action,
        tuple(_cite(line) for line in cited[:MAX_CITED_LINES]),
    )


def _exception_finding(evidence: Evidence) -> Finding | None:
    parsed = last_traceback(evidence.lines)
    if parsed is None:
        return None
    frame = parsed.user_frame
    where = (
        f" in {frame.function} ({frame.path}, line {frame.line})"
        if frame is not None
        else " (no frame of the job's own code: raised inside a library)"
    )
    message = f": {shorten(parsed.message)}" if parsed.message else ""
    return Finding(
        "python_exception",
        f"The job raised {parsed.exception_type}",
        "certain",
        f"{parsed.exception_type}{message}{where}",
        "Read the traceback from its innermost frame of your code"
        + (f" ({frame.path}:{frame.line})" if frame is not None else "")
        + "; the findings above, when there are any, say what the error usually means.",
        (_cite(parsed.start), _cite(parsed.exception_line)),
    )


def _exit_findings(evidence: Evidence) -> Iterator[Finding]:
    code = evidence.exit_code
    if code in _KILLED:
        yield Finding(
            "host_oom",
            "The process was killed (SIGKILL), most often by the kernel's OOM killer",
            "likely",
            f"exit code {code}: killed by signal {signal.SIGKILL.name}",
            "Check the node's kernel log (dmesg) for the OOM killer; give the job more host "
            "memory or lower what it holds in RAM.",
        )
    elif code in _TERMINATED:
        yield Finding(
            "preempted",
            "The process was told to stop (SIGTERM)",
            "possible",
            f"exit code {code}: terminated by signal {signal.SIGTERM.name} (a scheduler, a "
            "preemption or a person)",
            "Resume from the last checkpoint; if a scheduler stopped it, check its time limit "
            "and preemption policy.",
        )
    if evidence.ending == "lost":
        yield Finding(
            "heartbeat_lost",
            "The job stopped sending heartbeats",
            "possible",
            "no heartbeat arrived for longer than the timeout: the process, its node or the "
            "network between them went away without reporting an end",
            "Check the node (was it rebooted, preempted, out of memory?) and the job's "
            "scheduler log.",
        )


def _transport_findings(evidence: Evidence) -> Iterator[Finding]:
    reasons = evidence.transport.get("dropped_by_reason") or {}
    unreachable = reasons.get("server unreachable", 0) if isinstance(reasons, dict) else 0
    if unreachable:
        yield Finding(
            "ingest_unreachable",
            "The telemetry server could not be reached",
            "certain",
            f"the sender dropped {unreachable} points because the server was unreachable",
            "Check TUNEPLANE_URL / TUNEPLANE_INGEST_URL from the training node.",
        )


def diagnose(evidence: Evidence) -> list[Finding]:
    """Every finding, one per code (the surest kept), ordered by confidence."""
    found: list[Finding] = []
    for pattern in PATTERNS:
        finding = _pattern_finding(pattern, evidence)
        if finding is not None:
            found.append(finding)
    found += metric_findings(evidence.series)
    found += _exit_findings(evidence)
    found += _transport_findings(evidence)
    exception = _exception_finding(evidence)
    best: dict[str, Finding] = {}
    for finding in found:
        kept = best.get(finding.code)
        if kept is None or CONFIDENCE_ORDER[finding.confidence] < CONFIDENCE_ORDER[kept.confidence]:
            best[finding.code] = finding
    if "time_limit" in best:
        best.pop("preempted", None)  # the SIGTERM came from the time limit
    ordered = sorted(best.values(), key=lambda f: CONFIDENCE_ORDER[f.confidence])
    # The exception comes after what explains it: it says where, the others say why.
    found = ordered + ([exception] if exception is not None else [])
    # What a diagnosis stores and shows quotes the log: never a secret it held.
    return [_redacted(finding) for finding in found]


def _redacted(finding: Finding) -> Finding:
    citations = tuple(
        c if c.text is None else replace(c, text=redact_text(c.text)) for c in finding.citations
    )
    return replace(finding, detail=redact_text(finding.detail), citations=citations)
