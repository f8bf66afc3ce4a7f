"""Wake-ups across server processes on one PostgreSQL: a process that wrote to runs says so
with ``NOTIFY`` on one channel, and every process ``LISTEN``s on it.

Each process holds two connections of its own outside the pool (autocommit): one that
listens, one that sends. A notification names the sending process, so it ignores its own,
and the runs written, comma-separated; ids queued while one is being sent go out together in
the next. A lost connection is reopened after a pause; while it is down, :attr:`listening`
is false and the waiting streams fall back to re-reading the database on a timer.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable, Iterable
from typing import Final

from sqlalchemy.engine import make_url

CHANNEL: Final = "tuneplane_live"
#: PostgreSQL refuses payloads of 8,000 bytes and more.
PAYLOAD_MAX: Final = 7_900
#: Seconds between attempts to reopen a lost connection.
RECONNECT_SECONDS: Final = 2.0

log = logging.getLogger(__name__)


def _conninfo(url: str) -> str:
    """The psycopg form of a SQLAlchemy PostgreSQL URL."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def payloads(origin: str, run_ids: Iterable[int]) -> list[str]:
    """``origin:1,2,3`` strings, each under PostgreSQL's payload limit."""
    out: list[str] = []
    current = ""
    for run_id in sorted(set(run_ids)):
        part = str(run_id)
        if current and len(origin) + 1 + len(current) + 1 + len(part) > PAYLOAD_MAX:
            out.append(f"{origin}:{current}")
            current = ""
        current = f"{current},{part}" if current else part
    if current:
        out.append(f"{origin}:{current}")
    return out


class LiveChannel:
    """``NOTIFY`` and ``LISTEN`` on :data:`CHANNEL`; ``on_runs`` gets the runs other
    processes wrote to, on the event loop."""

    def __init__(self, url: str, on_runs: Callable[[list[int]], None]) -> None:
        self._conninfo = _conninfo(url)
        self._on_runs = on_runs
        self._origin = secrets.token_hex(8)
        self._pending: set[int] = set()
        self._wanted = asyncio.Event()
        #: True while notifications from other processes arrive.
        self.listening = False

    def send(self, run_id: int) -> None:
        """Tell the other processes about a write to ``run_id`` (soon, from the loop)."""
        self._pending.add(run_id)
        self._wanted.set()

    async def run_forever(self) -> None:
        await asyncio.gather(self._listen_forever(), self._send_forever())

    async def _listen_forever(self) -> None:
        import psycopg

        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self._conninfo, autocommit=True
                ) as connection:
                    await connection.execute(f"LISTEN {CHANNEL}")
                    self.listening = True
                    async for note in connection.notifies():
                        origin, _, ids = note.payload.partition(":")
                        if origin != self._origin:
                            self._on_runs([int(i) for i in ids.split(",") if i.isdigit()])
            except (psycopg.Error, OSError) as exc:
                if self.listening:
                    log.warning("live updates from other server processes paused: %s", exc)
            finally:
                self.listening = False
            await asyncio.sleep(RECONNECT_SECONDS)

    async def _send_forever(self) -> None:
        import psycopg

        connection: psycopg.AsyncConnection[object] | None = None
        try:
            while True:
                await self._wanted.wait()
                self._wanted.clear()
                ids, self._pending = self._pending, set()
                try:
                    if connection is None or connection.closed:
                        connection = await psycopg.AsyncConnection.connect(
                            self._conninfo, autocommit=True
                        )
                    for payload in payloads(self._origin, ids):
                        await connection.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))
                except (psycopg.Error, OSError) as exc:
                    # The other processes' streams re-read on their timer meanwhile.
                    log.warning("live updates to other server processes paused: %s", exc)
                    connection = None
                    await asyncio.sleep(RECONNECT_SECONDS)
        finally:
            if connection is not None:
                await connection.close()
