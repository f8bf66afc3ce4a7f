"""How a script that never calls ``finish()`` ends, told to the run it left open.

``init()`` installs :func:`watch` once: an uncaught exception (``sys.excepthook``) fails the
open run with its traceback in the log before Python prints it, ``sys.exit(code)`` is
remembered, and at exit (``atexit``) the open run is finished with what was seen: failed
for an exception or a nonzero exit code, succeeded otherwise. Hooks someone installed
before are still called.
"""

from __future__ import annotations

import atexit
import sys
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, NoReturn

#: ``(exc_type, exc, traceback)`` of an uncaught exception, then the exit code.
OnException = Callable[[type[BaseException], BaseException, TracebackType | None], None]
OnExit = Callable[[int | None], None]

_lock = threading.Lock()
_installed = False
_exit_code: int | None = None
_on_exit: OnExit | None = None


def watch(on_exception: OnException, on_exit: OnExit) -> None:
    """Install the hooks (once per process), and put ``on_exit`` last in line at exit."""
    global _installed, _on_exit
    with _lock:
        _on_exit = on_exit
        # atexit runs last-in first-out: registered again after each init()'s reporter
        # registered its own, the open run is finished while its reporter can still send.
        atexit.unregister(_at_exit)
        atexit.register(_at_exit)
        if _installed:
            return
        _installed = True
    previous_hook = sys.excepthook
    real_exit = sys.exit

    def excepthook(
        exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
    ) -> None:
        try:
            on_exception(exc_type, exc, tb)
        finally:
            previous_hook(exc_type, exc, tb)

    def exit_(status: Any = None) -> NoReturn:
        global _exit_code
        _exit_code = _code(status)
        real_exit(status)

    sys.excepthook = excepthook
    sys.exit = exit_


def _at_exit() -> None:
    if _on_exit is not None:
        _on_exit(_exit_code)


def _code(status: object) -> int:
    """The exit code ``sys.exit(status)`` gives: None is 0, an int itself, else 1."""
    if status is None:
        return 0
    return status if isinstance(status, int) else 1
