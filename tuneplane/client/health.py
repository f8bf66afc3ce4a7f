"""Transport health: the counters a reporter keeps, as the user and the server see them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Health:
    """A snapshot of one reporter's delivery, in points (one metric at one step).

    ``queued`` points were accepted into the queue; each of them is, or will be, either
    ``sent`` (acknowledged by the server, NaN/inf ones included as ``invalid`` entries) or
    ``dropped``. ``dropped`` also counts points refused before queueing (queue full, bad
    input), so ``queued + refused == sent + dropped + queue_size`` where ``refused`` is the
    part of ``dropped`` that never entered the queue. ``queue_size`` counts the points
    waiting now, including a batch being sent; ``failed_sends`` counts failed HTTP attempts
    (each retry counts). ``dropped_by_reason`` says why points were lost.
    """

    queued: int = 0
    sent: int = 0
    dropped: int = 0
    failed_sends: int = 0
    queue_size: int = 0
    queue_capacity: int = 0
    invalid: int = 0
    dropped_by_reason: Mapping[str, int] = field(default_factory=dict)

    @property
    def offered(self) -> int:
        """Every point given to ``report()``: queued or refused at the door."""
        return self.sent + self.dropped + self.queue_size

    def heartbeat(self, interval: float) -> dict[str, float | int]:
        """The body of ``POST /api/v1/ingest/heartbeat``."""
        return {
            "queued": self.queued,
            "sent": self.sent,
            "dropped": self.dropped,
            "failed_sends": self.failed_sends,
            "queue_size": self.queue_size,
            "queue_capacity": self.queue_capacity,
            "interval": interval,
        }

    def loss_summary(self, noun: str = "points") -> str | None:
        """One line for stderr when anything was lost, else None::

        tuneplane: 0 of 2000 points delivered (2000 dropped: server unreachable)
        """
        lost = self.dropped + self.queue_size
        if not lost:
            return None
        reasons = dict(self.dropped_by_reason)
        if self.queue_size:
            reasons["still queued"] = self.queue_size
        if len(reasons) == 1:
            why = next(iter(reasons))
        else:
            why = ", ".join(f"{count} {reason}" for reason, count in _largest_first(reasons))
        return f"tuneplane: {self.sent} of {self.offered} {noun} delivered ({lost} dropped: {why})"


def _largest_first(reasons: Mapping[str, int]) -> list[tuple[str, int]]:
    return sorted(reasons.items(), key=lambda item: (-item[1], item[0]))
