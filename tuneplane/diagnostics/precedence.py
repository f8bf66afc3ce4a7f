"""Which finding comes first: the one that explains the others. A job that fails on one
rank prints its cause once and its fallout many times (the other ranks' NCCL timeouts and
errors, a traceback while shutting down), so findings are put in this order:

1. causes said in as many words (``certain`` or ``likely``), the surest first, and
   between equally sure ones the first in the log;
2. fallout: an NCCL error, then an NCCL timeout, then a stopped heartbeat; these follow
   almost any failure of one rank, so they are the cause only when nothing above is found;
3. the sender's own count of points dropped while the server was unreachable: true, and
   worth saying, but tuneplane's sender never stops a job;
4. what is merely ``possible`` (a SIGTERM's exit code, a loss that rose, a throughput that
   fell), the first in the log first;
5. the Python exception: it says where, the others say why. But when nothing is said in
   as many words (no finding of 1.) and the exception came before the fallout, it is what
   the fallout follows (a bug on one rank, then the others' timeouts): it comes first.

One finding also removes another it explains: a scheduler's time limit removes the
SIGTERM's ``preempted``.
"""

from __future__ import annotations

from typing import Final

from tuneplane.diagnostics.evidence import CONFIDENCE_ORDER, Finding

#: Findings that follow almost any failure of one rank, in the order they explain each
#: other (an NCCL error makes the other ranks time out; either stops the heartbeat).
FALLOUT: Final = ("nccl_error", "nccl_timeout", "heartbeat_lost")
#: (explainer, explained): when both are found, the second is dropped.
EXPLAINS: Final = (("time_limit", "preempted"),)


def _first_line(finding: Finding) -> float:
    lines = [c.line for c in finding.citations if c.line is not None and c.series is None]
    return min(lines) if lines else float("inf")


def _rank(finding: Finding) -> tuple[int, int, float]:
    confidence = CONFIDENCE_ORDER[finding.confidence]
    if confidence == CONFIDENCE_ORDER["possible"]:
        return (3, 0, _first_line(finding))
    if finding.code == "ingest_unreachable" and not finding.citations:
        return (2, 0, 0.0)  # the transport's count, not a line the job printed
    if finding.code in FALLOUT:
        return (1, FALLOUT.index(finding.code), _first_line(finding))
    return (0, confidence, _first_line(finding))


def ordered(findings: list[Finding], exception: Finding | None) -> list[Finding]:
    """``findings`` (one per code) in the order above, ``exception`` last."""
    codes = {finding.code for finding in findings}
    dropped = {explained for explainer, explained in EXPLAINS if explainer in codes}
    kept = [finding for finding in findings if finding.code not in dropped]
    result = sorted(kept, key=_rank)
    if exception is None:
        return result
    if _explains_fallout(exception, result):
        return [exception, *result]
    return [*result, exception]


def _explains_fallout(exception: Finding, findings: list[Finding]) -> bool:
    """No cause said in as many words, and the exception line before every fallout line
    (an NCCL error raised as an exception is the fallout's own line, not before it)."""
    if any(_rank(finding)[0] == 0 for finding in findings):
        return False
    fallout = [_first_line(finding) for finding in findings if finding.code in FALLOUT]
    said = exception.citations[-1].line
    return bool(fallout) and said is not None and said < min(fallout)
