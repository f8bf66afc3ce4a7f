"""Transport health: the counters a reporter keeps, as the user and the server see them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Health:
    """A snapshot of one reporter's delivery, in points (one metric at one step) and in
    observation events.

    ``queued`` points were accepted into the queue; each of them is, or will be, either
    ``sent`` (acknowledged by the server, NaN/inf ones included as ``invalid`` entries) or
    ``dropped``. ``dropped`` also counts points refused before queueing (queue full, bad
    input), so ``queued + refused == sent + dropped + queue_size`` where ``refused`` is the
    part of ``dropped`` that never entered the queue. ``queue_size`` counts the points
    waiting now, including a batch being sent; ``failed_sends`` counts failed HTTP attempts
    (each retry counts, events' included). ``dropped_by_reason`` says why points were lost.
    The ``events_*`` counters say the same of observation events (``event()``,
    ``distribution()``, ...); an event the server already had counts as sent. The
    ``trajectories_*`` counters say it of trajectory documents (``trajectory()``), where
    ``trajectories_not_uploaded`` counts those the retention caps left out on purpose
    (neither sent nor dropped); a document the server already had, or indexed without its
    text, counts as sent. With the durable spool (``TUNEPLANE_SPOOL_DIR``), ``spooled``,
    ``events_spooled`` and ``trajectories_spooled`` count what is journaled on disk and not
    yet acknowledged (it waits for ``tuneplane sync``), a fourth end beside sent, dropped and
    queued; ``not_journaled`` counts, by kind, what a full spool did not journal.
    """

    queued: int = 0
    sent: int = 0
    dropped: int = 0
    failed_sends: int = 0
    queue_size: int = 0
    queue_capacity: int = 0
    invalid: int = 0
    dropped_by_reason: Mapping[str, int] = field(default_factory=dict)
    events_queued: int = 0
    events_sent: int = 0
    events_dropped: int = 0
    events_queue_size: int = 0
    events_queue_capacity: int = 0
    events_dropped_by_reason: Mapping[str, int] = field(default_factory=dict)
    trajectories_queued: int = 0
    trajectories_sent: int = 0
    trajectories_dropped: int = 0
    trajectories_queue_size: int = 0
    trajectories_queue_capacity: int = 0
    trajectories_not_uploaded: int = 0
    trajectories_dropped_by_reason: Mapping[str, int] = field(default_factory=dict)
    spooled: int = 0
    events_spooled: int = 0
    trajectories_spooled: int = 0
    not_journaled: Mapping[str, int] = field(default_factory=dict)

    @property
    def offered(self) -> int:
        """Every point given to ``report()``: queued or refused at the door."""
        return self.sent + self.dropped + self.queue_size + self.spooled

    def heartbeat(self, interval: float) -> dict[str, float | int]:
        """The body of ``POST /api/v1/ingest/heartbeat``."""
        return {
            "queued": self.queued,
            "sent": self.sent,
            "dropped": self.dropped,
            "failed_sends": self.failed_sends,
            "queue_size": self.queue_size,
            "queue_capacity": self.queue_capacity,
            "events_queued": self.events_queued,
            "events_sent": self.events_sent,
            "events_dropped": self.events_dropped,
            "events_queue_size": self.events_queue_size,
            "events_queue_capacity": self.events_queue_capacity,
            "trajectories_queued": self.trajectories_queued,
            "trajectories_sent": self.trajectories_sent,
            "trajectories_dropped": self.trajectories_dropped,
            "trajectories_queue_size": self.trajectories_queue_size,
            "trajectories_queue_capacity": self.trajectories_queue_capacity,
            "trajectories_not_uploaded": self.trajectories_not_uploaded,
            "interval": interval,
        }

    def loss_summary(self) -> str | None:
        """One line for stderr for each of points, events and trajectories when any were
        lost, else None::

        tuneplane: 0 of 2000 points delivered (2000 dropped: server unreachable)
        tuneplane: 3 of 5 trajectories delivered (2 dropped: queue full; 40 more left out
        by the retention caps)
        """
        lines = [
            _summary(
                "points",
                self.sent,
                self.dropped,
                self.queue_size,
                self.dropped_by_reason,
                spooled=self.spooled,
            ),
            _summary(
                "events",
                self.events_sent,
                self.events_dropped,
                self.events_queue_size,
                self.events_dropped_by_reason,
                spooled=self.events_spooled,
            ),
            _summary(
                "trajectories",
                self.trajectories_sent,
                self.trajectories_dropped,
                self.trajectories_queue_size,
                self.trajectories_dropped_by_reason,
                self.trajectories_not_uploaded,
                spooled=self.trajectories_spooled,
            ),
        ]
        found = [line for line in lines if line is not None]
        return "\n".join(found) if found else None


def _summary(
    noun: str,
    sent: int,
    dropped: int,
    queue_size: int,
    dropped_by_reason: Mapping[str, int],
    left_out: int = 0,
    *,
    spooled: int = 0,
) -> str | None:
    lost = dropped + queue_size
    if not lost:
        if not spooled:
            return None
        offered = sent + spooled
        return (
            f"tuneplane: {sent} of {offered} {noun} delivered ({spooled} kept in the spool: "
            "run `tuneplane sync`)"
        )
    reasons = dict(dropped_by_reason)
    if queue_size:
        reasons["still queued"] = queue_size
    if len(reasons) == 1:
        why = next(iter(reasons))
    else:
        why = ", ".join(f"{count} {reason}" for reason, count in _largest_first(reasons))
    offered = sent + dropped + queue_size + spooled
    # Left out on purpose is no loss, but the count says why fewer arrived than were given.
    more = f"; {left_out} more left out by the retention caps" if left_out else ""
    kept = f"; {spooled} kept in the spool: run `tuneplane sync`" if spooled else ""
    return f"tuneplane: {sent} of {offered} {noun} delivered ({lost} dropped: {why}{more}{kept})"


def _largest_first(reasons: Mapping[str, int]) -> list[tuple[str, int]]:
    return sorted(reasons.items(), key=lambda item: (-item[1], item[0]))
