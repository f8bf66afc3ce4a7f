"""The runner's log forwarding: bytes from the child's pipes to ``POST /api/v1/ingest/logs``.

:class:`LineSplitter` cuts a byte stream into lines, keeping at most a bounded head of a
line that never ends; :func:`encode_line` turns one into the protocol's ``text`` (cut with a
visible marker past ``LOG_LINE_MAX_CHARS``) and, when the bytes are not clean UTF-8,
``data`` (base64 of the bytes kept). :class:`LogShipper` numbers lines from 0, buffers a
bounded number and sends them in batches from a background thread, retrying; when the
buffer is full, new lines are dropped and counted, so the child's output never waits.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from tuneplane.client.transport import OUT_OF_TIME, RetryPolicy, Transport
from tuneplane.contract.limits import INGEST_BODY_MAX_BYTES, LOG_BATCH_MAX_LINES, LOG_LINE_MAX_CHARS

LOGS_PATH: Final = "/api/v1/ingest/logs"
#: Bytes kept of one line: enough for LOG_LINE_MAX_CHARS characters of any UTF-8 text.
LINE_MAX_BYTES: Final = 4 * LOG_LINE_MAX_CHARS
#: Lines and bytes (text and data, as encoded) waiting to be sent before new ones are dropped.
BUFFER_MAX_LINES: Final = 20_000
BUFFER_MAX_BYTES: Final = 32 * 1024 * 1024
#: A request body stays well under the server's limit (JSON escapes can double a line).
_BATCH_BUDGET_BYTES: Final = INGEST_BODY_MAX_BYTES // 4
BUFFER_FULL: Final = "buffer full"
#: Log batches are retried longer than metric batches (a minute or so): the buffer is what
#: bounds memory, and a training job's log is worth the wait.
LOG_RETRY: Final = RetryPolicy(attempts=10, first_delay=0.25, max_delay=10.0)

if TYPE_CHECKING:
    from tuneplane.client.attempt_spool import AttemptSpool

logger = logging.getLogger("tuneplane")


@dataclass(frozen=True, slots=True)
class Line:
    """One complete line: its first bytes (without the newline) and how many more the
    original had beyond them."""

    head: bytes
    cut: int = 0


class LineSplitter:
    """Splits a byte stream into lines on ``\n`` (a ``\r`` before it is dropped too). A
    ``\r`` anywhere else returns to the start of the line, as a terminal does: what follows
    replaces what came before, so a progress bar redrawn a thousand times is one line, its
    last state."""

    def __init__(self, max_bytes: int = LINE_MAX_BYTES) -> None:
        self._max = max_bytes
        self._head = bytearray()
        self._cut = 0
        #: The last chunk ended in ``\r``: a line end if the next begins with ``\n``.
        self._pending_return = False

    def feed(self, chunk: bytes) -> list[Line]:
        lines: list[Line] = []
        if not chunk:
            return lines  # says nothing, not even what a pending \r meant
        if self._pending_return:
            self._pending_return = False
            if not chunk.startswith(b"\n"):
                self._restart()
        start = 0
        while True:
            newline = chunk.find(b"\n", start)
            end = len(chunk) if newline < 0 else newline
            text_end = end
            if end > start and chunk[end - 1] == _RETURN:
                text_end = end - 1  # \r\n, or a \r whose meaning the next chunk tells
                self._pending_return = newline < 0
            back = chunk.rfind(b"\r", start, text_end)
            if back >= 0:
                self._restart()
                start = back + 1
            self._keep(chunk, start, text_end)
            if newline < 0:
                return lines
            lines.append(self._emit())
            start = newline + 1

    def end(self) -> list[Line]:
        """The last line when the stream ended without a newline."""
        started = self._head or self._cut or self._pending_return
        self._pending_return = False
        return [self._emit()] if started else []

    def _keep(self, chunk: bytes, start: int, end: int) -> None:
        room = self._max - len(self._head)
        if end - start <= room:
            self._head += chunk[start:end]
        else:
            self._head += chunk[start : start + room]
            self._cut += end - start - room

    def _restart(self) -> None:
        self._head.clear()
        self._cut = 0

    def _emit(self) -> Line:
        line = Line(bytes(self._head), self._cut)
        self._restart()
        return line


_RETURN: Final = ord("\r")


def _decode(head: bytes, cut: bool) -> tuple[str, bool]:
    """``(text, clean)``: clean when the bytes are UTF-8 without NUL (a line cut in the
    middle of a character is still clean: the partial character is left out)."""
    ends = (0, 1, 2, 3) if cut else (0,)
    for trim in ends:
        try:
            text = head[: len(head) - trim].decode("utf-8")
        except UnicodeDecodeError:
            continue
        if "\x00" not in text:
            return text, True
        break
    # Not UTF-8, or NUL inside (PostgreSQL text cannot hold NUL): replace, keep the bytes.
    return head.decode("utf-8", "replace").replace("\x00", "\ufffd"), False


def cut_marker(total_bytes: int) -> str:
    return f" [… line cut by tuneplane: {total_bytes} bytes in all]"


def encode_line(line: Line) -> tuple[str, str | None]:
    """The protocol's ``text`` and ``data`` (None when the text says it all)."""
    text, clean = _decode(line.head, line.cut > 0)
    if line.cut or len(text) > LOG_LINE_MAX_CHARS:
        marker = cut_marker(len(line.head) + line.cut)
        text = text[: LOG_LINE_MAX_CHARS - len(marker)] + marker
    data = None if clean else base64.b64encode(line.head).decode("ascii")
    return text, data


