"""Failure diagnosis: rules over a failed attempt's evidence (log tail, metric trends,
transport health, outcomes, config), as pure functions. The server gathers the evidence
and records the findings; nothing here can change a run."""

from tuneplane.diagnostics import explain
from tuneplane.diagnostics.evidence import (
    Citation,
    Evidence,
    Finding,
    LogExtent,
    LogLine,
    Series,
)
from tuneplane.diagnostics.rules import diagnose
from tuneplane.diagnostics.search import find_hits

__all__ = [
    "Citation",
    "Evidence",
    "Finding",
    "LogExtent",
    "LogLine",
    "Series",
    "diagnose",
    "explain",
    "find_hits",
]
