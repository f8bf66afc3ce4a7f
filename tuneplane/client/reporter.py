"""``Reporter``: scalar metrics from training code to one run, in the background.

::

    reporter = Reporter.from_env()          # as set up by `tuneplane run`
    for step in range(steps):
        ...
        reporter.report({"train/loss": loss, "train/reward": reward}, step=step)
    reporter.close()

``report()`` never raises and never waits: it copies the metrics into a bounded queue that
one background thread drains. What could not be delivered is counted (``health()``) and,
at interpreter exit, summed up in one line on stderr. Lifecycle calls (``status()``) are
the opposite: synchronous, retried, and raising :class:`DeliveryFailed` when they fail.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
import threading
import time
import weakref
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Final

import httpx

from tuneplane.client.errors import DeliveryFailed, NotConfigured
from tuneplane.client.health import Health
from tuneplane.client.queue import PointQueue
from tuneplane.client.sender import Sender
from tuneplane.client.settings import (
    FLUSH_TIMEOUT_DEFAULT,
    QUEUE_MAX_POINTS_VARIABLE,
    flush_timeout,
)
from tuneplane.client.transport import OUT_OF_TIME, RetryPolicy, Transport
from tuneplane.contract import environment
from tuneplane.contract.ids import id_problem
from tuneplane.contract.limits import (
    HEARTBEAT_INTERVAL_SECONDS,
    SCALAR_BATCH_MAX_POINTS,
    SCALAR_QUEUE_MAX_POINTS,
)
from tuneplane.contract.protocol import RUN_STATUSES, RunStatus

#: How often the sender wakes without being asked to.
FLUSH_INTERVAL_DEFAULT: Final = 0.5
#: Lifecycle calls are retried longer than metric batches: about 30 s in all.
STATUS_RETRY: Final = RetryPolicy(attempts=8, first_delay=0.5, max_delay=8.0)

STATUS_PATH: Final = "/api/v1/ingest/status"
BAD_INPUT: Final = "invalid input"
NO_SENDER: Final = "no sender thread"

logger = logging.getLogger("tuneplane")
_reporters: weakref.WeakSet[Reporter] = weakref.WeakSet()


def _capture(value: object) -> object:
    """A tensor or numpy scalar as a float now, before the caller changes it in place.
    Anything ``float()`` refuses stays as it is and is refused, counted, by the sender."""
    if value.__class__ is float or value.__class__ is int:
        return value
    try:
        return float(value)  # type: ignore[arg-type]
    except Exception:
        return value


def parse_run_id(run_id: str) -> tuple[str, str]:
    """``"project/run"`` as ``(project, run)``; ValueError naming the rule otherwise."""
    project, slash, run = run_id.partition("/")
    for label, value in (("project", project), ("run", run)):
        problem = id_problem(value)
        if not slash or problem is not None:
            raise ValueError(f"run ID {run_id!r} must be 'project/run': {label} {problem}")
    return project, run


class Reporter:
    """Reports scalar metrics of one run through its ingest token.

    ``endpoint`` is the server's base URL (``http://host:8000``); ``run_id`` is
    ``"project/run"``; ``token`` is the attempt's ingest token. ``transport`` is passed to
    ``httpx.Client`` (tests and custom networking). The sender thread starts with the first
    ``report()``; until then the reporter sends nothing, heartbeats included.
    """

    def __init__(
        self,
        endpoint: str,
        run_id: str,
        token: str,
        *,
        attempt: int | None = None,
        queue_capacity: int = SCALAR_QUEUE_MAX_POINTS,
        batch_points: int = SCALAR_BATCH_MAX_POINTS,
        flush_interval: float = FLUSH_INTERVAL_DEFAULT,
        heartbeat_interval: float = HEARTBEAT_INTERVAL_SECONDS,
        exit_timeout: float = FLUSH_TIMEOUT_DEFAULT,
        retry: RetryPolicy | None = None,
        status_retry: RetryPolicy = STATUS_RETRY,
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.project, self.run = parse_run_id(run_id)
        if not 1 <= batch_points <= SCALAR_BATCH_MAX_POINTS:
            raise ValueError(f"batch_points must be 1..{SCALAR_BATCH_MAX_POINTS}")
        self.endpoint = endpoint.rstrip("/")
        self.attempt = attempt
        self._wake = threading.Event()
        self._queue = PointQueue(queue_capacity, batch_points, self._wake)
        self._transport = Transport(self.endpoint, token, timeout=timeout, transport=transport)
        self._batch_points = batch_points
        self._flush_interval = flush_interval
        self._heartbeat_interval = heartbeat_interval
        self._exit_timeout = exit_timeout
        self._retry = retry or RetryPolicy()
        self._status_retry = status_retry
        self._sender: Sender | None = None
        self._start_lock = threading.Lock()
        self._closed = False
        self._logged_inputs: set[type[BaseException]] = set()
        _reporters.add(self)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **options: object) -> Reporter:
        """The reporter ``tuneplane run`` set up for this process, from
        ``TUNEPLANE_JOB_ENDPOINT``, ``TUNEPLANE_JOB_RUN_ID`` and ``TUNEPLANE_JOB_TOKEN``
        (``TUNEPLANE_JOB_ATTEMPT``, ``TUNEPLANE_QUEUE_MAX_POINTS`` and
        ``TUNEPLANE_FLUSH_TIMEOUT`` are read too). Raises :class:`NotConfigured` when they
        are missing. Keyword ``options`` are passed to the constructor and win.
        """
        env = os.environ if environ is None else environ
        names = (environment.JOB_ENDPOINT, environment.JOB_RUN_ID, environment.JOB_TOKEN)
        missing = [name for name in names if not env.get(name)]
        if missing:
            raise NotConfigured(
                f"{', '.join(missing)} not set: run the training command under "
                "`tuneplane run` to report metrics"
            )
        settings: dict[str, object] = {"exit_timeout": flush_timeout(env)}
        attempt = env.get(environment.JOB_ATTEMPT, "")
        if attempt.isdigit():
            settings["attempt"] = int(attempt)
        capacity = env.get(QUEUE_MAX_POINTS_VARIABLE, "")
        if capacity.isdigit() and int(capacity) > 0:
            settings["queue_capacity"] = int(capacity)
        elif capacity:
            logger.warning("tuneplane: ignoring %s=%r", QUEUE_MAX_POINTS_VARIABLE, capacity)
        settings.update(options)
        try:
            return cls(
                env[environment.JOB_ENDPOINT],
                env[environment.JOB_RUN_ID],
                env[environment.JOB_TOKEN],
                **settings,  # type: ignore[arg-type]
            )
        except ValueError as exc:
            raise NotConfigured(f"{environment.JOB_RUN_ID}: {exc}") from exc

    def __repr__(self) -> str:
        return f"Reporter('{self.project}/{self.run}' at {self.endpoint!r})"

    def __enter__(self) -> Reporter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- the hot path ------------------------------------------------------------------

    def report(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Queue ``metrics`` (name → number) at ``step``; never raises, never blocks.

        ``step=None`` means the step after the last one reported. The mapping is copied,
        so the caller may reuse it. NaN and ±inf are recorded as invalid points, not
        dropped. Over capacity, the points are dropped and counted (see ``health()``).

        >>> reporter.report({"train/loss": 0.71, "train/reward": 0.4}, step=120)
        """
        try:
            copy: dict[Any, Any] = dict(metrics)
            for value in copy.values():
                if value.__class__ is not float and value.__class__ is not int:
                    copy = {name: _capture(value) for name, value in copy.items()}
                    break
            self._queue.put(copy, step)
            if self._sender is None:
                self._start()
        except Exception as exc:
            self._refuse(metrics, exc)

    def _refuse(self, metrics: object, exc: Exception) -> None:
        """Count a call whose input could not be read: its points if it was a mapping,
        else one."""
        try:
            points = len(metrics) if isinstance(metrics, Mapping) else 1
        except Exception:
            points = 1
        self._queue.refuse(BAD_INPUT, points)
        if type(exc) not in self._logged_inputs:
            self._logged_inputs.add(type(exc))
            logger.warning(
                "tuneplane: report() ignored its input (%s: %s); pass a mapping of metric "
                "names to numbers",
                type(exc).__name__,
                exc,
            )

    def _start(self) -> None:
        with self._start_lock:
            if self._sender is not None or self._closed:
                return
            sender = Sender(
                self._queue,
                self._transport,
                wake=self._wake,
                batch_points=self._batch_points,
                flush_interval=self._flush_interval,
                heartbeat_interval=self._heartbeat_interval,
                retry=self._retry,
            )
            try:
                sender.start()
            except RuntimeError as exc:  # e.g. "can't create new thread at interpreter shutdown"
                logger.warning("tuneplane: metrics are not reported: %s", exc)
                self._closed = True
                self._queue.close()
                self._queue.drain_as_dropped(NO_SENDER)
                return
            self._sender = sender
            atexit.register(self._close_at_exit)

    # -- delivery ------------------------------------------------------------------------

    def health(self) -> Health:
        """Delivery counters now (points queued, sent, dropped, ...)."""
        return self._queue.health()

    def flush(self, timeout: float = FLUSH_TIMEOUT_DEFAULT) -> bool:
        """Wait up to ``timeout`` seconds until every point reported so far was sent or
        dropped; True when that happened in time."""
        if self._sender is None:
            return self._queue.pending == 0
        mark = self._queue.mark()
        self._wake.set()
        return self._queue.wait_settled(mark, timeout)

    def close(self, timeout: float = FLUSH_TIMEOUT_DEFAULT) -> Health:
        """Send what is queued for up to ``timeout`` seconds, then stop; later reports are
        dropped (counted). Returns the final counters. Calling it again does nothing."""
        with self._start_lock:
            if self._closed:
                return self.health()
            self._closed = True
        atexit.unregister(self._close_at_exit)
        self._queue.close()
        sender = self._sender
        if sender is not None:
            sender.stop(time.monotonic() + timeout)
            # The sender bounds each request by the deadline; the grace covers the rest.
            sender.join(timeout + 1.0)
            if sender.is_alive():
                self._queue.drain_as_dropped(OUT_OF_TIME, abandon=True)
                return self.health()
        self._transport.close()
        return self.health()

    def _close_at_exit(self) -> None:
        summary = self.close(self._exit_timeout).loss_summary()
        if summary is not None:
            with contextlib.suppress(OSError, ValueError):
                print(summary, file=sys.stderr, flush=True)

    # -- lifecycle: strict -----------------------------------------------------------------

    def status(
        self, status: RunStatus, exit_code: int | None = None, *, timeout: float | None = None
    ) -> None:
        """Report the attempt's status (``running``, then ``succeeded``, ``failed`` or
        ``cancelled``). Retried on transport errors and 5xx (about 30 s, or ``timeout``
        seconds); raises :class:`DeliveryFailed` when the server refuses it or cannot be
        reached in time."""
        if status not in RUN_STATUSES:
            raise ValueError(f"status must be one of {', '.join(RUN_STATUSES)}, not {status!r}")
        if exit_code is not None and (not isinstance(exit_code, int) or exit_code is True):
            raise ValueError(f"exit_code must be an integer, not {exit_code!r}")
        if self._closed:
            raise DeliveryFailed(f"{self!r} is closed")
        body: dict[str, object] = {"status": status}
        if exit_code is not None:
            body["exit_code"] = exit_code
        deadline = None if timeout is None else time.monotonic() + timeout
        outcome = self._transport.post(
            STATUS_PATH, body, retry=self._status_retry, deadline=lambda: deadline
        )
        if not outcome.delivered:
            detail = f": {outcome.detail}" if outcome.detail else ""
            raise DeliveryFailed(
                f"could not report status {status!r} of {self.project}/{self.run} to "
                f"{self.endpoint}: {outcome.reason}{detail}",
                outcome.status,
            )

    def _forget_after_fork(self) -> None:
        """In a forked child the sender thread is gone and a lock may be held forever:
        start over with a closed queue, so that reports are counted, never waited on."""
        self._wake = threading.Event()
        self._queue = PointQueue(self._queue.capacity, self._batch_points, self._wake)
        self._queue.close()
        self._start_lock = threading.Lock()
        self._closed = True
        self._sender = None


def _after_fork_in_child() -> None:
    for reporter in list(_reporters):
        reporter._forget_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)
