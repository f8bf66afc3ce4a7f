"""Events read from another tool's files, with the times they happened.

An importer turns files into :class:`RunChunk` values; ``store`` writes each chunk in one
transaction. Unlike events sent live, an imported event keeps its original time, and a
value that was NaN or an infinity is kept as an invalid point (counted and shown, never a
number), as the SDK's scalars are. Event and alert IDs are the other tool's own (or derived
from the content), so importing the same files again adds nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tuneplane.contract.arena import AlertLevel
from tuneplane.contract.protocol import InvalidKind


@dataclass(frozen=True, slots=True)
class ImportedLog:
    """One logged event: its values at ``step``, at ``time`` (seconds since the epoch)."""

    log_id: str
    step: int
    time: float
    values: dict[str, float]
    #: Series whose value at this step was NaN or an infinity, with which.
    invalid: dict[str, InvalidKind] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ImportedAlert:
    alert_id: str
    title: str
    text: str | None
    level: AlertLevel
    step: int | None
    time: float


@dataclass(frozen=True, slots=True)
class RunChunk:
    """Part of one run, written in one transaction: the run is created with ``config`` if it
    does not exist (one that exists keeps its own), at ``started`` (its first event's time)."""

    project: str
    run: str
    config: dict[str, Any] | None
    started: float
    logs: tuple[ImportedLog, ...] = ()
    alerts: tuple[ImportedAlert, ...] = ()
    #: Source rows this chunk stands for (progress counts them).
    rows: int = 0
    #: The group a new run is given (Trackio's ``init(group=)``).
    group: str | None = None
    #: The names the run and its project were given, where they are not their IDs.
    display_name: str | None = None
    project_display_name: str | None = None


@dataclass(frozen=True, slots=True)
class ChunkOutcome:
    """What storing a chunk did; a second import of the same files is all duplicates."""

    run_id: int
    run_created: bool
    #: The run existed with another config, which it keeps.
    config_kept: bool
    logs_new: int
    logs_duplicate: int
    points: int
    invalid: int
    alerts_new: int
    alerts_duplicate: int


@dataclass(slots=True)
class ImportTotals:
    """The sum of an import's outcomes, for its summary line."""

    projects: set[str] = field(default_factory=set)
    runs: set[tuple[str, str]] = field(default_factory=set)
    runs_created: int = 0
    configs_kept: int = 0
    logs_new: int = 0
    logs_duplicate: int = 0
    points: int = 0
    invalid: int = 0
    alerts_new: int = 0
    alerts_duplicate: int = 0

    def add(self, chunk: RunChunk, outcome: ChunkOutcome) -> None:
        self.projects.add(chunk.project)
        self.runs.add((chunk.project, chunk.run))
        self.runs_created += outcome.run_created
        self.configs_kept += outcome.config_kept
        self.logs_new += outcome.logs_new
        self.logs_duplicate += outcome.logs_duplicate
        self.points += outcome.points
        self.invalid += outcome.invalid
        self.alerts_new += outcome.alerts_new
        self.alerts_duplicate += outcome.alerts_duplicate

    def summary(self) -> str:
        """One line: ``2 projects, 3 runs (3 new): 120 points (2 NaN/inf) in 40 events
        and 1 alert stored; 0 events and 0 alerts were already stored``."""
        return (
            f"{len(self.projects)} projects, {len(self.runs)} runs ({self.runs_created} new): "
            f"{self.points} points ({self.invalid} NaN/inf) in {self.logs_new} events and "
            f"{self.alerts_new} alerts stored; {self.logs_duplicate} events and "
            f"{self.alerts_duplicate} alerts were already stored"
        )
