"""Failure diagnosis: rules over a failed attempt's evidence (log tail, metric trends,
transport health, outcomes, config), as pure functions. The server gathers the evidence
and records the findings; nothing here can change a run."""

from tuneplane.diagnostics import explain
from tuneplane.diagnostics.evidence import Citation, Evidence, Finding, LogLine, Series
from tuneplane.diagnostics.rules import diagnose

__all__ = ["Citation", "Evidence", "Finding", "LogLine", "Series", "diagnose", "explain"]