@dataclass
class LogStats:
    """Lines numbered, sent and dropped (by reason) so far."""

    lines: int = 0
    sent: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    #: Journaled by the durable spool and not acknowledged: they wait for `tuneplane sync`.
    spooled: int = 0

    def loss_summary(self) -> str | None:
        lost = sum(self.dropped.values())
        pending = self.lines - self.sent - lost - self.spooled
        reasons: Mapping[str, int] = {**self.dropped, **({"not sent": pending} if pending else {})}
        if not reasons and self.spooled:
            return (
                f"tuneplane: {self.sent} of {self.lines} log lines delivered ({self.spooled} "
                "kept in the spool: run `tuneplane sync`)"
            )
        if not reasons:
            return None
        total = lost + pending
        if len(reasons) == 1:
            why = next(iter(reasons))
        else:
            why = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()))
        delivered = f"{self.sent} of {self.lines} log lines delivered"
        kept = f"; {self.spooled} kept in the spool: run `tuneplane sync`" if self.spooled else ""
        return f"tuneplane: {delivered} ({total} dropped: {why}{kept})"


class LogShipper:
    """Numbers, buffers and sends one attempt's lines through ``transport`` (which it
    closes when done). ``add`` is called by the threads reading the child's pipes and
    never waits on the network. With ``spool`` (the durable spool), batches are journaled
    and posted by it instead, so that lines an outage kept from the server wait for it, or
    for ``tuneplane sync``, rather than being dropped."""

    def __init__(
        self,
        transport: Transport,
        *,
        max_lines: int = BUFFER_MAX_LINES,
        max_bytes: int = BUFFER_MAX_BYTES,
        interval: float = 0.2,
        retry: RetryPolicy = LOG_RETRY,
        spool: AttemptSpool | None = None,
    ) -> None:
        self._transport = transport
        self._spool = spool
        self._max_lines = max_lines
        self._max_bytes = max_bytes
        self._interval = interval
        self._retry = retry
        self._lock = threading.Lock()
        self._buffer: deque[tuple[dict[str, object], int]] = deque()
        self._buffered_bytes = 0
        self._stats = LogStats()
        self._wake = threading.Event()
        self._interrupt = threading.Event()
        self._deadline: float | None = None
        self._stopping = False
        self._last_failure: str | None = None
        self._logged: set[str] = set()
        self._thread = threading.Thread(target=self._run, name="tuneplane-logs", daemon=True)
        self._thread.start()

    def add(self, stream: str, line: Line) -> None:
        """Number the line and buffer it, or count it dropped when the buffer is full."""
        now = time.time()
        text, data = encode_line(line)
        size = len(text) + (len(data) if data else 0) + 80
        with self._lock:
            seq = self._stats.lines
            self._stats.lines += 1
            full = len(self._buffer) >= self._max_lines
            if full or self._buffered_bytes + size > self._max_bytes:
                self._stats.dropped[BUFFER_FULL] += 1
                return
            item: dict[str, object] = {"seq": seq, "stream": stream, "time": now, "text": text}
            if data is not None:
                item["data"] = data
            self._buffer.append((item, size))
            self._buffered_bytes += size
            wake = len(self._buffer) >= LOG_BATCH_MAX_LINES
        if wake:
            self._wake.set()

    def stats(self) -> LogStats:
        with self._lock:
            stats = LogStats(self._stats.lines, self._stats.sent, Counter(self._stats.dropped))
        if self._spool is not None:
            sent, spooled, dropped = self._spool.line_counts()
            stats.sent += sent
            stats.spooled = spooled
            stats.dropped.update(dropped)
        return stats

    def close(self, timeout: float) -> LogStats:
        """Send what is buffered for up to ``timeout`` seconds, then stop."""
        self._deadline = time.monotonic() + timeout
        self._stopping = True
        self._interrupt.set()
        self._wake.set()
        self._thread.join(timeout + 1.0)
        if not self._thread.is_alive():
            self._transport.close()
        return self.stats()

    def _run(self) -> None:
        while True:
            stopping = self._stopping
            if not stopping:
                self._wake.wait(self._interval)
                self._wake.clear()
            while True:
                batch = self._take()
                if not batch:
                    break
                self._send(batch)
            if stopping:
                return

    def _take(self) -> list[dict[str, object]]:
        batch: list[dict[str, object]] = []
        budget = _BATCH_BUDGET_BYTES
        with self._lock:
            while self._buffer and len(batch) < LOG_BATCH_MAX_LINES:
                item, size = self._buffer[0]
                if batch and size > budget:
                    break
                self._buffer.popleft()
                self._buffered_bytes -= size
                budget -= size
                batch.append(item)
        return batch

    def _send(self, batch: list[dict[str, object]]) -> None:
        if self._spool is not None:
            self._spool.lines(batch)
            return
        deadline = self._deadline
        if deadline is not None and time.monotonic() >= deadline:
            self._settle(batch, self._last_failure or OUT_OF_TIME)
            return
        try:
            outcome = self._transport.post(
                LOGS_PATH,
                {"lines": batch},
                retry=self._retry,
                deadline=lambda: self._deadline,
                interrupt=self._interrupt,
            )
        except Exception:
            logger.exception("tuneplane: log forwarding failed")
            self._settle(batch, "internal error")
            return
        if outcome.delivered:
            self._last_failure = None
            self._settle(batch, None)
            return
        if not outcome.rejected:
            self._last_failure = outcome.reason
        self._settle(batch, outcome.reason)
        if outcome.reason not in self._logged and not self._transport.superseded:
            self._logged.add(outcome.reason)
            logger.warning("tuneplane: log lines dropped (%s): %s", outcome.reason, outcome.detail)

    def _settle(self, batch: list[dict[str, object]], dropped: str | None) -> None:
        with self._lock:
            if dropped is None:
                self._stats.sent += len(batch)
            else:
                self._stats.dropped[dropped] += len(batch)
