"""What a diagnosis rests on, and what it says."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Confidence = Literal["certain", "likely", "possible"]
CONFIDENCE_ORDER: dict[str, int] = {"certain": 0, "likely": 1, "possible": 2}


@dataclass(frozen=True, slots=True)
class LogLine:
    """One output line of the attempt; ``index`` is its place in the attempt's log (from
    0, in the order of the job's numbering), for citing."""

    index: int
    stream: Literal["stdout", "stderr"]
    text: str
    #: Where the line is stored (its attempt's sequence number), for a link to it.
    seq: int | None = None


@dataclass(frozen=True, slots=True)
class Series:
    """The last points of one metric, in step order; None for a NaN or infinite value."""

    name: str
    points: Sequence[tuple[int, float | None]]


@dataclass(frozen=True, slots=True)
class LogExtent:
    """How much of the attempt's log the evidence rests on: the store held ``stored``
    lines, the search for signatures read the last ``searched`` of them, and ``missing``
    lines the job numbered never reached the store (gaps in their sequence numbers)."""

    stored: int
    searched: int
    missing: int = 0
    #: Why the search stopped before the log's start, when it did.
    stopped: str | None = None

    @property
    def cut(self) -> bool:
        return self.searched < self.stored or self.missing > 0

    def to_json(self) -> dict[str, Any]:
        """What a diagnosis says of the log it read: ``cut``, the lines stored, the lines
        read (the last ones), those not read, those that never arrived, and why the
        search stopped."""
        return {
            "cut": self.cut,
            "lines": self.stored,
            "read": self.searched,
            "unread": self.stored - self.searched,
            "missing": self.missing,
            "stopped": self.stopped,
        }


@dataclass(frozen=True, slots=True)
class Evidence:
    #: The lines a diagnosis reads, in log order: the lines of the whole log that match a
    #: signature or belong to a traceback (with a few of their neighbours), then the tail.
    #: ``LogLine.index`` is a line's place in the attempt's log.
    lines: Sequence[LogLine] = ()
    exit_code: int | None = None
    #: ``failed`` (the process said so), or ``lost`` (its heartbeat stopped).
    ending: str = "failed"
    series: Sequence[Series] = ()
    #: The sender's last transport health (heartbeat counters), when it sent one.
    transport: Mapping[str, Any] = field(default_factory=dict)
    config: Mapping[str, Any] | None = None
    #: How much of the log was read; None when the lines are all there is.
    extent: LogExtent | None = None


@dataclass(frozen=True, slots=True)
class Citation:
    """A log line (``line`` and ``text``) or a metric point (``series``, ``step``,
    ``value``: None for NaN/inf) a finding rests on."""

    line: int | None = None
    text: str | None = None
    seq: int | None = None
    series: str | None = None
    step: int | None = None
    value: float | None = None

    def to_json(self) -> dict[str, Any]:
        if self.series is not None:
            return {"kind": "metric", "series": self.series, "step": self.step,
                    "value": self.value}  # fmt: skip
        return {"kind": "log", "line": self.line, "seq": self.seq, "text": self.text}


@dataclass(frozen=True, slots=True)
class Finding:
    code: str
    title: str
    confidence: Confidence
    #: What the evidence says, in a sentence or two (exception type, message, frame, …).
    detail: str
    next_action: str
    citations: tuple[Citation, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "title": self.title,
            "confidence": self.confidence,
            "detail": self.detail,
            "next_action": self.next_action,
            "citations": [c.to_json() for c in self.citations],
        }
