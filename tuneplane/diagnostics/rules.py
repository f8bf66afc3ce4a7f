"""``diagnose(evidence)``: every finding the rules make of a failed attempt, the surest
first. Rules only read the evidence; none of them can change a run."""

from __future__ import annotations

import signal
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Final

from tuneplane.diagnostics.evidence import (
    CONFIDENCE_ORDER,
    Citation,
    Evidence,
    Finding,
    LogLine,
)
from tuneplane.diagnostics.patterns import NEAR_LINES, PATTERNS, Pattern
from tuneplane.diagnostics.precedence import ordered
from tuneplane.diagnostics.redact import redact_text
from tuneplane.diagnostics.tracebacks import first_cause, tracebacks
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


def _near(pattern: Pattern, lines: Sequence[LogLine], indexes: list[int], at: int) -> bool:
    """Whether a line within NEAR_LINES of ``lines[at]`` matches the pattern's context."""
    assert pattern.with_context is not None
    index = lines[at].index
    start = bisect_left(indexes, index - NEAR_LINES)
    end = bisect_left(indexes, index + NEAR_LINES + 1)
    return any(pattern.with_context[1].search(lines[i].text) for i in range(start, end))


def _shows(pattern: Pattern, lines: Sequence[LogLine], indexes: list[int], at: int) -> bool:
    text = lines[at].text
    if pattern.unless is not None and pattern.unless.search(text):
        return False
    if pattern.shows.search(text):
        return True
    context = pattern.with_context
    return (
        context is not None and bool(context[0].search(text)) and _near(pattern, lines, indexes, at)
    )


def _pattern_finding(pattern: Pattern, evidence: Evidence, indexes: list[int]) -> Finding | None:
    lines = evidence.lines
    cited = [lines[at] for at in range(len(lines)) if _shows(pattern, lines, indexes, at)]
    if not cited:
        return None
    more = f" (and {len(cited) - 1} more lines)" if len(cited) > 1 else ""
    where = f" (line {cited[0].index})" if evidence.extent is not None else ""
    return Finding(
        pattern.code,
        pattern.title,
        pattern.confidence,
        f"{shorten(cited[0].text.strip())}{where}{more}",
        pattern.next_action,
        tuple(_cite(line) for line in cited[:MAX_CITED_LINES]),
    )


def _exception_finding(evidence: Evidence) -> Finding | None:
    found = tracebacks(evidence.lines)
    parsed = first_cause(found)
    if parsed is None:
        return None
    frame = parsed.user_frame
    where = (
        f" in {frame.function} ({frame.path}, line {frame.line})"
        if frame is not None
        else " (no frame of the job's own code: raised inside a library)"
    )
    message = f": {shorten(parsed.message)}" if parsed.message else ""
    line = f" (line {parsed.exception_line.index})" if evidence.extent is not None else ""
    later = [other for other in found if other.start.index > parsed.start.index]
    after = (
        f"; {len(later)} later traceback{'s' if len(later) > 1 else ''} followed it (the "
        f"last: {later[-1].exception_type})"
        if later
        else ""
    )
    return Finding(
        "python_exception",
        f"The job raised {parsed.exception_type}",
        "certain",
        f"{parsed.exception_type}{message}{where}{line}{after}",
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


def _signal_of(code: int) -> str | None:
    number = -code if code < 0 else code - 128 if 128 < code < 160 else None
    try:
        return None if number is None else signal.Signals(number).name
    except ValueError:
        return None


def _exit_status(evidence: Evidence) -> Finding | None:
    """What is known when no rule recognised the failure: the exit code and the last line
    of stderr (else of stdout), cited."""
    code = evidence.exit_code
    if code is None or code == 0:
        return None
    last = next((line for line in reversed(evidence.lines) if line.stream == "stderr"), None)
    if last is None and evidence.lines:
        last = evidence.lines[-1]
    name = _signal_of(code)
    said = [f"exit code {code}" + (f" (killed by {name})" if name else "")]
    if last is not None:
        said.append(f"its last {last.stream} line: {shorten(last.text.strip())}")
    else:
        said.append("the job wrote no output the server received")
    return Finding(
        "exit_status",
        f"No rule recognised the failure: the job exited with code {code}",
        "possible",
        "; ".join(said),
        "Read the end of the log in the Logs tab; the cited line is the last thing the job "
        "wrote to " + (last.stream if last is not None else "its output") + ".",
        () if last is None else (_cite(last),),
    )


def _extent_note(evidence: Evidence) -> Finding | None:
    extent = evidence.extent
    if extent is None or not extent.cut:
        return None
    said = []
    if extent.searched < extent.stored:
        unread = extent.stored - extent.searched
        said.append(
            f"the log holds {extent.stored:,} lines and the search read the last "
            f"{extent.searched:,} (from line {unread:,}): the first {unread:,} were not read"
            + (f" ({extent.stopped})" if extent.stopped else "")
        )
    if extent.missing:
        said.append(f"{extent.missing:,} lines the job printed never reached the server")
    return Finding(
        "log_cut",
        "The diagnosis did not read the whole log",
        "certain",
        "; ".join(said),
        "The findings rest on what was read: look at the unread part in the Logs tab.",
    )


def diagnose(evidence: Evidence) -> list[Finding]:
    """Every finding, one per code (the surest kept), the one that explains the others
    first (see ``precedence``)."""
    indexes = [line.index for line in evidence.lines]
    found: list[Finding] = []
    for pattern in PATTERNS:
        finding = _pattern_finding(pattern, evidence, indexes)
        if finding is not None:
            found.append(finding)
    found += metric_findings(evidence.series)
    found += _exit_findings(evidence)
    found += _transport_findings(evidence)
    best: dict[str, Finding] = {}
    for finding in found:
        kept = best.get(finding.code)
        if kept is None or CONFIDENCE_ORDER[finding.confidence] < CONFIDENCE_ORDER[kept.confidence]:
            best[finding.code] = finding
    exception = _exception_finding(evidence)
    result = ordered(list(best.values()), exception)
    if not result:
        fallback = _exit_status(evidence)
        result = [] if fallback is None else [fallback]
    note = _extent_note(evidence)
    result += [] if note is None else [note]
    # What a diagnosis stores and shows quotes the log: never a secret it held.
    return [_redacted(finding) for finding in result]


def _redacted(finding: Finding) -> Finding:
    citations = tuple(
        c if c.text is None else replace(c, text=redact_text(c.text)) for c in finding.citations
    )
    return replace(finding, detail=redact_text(finding.detail), citations=citations)
