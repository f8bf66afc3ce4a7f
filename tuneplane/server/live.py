"""Wake-ups for live streams: a write to a run wakes the streams that follow it.

Within one server process a write notifies waiting streams at once. Streams also re-check
the database every ``POLL_SECONDS``, which is how writes made by other server processes
(several servers on one PostgreSQL) reach them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Iterable
from typing import Final

POLL_SECONDS: Final = 1.0


class LiveHub:
    def __init__(self) -> None:
        # run id -> the events of the streams waiting for it
        self._waiting: dict[int, set[asyncio.Event]] = defaultdict(set)

    def notify(self, run_id: int) -> None:
        for event in self._waiting.pop(run_id, ()):
            event.set()

    async def wait(self, run_id: int, timeout: float = POLL_SECONDS) -> None:
        """Return when the run is written to, or after ``timeout`` seconds."""
        await self.wait_any((run_id,), timeout)

    async def wait_any(self, run_ids: Iterable[int], timeout: float = POLL_SECONDS) -> None:
        """Return when any of the runs is written to, or after ``timeout`` seconds."""
        event = asyncio.Event()
        ids = list(run_ids)
        for run_id in ids:
            self._waiting[run_id].add(event)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout)
        finally:
            for run_id in ids:
                waiting = self._waiting.get(run_id)
                if waiting is not None:
                    waiting.discard(event)
                    if not waiting:
                        del self._waiting[run_id]
