"""``tuneplane sync [DIR]``: deliver what the durable spool journaled and the server did not
acknowledge.

Each journal (:mod:`tuneplane.client.spool`) is sent to its own run and attempt with the
ingest token it was written with, batch by batch in the order it was journaled, with the
IDs it was journaled with: observation events, alerts and trajectories are keyed by their
IDs, so one the server already has is a duplicate; points are keyed by (series, step), so a
point sent again is the same point. Order matters for points, as a later report of a step
corrects it: the reporter posts batches strictly in journal order (a batch the server did
not take stays first until it is taken or the reporter ends), and sync does too, so a batch
left unacknowledged is never older than an acknowledged one of the same journal and cannot
undo a correction.

A delivered batch is acknowledged in the journal at once, so an interrupted sync goes on
where it stopped and a second sync sends nothing. Segments whose every batch was
acknowledged are deleted, then the journal. A batch refused by rule (4xx) is acknowledged
as refused and counted; a refused credential (an expired token, a superseded attempt) or an
unreachable server stops that journal, which stays as it is for a later sync.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx

from tuneplane.client.sender import (
    ALERTS_PATH,
    OBSERVATIONS_PATH,
    SCALARS_PATH,
    TRAJECTORIES_PATH,
)
from tuneplane.client.spool import (
    Record,
    append_ack,
    credential_refused,
    find_journals,
    is_locked,
    read_acks,
    read_records,
    read_target,
    remove_journal,
    segments,
)
from tuneplane.client.transport import SUPERSEDED, RetryPolicy, Transport

#: The only routes a journal may name: a journal is a file, not a list of instructions.
ROUTES: Final = frozenset({SCALARS_PATH, OBSERVATIONS_PATH, ALERTS_PATH, TRAJECTORIES_PATH})
#: About 30 s per batch before a journal is given up as unreachable.
SYNC_RETRY: Final = RetryPolicy(attempts=6, first_delay=0.5, max_delay=8.0)

Progress = Callable[[int, int], None]


@dataclass
class JournalSynced:
    """What became of one journal: counts by kind (points, events, trajectories)."""

    directory: Path
    what: str  # "project/run attempt n"
    delivered: dict[str, int] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)
    left: dict[str, int] = field(default_factory=dict)
    problem: str = ""
    removed: bool = False

    @property
    def complete(self) -> bool:
        return not self.problem and not self.left and not self.refused


def _add(counts: dict[str, int], kind: str, count: int) -> None:
    counts[kind] = counts.get(kind, 0) + count


def _pending(directory: Path) -> tuple[list[Record], dict[int, bool]]:
    """The unacknowledged records in the order they were journaled, and the acks."""
    acks = read_acks(directory)
    pending = [
        record
        for segment in segments(directory)
        for record in read_records(segment)
        if record.seq not in acks
    ]
    return pending, acks


def _tidy(directory: Path, acks: dict[int, bool]) -> bool:
    """Delete the leading segments whose every record is acknowledged; the journal too
    when none is left. True when the journal is gone."""
    for segment in segments(directory):
        if any(record.seq not in acks for record in read_records(segment)):
            return False
        segment.unlink()
    remove_journal(directory)
    return True


def _refusal(outcome: Any, target: Any) -> str:
    code = outcome.reason
    if outcome.status == 409 and SUPERSEDED in code:
        return (
            f"a newer attempt of {target.project}/{target.run} has started, so attempt "
            f"{target.attempt}'s token no longer writes ({outcome.detail}); remove the "
            "journal to discard it"
        )
    if outcome.status == 401:
        return f"the ingest token was refused: {outcome.detail or code}"
    return f"{code}: {outcome.detail}" if outcome.detail else code


def sync_journal(
    directory: Path,
    *,
    server: str | None = None,
    progress: Progress | None = None,
    done: int = 0,
    total: int = 0,
    transport: httpx.BaseTransport | None = None,
) -> JournalSynced:
    """Deliver one journal's unacknowledged batches (see the module's docstring)."""
    target = read_target(directory)
    result = JournalSynced(directory, f"{target.project}/{target.run} attempt {target.attempt}")
    if is_locked(directory):
        result.problem = "a reporter is still writing it"
        return result
    pending, acks = _pending(directory)
    endpoint = (server or target.endpoint).rstrip("/")
    sender = Transport(endpoint, target.token, transport=transport)
    try:
        for index, record in enumerate(pending):
            if record.path not in ROUTES:
                result.problem = f"record {record.seq} names an unknown route {record.path!r}"
                break
            outcome = sender.post(record.path, record.body, retry=SYNC_RETRY)
            if outcome.delivered or (outcome.rejected and not credential_refused(outcome)):
                append_ack(directory, record.seq, refused=not outcome.delivered)
                acks[record.seq] = not outcome.delivered
                _add(
                    result.delivered if outcome.delivered else result.refused,
                    record.kind,
                    record.count,
                )
                if not outcome.delivered and not result.problem:
                    result.problem = f"refused: {_refusal(outcome, target)}"
            else:
                result.problem = (
                    _refusal(outcome, target)
                    if outcome.rejected
                    else f"{endpoint}: {outcome.reason} ({outcome.detail})"
                )
                for later in pending[index:]:
                    _add(result.left, later.kind, later.count)
                break
            done += record.count
            if progress is not None:
                progress(done, total)
    finally:
        sender.close()
    with contextlib.suppress(OSError):
        result.removed = _tidy(directory, acks)
    return result


def sync(
    root: Path,
    *,
    server: str | None = None,
    progress: Progress | None = None,
    transport: httpx.BaseTransport | None = None,
) -> list[JournalSynced]:
    """Deliver every journal beneath ``root``, oldest first; what became of each."""
    journals = find_journals(root)
    total = 0
    for directory in journals:
        with contextlib.suppress(OSError, ValueError):
            total += sum(record.count for record in _pending(directory)[0])
    results: list[JournalSynced] = []
    done = 0
    for directory in journals:
        try:
            found = sync_journal(
                directory,
                server=server,
                progress=progress,
                done=done,
                total=total,
                transport=transport,
            )
        except (OSError, ValueError) as exc:
            found = JournalSynced(directory, str(directory), problem=str(exc))
        results.append(found)
        done += sum(found.delivered.values()) + sum(found.refused.values())
        done += sum(found.left.values())
    return results


def describe(result: JournalSynced) -> str:
    """One line for stderr about one journal."""

    def counts(found: dict[str, int]) -> str:
        return ", ".join(f"{count} {kind}" for kind, count in sorted(found.items()))

    parts = [f"{result.what}: {counts(result.delivered) or 'nothing'} delivered"]
    if result.refused:
        parts.append(f"{counts(result.refused)} refused")
    if result.left:
        parts.append(f"{counts(result.left)} not delivered")
    line = "; ".join(parts)
    if result.problem:
        line += f" ({result.problem}; the journal stays at {result.directory})"
    return line
