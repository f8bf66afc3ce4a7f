"""What rounds' declarations recorded beside their digests, as the evaluation answers show
it: the planned trials that never got an outcome, by ID, and the protocol settings keys that
differ between two rounds whose settings digests do (contract/declared.py)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from sqlalchemy import Connection

from tuneplane.contract.declared import canonical_digest
from tuneplane.contract.secrets import REDACTED
from tuneplane.evaluation.protocol_diff import DIFFERENCES_SHOWN, differences, redacted_paths
from tuneplane.store import evaluation
from tuneplane.store.evaluation import RoundState
from tuneplane.store.observations import declared_records


def records(connection: Connection, run_id: int, attempt: int, round_id: str) -> dict[str, Any]:
    """The round's declaration's ``protocol`` and ``planned_trials`` (those it recorded)."""
    return declared_records(connection, run_id, attempt).get(round_id, {})


def planned_not_reported(
    connection: Connection, run_id: int, attempt: int, state: RoundState, record: dict[str, Any]
) -> dict[str, Any]:
    """The planned trials without an outcome, by ID, or why they cannot be named."""
    planned = record.get("planned_trials")
    if state.declaration is None:
        return {"trial_ids": None, "reason": "the round has no declaration"}
    if not isinstance(planned, list):
        return {
            "trial_ids": None,
            "reason": "the declaration lists no planned trial IDs (declared before they were "
            "recorded, by a producer that records none, or more than a declaration lists): "
            "only their count is known",
        }
    reported = evaluation.reported_among(connection, run_id, attempt, state.round_id, planned)
    return {"trial_ids": [t for t in planned if t not in reported], "reason": None}


def _verified(record: Any, digest: str | None) -> bool | None:
    """Whether the recorded settings are what the digest was taken over (None: a redacted
    value makes it impossible to tell)."""
    if REDACTED in str(record):
        return None
    return digest is not None and canonical_digest(record) == digest


def settings_differences(
    left: RoundState, right: RoundState, left_record: dict[str, Any], right_record: dict[str, Any]
) -> dict[str, Any] | None:
    """The keys of the recorded protocol settings that differ, when the two rounds declare
    different settings digests (None when they do not); where a side recorded no settings,
    said rather than guessed."""
    digests = [
        None if s.declaration is None else s.declaration.digests.get("settings")
        for s in (left, right)
    ]
    if None in digests or digests[0] == digests[1]:
        return None
    protocols = [left_record.get("protocol"), right_record.get("protocol")]
    sides = zip(("left", "right"), protocols, strict=True)
    missing = [side for side, p in sides if not isinstance(p, dict)]
    if missing:
        return {
            "compared": False,
            "reason": f"the {' and the '.join(missing)} round recorded no protocol settings "
            "(declared before they were recorded, by a producer that records none, or too "
            "large to record): only the digests are known to differ",
            "differences": [],
            "total": 0,
            "redacted": [],
            "verified": None,
        }
    a, b = (p for p in protocols if isinstance(p, dict))
    found = differences(a, b)
    hidden = redacted_paths(a, b)
    reason = None
    if not found:
        reason = (
            "no recorded key differs: the difference is in a redacted value ("
            + ", ".join(hidden)
            + ")"
            if hidden
            else "no recorded key differs, yet the digests do: a side's recorded settings are "
            "not what its digest was taken over"
        )
    return {
        "compared": True,
        "reason": reason,
        "differences": [asdict(d) for d in found[:DIFFERENCES_SHOWN]],
        "total": len(found),
        "redacted": hidden,
        "verified": {
            "left": _verified(a, digests[0]),
            "right": _verified(b, digests[1]),
        },
    }
