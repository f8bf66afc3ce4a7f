"""Following a NeMo-RL training while it runs (``tuneplane run --follow-nemo-rl LOG_DIR``).

A background thread of the runner process (never the training's) looks at the log
directory every few seconds and hands each completed step file to its source, which reads
it and queues its rollouts on the run's reporter; the training is never waited for,
slowed or stopped by it. Which files are complete, and how one is read, is the source's
business (``tuneplane.cli.upload.NemoRlSource``: the rule is in
``tuneplane.importers.nemo_rl_files.Watch``): this module is only the thread.

The thread runs at a lower scheduling priority than the training, reads one line of a step
file at a time, and queues through the reporter, which never blocks: when its queue is
full, the text is dropped, counted in ``health()`` and logged once. A file it cannot
import is named once, with why, and the training goes on. When the command has ended,
every file left is complete: they are imported within the runner's flush timeout.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Final, Protocol

logger = logging.getLogger("tuneplane")

#: Seconds between two looks at the log directory.
POLL_SECONDS: Final = 2.0
#: Niceness added to the follower's thread (Linux schedules threads one by one).
NICENESS: Final = 10


class Source(Protocol):
    """Step files and how to deliver one."""

    def ready(self, ended: bool) -> list[str]:
        """Complete files not handed out yet (``ended``: the training command has ended)."""
        ...

    def deliver(self, path: str) -> tuple[int, int]:
        """Read ``path`` and queue what it keeps: ``(accepted, kept)`` texts. Raises any
        exception for a file it cannot import."""
        ...


def _warn(message: str) -> None:
    logger.warning("tuneplane: %s", message)


class NemoRlFollower:
    """The background thread; ``start()`` when the command starts, ``stop(timeout)`` when
    it has ended."""

    def __init__(
        self,
        source: Source,
        *,
        poll_seconds: float = POLL_SECONDS,
        say: Callable[[str], None] = _warn,
    ) -> None:
        self._source = source
        self._poll = poll_seconds
        self._say = say
        self._ended = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tuneplane-nemo-rl", daemon=True)
        self.files = 0
        self.failed = 0
        self.accepted = 0
        self.kept = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """Import what is left (every file is complete now) for up to ``timeout`` seconds,
        then say what was imported."""
        self._ended.set()
        deadline = time.monotonic() + timeout
        self._thread.join(max(0.0, deadline - time.monotonic()))
        if self._thread.is_alive():
            self._say(
                "nemo-rl: still importing step files when the flush timeout ran out; import "
                "the rest with `tuneplane import nemo-rl LOG_DIR --out DIR --upload`"
            )
        dropped = self.kept - self.accepted
        lost = f", {dropped} not queued (queue full: counted in health)" if dropped else ""
        failed = f", {self.failed} not imported (named above)" if self.failed else ""
        self._say(
            f"nemo-rl: {self.files} step files imported, {self.accepted} texts queued{lost}{failed}"
        )

    def _loop(self) -> None:
        with contextlib.suppress(OSError, AttributeError):  # not on every platform
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICENESS)
        while True:
            ended = self._ended.is_set()
            try:
                self._pass(ended)
            except Exception as exc:  # never into training; said, and tried again
                self._say(f"nemo-rl: cannot look at the log directory: {exc}")
            if ended:
                return
            self._ended.wait(self._poll)

    def _pass(self, ended: bool) -> None:
        for path in self._source.ready(ended):
            try:
                accepted, kept = self._source.deliver(path)
            except Exception as exc:
                self.failed += 1
                self._say(f"nemo-rl: {path} not imported: {exc}")
                continue
            self.files += 1
            self.accepted += accepted
            self.kept += kept
