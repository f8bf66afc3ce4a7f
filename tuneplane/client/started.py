"""The attempt a server started for a run: what ``tuneplane run`` reports to, and what
``tuneplane sync`` records for an offline attempt so that a sync cut short continues it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StartedAttempt:
    attempt: int
    token: str
    #: Where the attempt reports to: the server's TUNEPLANE_INGEST_URL, else the server.
    endpoint: str

    def __repr__(self) -> str:  # the token never prints
        return f"StartedAttempt({self.attempt})"
