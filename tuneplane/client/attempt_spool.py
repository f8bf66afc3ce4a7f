"""With the durable spool: what the runner (or ``init()``) itself sends about its attempt —
the log lines, the config and the status — journaled before it is posted, so that an
outage loses none of it and ``tuneplane sync`` replays it later.

One journal per process (:class:`~tuneplane.client.spool.Journal`), posted in the order it
was written by a :class:`~tuneplane.client.poster.Poster`: the lines an exception printed
arrive before the failed status, as without a spool. A status is journaled with the time
it was reached (``time``), so a status that arrives late, after an outage or at sync,
still says when the attempt ended. An offline attempt's journal is not posted at all.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Final

from tuneplane.client.attempt_config import CONFIG_PATH
from tuneplane.client.logs import LOG_RETRY, LOGS_PATH
from tuneplane.client.poster import Poster
from tuneplane.client.queue import Ledger
from tuneplane.client.spool import Journal, Target
from tuneplane.client.transport import Outcome, Transport
from tuneplane.contract.protocol import RunStatus

STATUS_PATH: Final = "/api/v1/ingest/status"
#: What a journal record holds (the counts ``tuneplane sync`` prints).
LINES: Final = "log lines"
STATUS: Final = "status"
CONFIG: Final = "config"


class _Counts(Ledger):
    """Lines or statuses handed to the poster: sent, spooled or dropped."""

    def __init__(self, what: str) -> None:
        super().__init__(2**62, what)

    def _discard_waiting(self) -> None:
        pass  # nothing waits here: each item is handed to the poster as it comes

    def admit(self, count: int) -> None:
        with self._lock:
            self._pending += count

    def counts(self) -> tuple[int, int, Counter[str]]:
        """(sent, spooled, dropped by reason)."""
        with self._lock:
            return self._sent, self._spooled, Counter(self._dropped)


class AttemptSpool:
    """The journal of one process's log lines and status (see the module's docstring)."""

    def __init__(self, root: Path, target: Target, max_bytes: int, transport: Transport) -> None:
        self.target = target
        self.journal = Journal(root, target, max_bytes)
        self._transport = transport
        self._lines = _Counts("log line")
        self._statuses = _Counts("status")
        self._configs = _Counts("config")
        self._losses: list[str] = []
        self._poster = Poster(
            transport,
            self.journal,
            retry=LOG_RETRY,
            on_failed_attempt=lambda: None,
            on_loss=self._lost,
        )
        self._poster.start()

    def __repr__(self) -> str:
        return f"AttemptSpool({self.target!r})"

    def lines(self, batch: list[dict[str, object]]) -> None:
        """Journal a batch of log lines (the protocol's objects) and queue it for posting."""
        self._lines.admit(len(batch))
        self._poster.submit(self._lines, LOGS_PATH, LINES, {"lines": batch}, len(batch), 0)

    def line_counts(self) -> tuple[int, int, Counter[str]]:
        """Lines (sent, kept in the journal, dropped by reason)."""
        return self._lines.counts()

    def status(self, status: RunStatus, exit_code: int | None = None) -> None:
        """Journal the attempt's status, with the time it was reached, and queue it."""
        body: dict[str, object] = {"status": status, "time": time.time()}
        if exit_code is not None:
            body["exit_code"] = exit_code
        self._statuses.admit(1)
        self._poster.submit(self._statuses, STATUS_PATH, STATUS, body, 1, 0)

    def config(self, body: dict[str, object]) -> None:
        """Journal keys added to the attempt's config (``run.config.update()``) and queue
        them, in order with the lines and the status."""
        self._configs.admit(1)
        self._poster.submit(self._configs, CONFIG_PATH, CONFIG, body, 1, 0)

    def close(self, timeout: float) -> str | None:
        """Post what waits for up to ``timeout`` seconds (at once when the server does not
        answer: the journal keeps it), then stop; a line for stderr when the last status
        was not delivered (kept for ``tuneplane sync``, or refused), else None."""
        self._poster.finish(time.monotonic() + timeout)
        self._transport.close()
        _sent, spooled, dropped = self._statuses.counts()
        if spooled and self.target.offline:
            return None  # the caller says how to sync the whole attempt
        if spooled:
            where = self.journal.directory or self.journal.root
            return f"the attempt's status is kept in the spool ({where}): run `tuneplane sync`"
        if dropped:
            why = self._losses[-1] if self._losses else next(iter(dropped))
            return f"warning: the attempt's status was not recorded ({why})"
        return None

    def _lost(self, ledger: Ledger, outcome: Outcome) -> None:
        detail = f": {outcome.detail}" if outcome.detail else ""
        self._losses.append(f"{outcome.reason}{detail}")
