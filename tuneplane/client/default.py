"""``tuneplane.report()``, ``tuneplane.event()`` and their kin: the process-wide reporter,
built from the environment on first use.

Under ``tuneplane run`` the environment names the run and carries its ingest token; without
it, or with a variable that breaks its rule, ``report()`` does nothing, the event functions
answer False, and one line on stderr says so once (naming the variable, its value and what
is allowed). Either way training goes on.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Concatenate, ParamSpec

from tuneplane.client.errors import NotConfigured
from tuneplane.client.reporter import Reporter
from tuneplane.client.settings import disabled
from tuneplane.contract import environment
from tuneplane.contract.settings import SettingError

P = ParamSpec("P")

# The process-wide reporter: built once, read without a lock on the hot path.
_reporter: Reporter | None = None
_disabled = False
_lock = threading.Lock()


def _build() -> Reporter | None:
    global _reporter, _disabled
    with _lock:
        if _reporter is not None or _disabled:
            return _reporter
        if disabled(os.environ):  # TUNEPLANE_MODE=disabled: nothing to say either
            _disabled = True
            return None
        try:
            _reporter = Reporter.from_env()
        except NotConfigured as exc:
            _disabled = True
            if isinstance(exc.__cause__, SettingError):  # one line per bad value
                for problem in exc.__cause__.problems:
                    _say(f"tuneplane: {problem}; metrics and events are not reported")
            else:
                _say(f"tuneplane: metrics and events are not reported ({exc})")
        except Exception as exc:  # never into training
            _disabled = True
            _say(f"tuneplane: metrics and events are not reported ({type(exc).__name__}: {exc})")
        return _reporter


def _say(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


def prepare() -> None:
    """Under ``tuneplane run`` (at ``import tuneplane``): build the process-wide reporter
    and start its sender thread, idle until the first report, so that no training call
    waits for a thread start. Elsewhere nothing."""
    if os.environ.get(environment.JOB_RUN_ID):
        reporter = _build()
        if reporter is not None:
            reporter.prestart()


def use(reporter: Reporter | None) -> None:
    """Make ``reporter`` (the one ``init()`` started) the process-wide one, so that
    ``report()`` and the event functions send to its run; None leaves things as they are.
    A process-wide reporter it replaces that never sent anything is closed."""
    global _reporter, _disabled
    if reporter is None:
        return
    with _lock:
        replaced, _reporter, _disabled = _reporter, reporter, False
    if replaced is not None and replaced is not reporter and not replaced.sending:
        replaced.close(0)


def disable() -> None:
    """``init(mode="disabled")``: ``report()`` and the event functions do nothing from now
    on; a process-wide reporter that never sent anything is closed."""
    global _reporter, _disabled
    with _lock:
        replaced, _reporter, _disabled = _reporter, None, True
    if replaced is not None and not replaced.sending:
        replaced.close(0)


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


def routed(
    method: Callable[Concatenate[Reporter, P], bool],
    find: Callable[[], Reporter | None],
    whose: str = "the process-wide reporter",
) -> Callable[P, bool]:
    """``method`` of the reporter ``find()`` answers (``whose``, for the docstring); False
    when there is none."""

    def call(*args: P.args, **kwargs: P.kwargs) -> bool:
        reporter = find()
        return False if reporter is None else method(reporter, *args, **kwargs)

    call.__name__ = call.__qualname__ = method.__name__
    signature = inspect.signature(method)  # for help() and editors: the method's, sans self
    call.__dict__["__signature__"] = signature.replace(
        parameters=list(signature.parameters.values())[1:]
    )
    call.__doc__ = (
        f"``Reporter.{method.__name__}`` of {whose} (False without one).\n\n{method.__doc__ or ''}"
    )
    return call


def _of_default(method: Callable[Concatenate[Reporter, P], bool]) -> Callable[P, bool]:
    """``method`` of the process-wide reporter; False when there is none."""
    return routed(method, default_reporter)


# The observation events of this training process: each answers True when the event was
# queued (not yet delivered), False when it was refused; none raises or waits.
event = _of_default(Reporter.event)
distribution = _of_default(Reporter.distribution)
health_snapshot = _of_default(Reporter.health_snapshot)
trial_result = _of_default(Reporter.trial_result)
declare_population = _of_default(Reporter.declare_population)
