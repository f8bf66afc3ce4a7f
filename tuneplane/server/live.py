"""Wake-ups for live streams: a write to a run wakes the streams that follow it.

Within one server process a write notifies waiting streams at once. Streams also re-check
the database every ``POLL_SECONDS``, which is how writes made by other server processes
(several servers on one PostgreSQL) reach them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from typing import Final

POLL_SECONDS: Final = 1.0


class LiveHub:
    def __init__(self) -> None:
        self._events: dict[int, asyncio.Event] = defaultdict(asyncio.Event)

    def notify(self, run_id: int) -> None:
        event = self._events.pop(run_id, None)
        if event is not None:
            event.set()

    async def wait(self, run_id: int, timeout: float = POLL_SECONDS) -> None:
        """Return when the run is written to, or after ``timeout`` seconds."""
        event = self._events[run_id]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)
