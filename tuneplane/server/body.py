"""Reading request bodies: within a size limit, within a deadline, a bounded number at once.

A body must arrive in full within ``TUNEPLANE_BODY_TIMEOUT`` seconds of the first read of
it, else the request answers 408 and the connection is closed: a client trickling a byte at
a time cannot hold a connection and a task for ever. At most ``BODIES_IN_FLIGHT_MAX`` bodies
are being read at once; a request whose body would be one more answers 503 at once, so slow
clients cannot take every connection the server has. A body that has already arrived (most
of them: the server has it when the route starts) is read in the same call that counts it.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tuneplane.contract.errors import PayloadTooLarge, TuneplaneError, Unavailable
from tuneplane.contract.json_body import decode_json_body
from tuneplane.contract.limits import BODIES_IN_FLIGHT_MAX, BODY_TIMEOUT_SECONDS_DEFAULT


class BodyTimeout(TuneplaneError):
    """The body did not arrive within the deadline (408; the connection is closed)."""

    status = 408
    code = "body_timeout"
    close_connection: ClassVar[bool] = True


class TooManyBodies(Unavailable):
    """Every slot for reading a body is taken (503; retry soon)."""

    code = "busy"
    retry_after: ClassVar[int] = 1
    close_connection: ClassVar[bool] = True


class BodyDeadline:
    """Pure ASGI: puts the deadline on every read of a request's body and counts the
    bodies being read. Once a body is complete, ``receive`` is passed through untouched
    (a live stream waits on it for the client to go away)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        timeout: float = BODY_TIMEOUT_SECONDS_DEFAULT,
        most: int = BODIES_IN_FLIGHT_MAX,
    ) -> None:
        self.app = app
        self.timeout = timeout
        self.most = most
        #: Bodies being read now.
        self.reading = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        reader = _BodyReader(self, receive)
        try:
            await self.app(scope, reader.receive, send)
        finally:
            reader.finish()


class _BodyReader:
    """One request's reads of its body. The deadline is one timer per request (not one per
    read: most bodies arrive in one read, and the hot route should not pay for more); when
    it fires during a read, that read is cancelled and answers 408."""

    __slots__ = ("_expired", "_limits", "_receive", "_state", "_task", "_timer", "_waiting")

    def __init__(self, limits: BodyDeadline, receive: Receive) -> None:
        self._limits = limits
        self._receive = receive
        #: "new" (not read yet), "reading" (counted, timer set), "done".
        self._state = "new"
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[Any] | None = None
        self._expired = False
        self._waiting = False

    async def receive(self) -> Message:
        if self._state == "done":
            return await self._receive()
        if self._state == "new":
            self._start()
        if self._expired:
            raise self._timed_out()
        self._waiting = True
        try:
            message = await self._receive()
        except asyncio.CancelledError:
            # Ours only if the deadline cancelled it and nobody else did too (a shutdown).
            if not self._expired or self._task is None or self._task.uncancel() > 0:
                raise
            raise self._timed_out() from None
        finally:
            self._waiting = False
        if message["type"] != "http.request" or not message.get("more_body", False):
            self.finish()
        return message

    def _start(self) -> None:
        limits = self._limits
        if limits.reading >= limits.most:
            self._state = "done"
            raise TooManyBodies(
                f"server busy: {limits.most} request bodies are being read already; retry shortly"
            )
        limits.reading += 1
        self._state = "reading"
        self._task = asyncio.current_task()
        self._timer = asyncio.get_running_loop().call_later(limits.timeout, self._expire)

    def _expire(self) -> None:
        self._expired = True
        if self._waiting and self._task is not None:
            self._task.cancel()

    def _timed_out(self) -> BodyTimeout:
        self.finish()
        return BodyTimeout(
            f"body: not received in full within {self._limits.timeout:g} s (TUNEPLANE_BODY_TIMEOUT)"
        )

    def finish(self) -> None:
        if self._state == "reading":
            self._limits.reading -= 1
            if self._timer is not None:
                self._timer.cancel()
        self._state = "done"


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 as soon as it is known to exceed ``limit``."""
    too_large = PayloadTooLarge(f"body: larger than the {limit // 1024} KiB limit")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(request: Request, limit: int) -> Any:
    return decode_json_body(await read_body(request, limit))
