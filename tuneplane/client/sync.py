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

Journals are delivered attempt by attempt (the processes of one attempt each wrote their
own: the runner its log lines and status, the training command its points). An attempt's
final status goes last, once every journal of the attempt was delivered, so a run is never
shown finished while its points are still arriving. An offline attempt
(:mod:`tuneplane.client.offline`) is first created on the server with the user's API key
(``TUNEPLANE_API_KEY``, or the ``admin.key`` of ``TUNEPLANE_DIR``), then delivered as any.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

import httpx

from tuneplane.client import offline
from tuneplane.client.attempt_config import CONFIG_PATH
from tuneplane.client.attempt_spool import STATUS_PATH
from tuneplane.client.logs import LOGS_PATH
from tuneplane.client.runner import SetupFailed, api_key, create_run, setup_api, start_attempt
from tuneplane.client.sender import (
    ALERTS_PATH,
    OBSERVATIONS_PATH,
    SCALARS_PATH,
    TRAJECTORIES_PATH,
)
from tuneplane.client.spool import (
    Record,
    Target,
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
from tuneplane.client.started import StartedAttempt
from tuneplane.client.transport import SUPERSEDED, RetryPolicy, Transport
from tuneplane.contract.protocol import TERMINAL_STATUSES
from tuneplane.contract.settings import SettingError

#: The only routes a journal may name: a journal is a file, not a list of instructions.
ROUTES: Final = frozenset(
    {
        SCALARS_PATH,
        OBSERVATIONS_PATH,
        ALERTS_PATH,
        TRAJECTORIES_PATH,
        LOGS_PATH,
        STATUS_PATH,
        CONFIG_PATH,
    }
)
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


def final_status(record: Record) -> bool:
    """Whether a record is an attempt's final status (delivered after everything else)."""
    body = record.body
    return (
        record.path == STATUS_PATH
        and isinstance(body, dict)
        and body.get("status") in TERMINAL_STATUSES
    )


@dataclass(frozen=True, slots=True)
class _Delivery:
    """Where one attempt's journals go, and which of their records this pass sends."""

    server: str | None
    token: str | None = None  # an offline attempt's, once sync started it
    attempt: int | None = None
    endpoint: str | None = None
    finals: bool = False  # the final statuses only; else everything but them
    transport: httpx.BaseTransport | None = None


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
    delivery = _Delivery(server, transport=transport)
    result = _deliver(directory, replace(delivery, finals=False), progress, done, total)
    if result.complete and not result.removed:
        result = _deliver(directory, replace(delivery, finals=True), progress, done, total, result)
    return result


def _deliver(
    directory: Path,
    delivery: _Delivery,
    progress: Progress | None,
    done: int,
    total: int,
    result: JournalSynced | None = None,
) -> JournalSynced:
    """One pass over a journal: its records but the final statuses, or those only."""
    target = read_target(directory)
    if delivery.token is not None:
        target = replace(target, token=delivery.token, attempt=delivery.attempt)
    if result is None:
        what = f"{target.project}/{target.run} attempt {target.attempt}"
        result = JournalSynced(directory, what + (" (offline)" if target.group else ""))
    if is_locked(directory):
        result.problem = "a reporter is still writing it"
        return result
    pending, acks = _pending(directory)
    pending = [record for record in pending if final_status(record) == delivery.finals]
    endpoint = (delivery.server or delivery.endpoint or target.endpoint).rstrip("/")
    sender = Transport(endpoint, target.token, transport=delivery.transport)
    try:
        for index, record in enumerate(pending):
            if not _send(sender, directory, record, acks, result, target, endpoint):
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


def _send(
    sender: Transport,
    directory: Path,
    record: Record,
    acks: dict[int, bool],
    result: JournalSynced,
    target: Target,
    endpoint: str,
) -> bool:
    """Post one record and acknowledge it; False when the journal stops here."""
    if record.path not in ROUTES:
        result.problem = f"record {record.seq} names an unknown route {record.path!r}"
        return False
    outcome = sender.post(record.path, record.body, retry=SYNC_RETRY)
    if outcome.delivered or (outcome.rejected and not credential_refused(outcome)):
        append_ack(directory, record.seq, refused=not outcome.delivered)
        acks[record.seq] = not outcome.delivered
        counts = result.delivered if outcome.delivered else result.refused
        _add(counts, record.kind, record.count)
        if not outcome.delivered and not result.problem:
            result.problem = f"refused: {_refusal(outcome, target)}"
        return True
    result.problem = (
        _refusal(outcome, target)
        if outcome.rejected
        else f"{endpoint}: {outcome.reason} ({outcome.detail})"
    )
    return False


def _start_offline(
    group: Path,
    server: str | None,
    key: str | None,
    transport: httpx.BaseTransport | None,
) -> StartedAttempt:
    """The attempt of an offline group on the server: the one a previous sync started,
    or now (creating or resuming the run). SetupFailed or ValueError say why not."""
    found = offline.started(group)
    if found is not None:
        return found
    attempt = offline.find(group, group.parent.parent.name, group.parent.name)
    endpoint = (server or attempt.endpoint).rstrip("/")
    try:
        credential = key or api_key(None, os.environ)
    except SettingError as exc:
        raise SetupFailed(str(exc)) from exc
    api = setup_api(endpoint, credential, transport)
    try:
        differs = False
        try:
            create_run(api, attempt.project, attempt.run, attempt.config, attempt.meta)
        except SetupFailed as exc:
            if exc.status != 409 or attempt.config is None:
                raise
            differs = True  # the run exists with another config: it is this attempt's
            create_run(api, attempt.project, attempt.run, None)
        config = attempt.config if differs else None
        # The group's key: a sync cut short before it recorded the attempt gets it again.
        begun = start_attempt(api, attempt.project, attempt.run, config, key=attempt.key)
    finally:
        api.close()
    found = StartedAttempt(begun.attempt, begun.token, endpoint if server else begun.endpoint)
    offline.record_started(group, found)
    return found


def _sync_group(
    group: Path,
    journals: list[Path],
    delivery: _Delivery,
    key: str | None,
    progress: Progress | None,
    counts: list[int],
) -> list[JournalSynced]:
    """Deliver the journals of one attempt: everything but the final statuses, journal by
    journal, then the final statuses once all of that was delivered."""
    if any(is_locked(directory) for directory in journals):
        return [
            JournalSynced(directory, str(directory), problem="a reporter is still writing it")
            for directory in journals
        ]
    if group.name.startswith(offline.OFFLINE_PREFIX):
        try:
            found = _start_offline(group, delivery.server, key, delivery.transport)
        except (SetupFailed, ValueError) as exc:
            problem = f"could not create the offline run: {exc}"
            return [
                JournalSynced(directory, str(directory), problem=problem) for directory in journals
            ]
        delivery = replace(
            delivery, token=found.token, attempt=found.attempt, endpoint=found.endpoint
        )
    results: list[JournalSynced] = []
    for finals in (False, True):
        for index, directory in enumerate(journals):
            if finals and not all(result.complete for result in results):
                break
            if finals and results[index].removed:
                continue  # nothing was left of it after the first pass
            before = sum(results[index].delivered.values()) if finals else 0
            try:
                previous = results[index] if finals else None
                found_result = _deliver(
                    directory, replace(delivery, finals=finals), progress, counts[0], counts[1],
                    previous,
                )  # fmt: skip
            except (OSError, ValueError) as exc:
                found_result = JournalSynced(directory, str(directory), problem=str(exc))
            if finals:
                results[index] = found_result
            else:
                results.append(found_result)
            counts[0] += sum(found_result.delivered.values()) - before
            counts[0] += 0 if finals else sum(found_result.left.values())
    if group.name.startswith(offline.OFFLINE_PREFIX) and all(r.removed for r in results):
        with contextlib.suppress(OSError):
            offline.remove(group)
    return results


def sync(
    root: Path,
    *,
    server: str | None = None,
    progress: Progress | None = None,
    transport: httpx.BaseTransport | None = None,
    key: str | None = None,
) -> list[JournalSynced]:
    """Deliver every journal beneath ``root``, attempt by attempt, oldest first; what
    became of each. ``key`` creates offline runs (default: ``TUNEPLANE_API_KEY``, else
    the data directory's ``admin.key``)."""
    journals = find_journals(root)
    total = 0
    for directory in journals:
        with contextlib.suppress(OSError, ValueError):
            total += sum(record.count for record in _pending(directory)[0])
    groups: dict[Path, list[Path]] = {}
    for directory in journals:
        groups.setdefault(directory.parent, []).append(directory)
    results: list[JournalSynced] = []
    counts = [0, total]
    delivery = _Delivery(server, transport=transport)
    for group, members in groups.items():
        results += _sync_group(group, members, delivery, key, progress, counts)
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
