"""``tuneplane.report()``: the process-wide reporter, built from the environment on first
use.

Under ``tuneplane run`` the environment names the run and carries its ingest token; without
it, ``report()`` does nothing and says so once on stderr. Either way training goes on.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Mapping

from tuneplane.client.errors import NotConfigured
from tuneplane.client.reporter import Reporter

# The process-wide reporter: built once, read without a lock on the hot path.
_reporter: Reporter | None = None
_disabled = False
_lock = threading.Lock()


def _build() -> Reporter | None:
    global _reporter, _disabled
    with _lock:
        if _reporter is not None or _disabled:
            return _reporter
        try:
            _reporter = Reporter.from_env()
        except NotConfigured as exc:
            _disabled = True
            _say(f"tuneplane: metrics are not reported ({exc})")
        except Exception as exc:  # never into training
            _disabled = True
            _say(f"tuneplane: metrics are not reported ({type(exc).__name__}: {exc})")
        return _reporter


def _say(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


def default_reporter() -> Reporter | None:
    """The process-wide reporter, or None when the environment configures none."""
    return _reporter if _reporter is not None else _build()


def report(metrics: Mapping[str, float], step: int | None = None) -> None:
    """Report scalar metrics of this training process; never raises, never waits.

    >>> import tuneplane
    >>> tuneplane.report({"train/loss": 0.71, "train/reward": 0.4}, step=120)

    ``step=None`` means the step after the last one reported (0 first). Points are sent
    in the background; at exit the reporter sends what is left for up to
    ``TUNEPLANE_FLUSH_TIMEOUT`` seconds (10) and prints one line if anything was lost.
    """
    reporter = _reporter
    if reporter is None:
        if _disabled:
            return
        reporter = _build()
        if reporter is None:
            return
    reporter.report(metrics, step)
