"""What a script's console says, into its attempt's log: ``init()`` copies stdout and stderr
line by line (as W&B does; ``console="off"`` leaves them alone), and the exception that
ends the run goes in before its failed status, so a diagnosis reads what went wrong.

The streams are wrapped, not redirected: everything is still written where it went, and a
copy is cut into lines (:class:`~tuneplane.client.logs.LineSplitter`: a ``\\r`` redraw is one
line) and handed to a :class:`~tuneplane.client.logs.LogShipper`, which never waits on the
network. Copying never raises into the caller's ``print``.
"""

from __future__ import annotations

import sys
import threading
import traceback
from types import TracebackType
from typing import Any, Final, Literal, TextIO

from tuneplane.client.logs import LineSplitter, LogShipper, LogStats

Stream = Literal["stdout", "stderr"]
#: ``init(console=…)``: W&B's names; "auto" and "redirect" copy as "wrap" does.
CONSOLE_MODES: Final = ("auto", "wrap", "redirect", "off")


class _Tee:
    """A text stream that writes through to ``original`` and copies what passes."""

    def __init__(self, original: TextIO, name: Stream, capture: ConsoleCapture) -> None:
        self._original = original
        self._name = name
        self._capture = capture

    def write(self, text: str) -> int:
        written = self._original.write(text)
        self._capture.copy(self._name, text)
        return written

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._original.flush()

    def __getattr__(self, name: str) -> Any:
        # encoding, isatty, fileno, buffer…: the stream's own.
        return getattr(self._original, name)


class ConsoleCapture:
    """Copies ``sys.stdout`` and ``sys.stderr`` into ``shipper`` until :meth:`stop`."""

    def __init__(self, shipper: LogShipper) -> None:
        self._shipper = shipper
        self._splitters: dict[Stream, LineSplitter] = {
            "stdout": LineSplitter(),
            "stderr": LineSplitter(),
        }
        self._lock = threading.Lock()
        self._tees: dict[Stream, _Tee] = {}
        self._originals: dict[Stream, TextIO] = {}
        self._stopped = False

    def start(self) -> None:
        names: tuple[Stream, ...] = ("stdout", "stderr")
        for name in names:
            original: TextIO = getattr(sys, name)
            tee = _Tee(original, name, self)
            self._originals[name] = original
            self._tees[name] = tee
            setattr(sys, name, tee)

    def copy(self, name: Stream, text: str) -> None:
        try:
            with self._lock:
                if self._stopped:
                    return
                lines = self._splitters[name].feed(text.encode("utf-8", "replace"))
            for line in lines:
                self._shipper.add(name, line)
        except Exception:  # noqa: S110 - a print must never fail because of its copy
            pass

    def exception(
        self,
        exc_type: type[BaseException],
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """The exception that ends the run, as Python prints it, into the log's stderr."""
        text = "".join(traceback.format_exception(exc_type, exc, tb))
        splitter = LineSplitter()
        lines = splitter.feed(text.encode("utf-8", "replace")) + splitter.end()
        with self._lock:
            pending = self._splitters["stderr"].end()  # a partial line goes first
        for line in [*pending, *lines]:
            self._shipper.add("stderr", line)

    def stop(self, timeout: float) -> LogStats:
        """Put the streams back (where nobody wrapped them since), send what is buffered
        for up to ``timeout`` seconds, and stop."""
        with self._lock:
            self._stopped = True
            ends = {name: splitter.end() for name, splitter in self._splitters.items()}
        for name, tee in self._tees.items():
            if getattr(sys, name) is tee:
                setattr(sys, name, self._originals[name])
        for name, lines in ends.items():
            for line in lines:
                self._shipper.add(name, line)
        return self._shipper.close(timeout)
