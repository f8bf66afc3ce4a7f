"""Wake-ups for live streams: a write to a run wakes the streams that follow it.

Within one server process a write notifies waiting streams at once. With several server
processes on one PostgreSQL, each write is also announced to the others through
``LISTEN/NOTIFY`` (``store/live_channel.py``), so a stream on any process wakes within
milliseconds. Streams also re-check the database on a timer: every ``POLL_SECONDS`` while
notifications from other processes cannot arrive (SQLite, whose writes all come from this
process, or a PostgreSQL listener that lost its connection), and every
``LISTENING_POLL_SECONDS`` while they do, for changes no write announced.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Iterable
from typing import Final

from tuneplane.store.database import Database
from tuneplane.store.live_channel import LiveChannel

POLL_SECONDS: Final = 1.0
LISTENING_POLL_SECONDS: Final = 5.0


class LiveHub:
    def __init__(self) -> None:
        # run id -> the events of the streams waiting for it
        self._waiting: dict[int, set[asyncio.Event]] = defaultdict(set)
        self._channel: LiveChannel | None = None

    def notify(self, run_id: int) -> None:
        """A write to the run: wake its streams here and in the other processes."""
        self.wake((run_id,))
        if self._channel is not None:
            self._channel.send(run_id)

    def wake(self, run_ids: Iterable[int]) -> None:
        """Wake this process's streams of the runs."""
        for run_id in run_ids:
            for event in self._waiting.pop(run_id, ()):
                event.set()

    async def run_forever(self, database: Database) -> None:
        """Exchange wake-ups with the other server processes of a PostgreSQL database."""
        if database.is_sqlite:
            return
        self._channel = LiveChannel(database.url, self.wake)
        try:
            await self._channel.run_forever()
        finally:
            self._channel = None

    @property
    def poll_seconds(self) -> float:
        """How long a stream waits before it re-reads the database unwoken."""
        channel = self._channel
        return LISTENING_POLL_SECONDS if channel is not None and channel.listening else POLL_SECONDS

    async def wait(self, run_id: int, timeout: float | None = None) -> None:
        """Return when the run is written to, or after ``timeout`` seconds."""
        await self.wait_any((run_id,), timeout)

    async def wait_any(self, run_ids: Iterable[int], timeout: float | None = None) -> None:
        """Return when any of the runs is written to, or after ``timeout`` seconds (by
        default :attr:`poll_seconds`)."""
        event = asyncio.Event()
        ids = list(run_ids)
        for run_id in ids:
            self._waiting[run_id].add(event)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout or self.poll_seconds)
        finally:
            for run_id in ids:
                waiting = self._waiting.get(run_id)
                if waiting is not None:
                    waiting.discard(event)
                    if not waiting:
                        del self._waiting[run_id]
