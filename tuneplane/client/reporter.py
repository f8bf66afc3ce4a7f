"""``Reporter``: scalar metrics and observation events from training code to one run, in
the background.

::

    reporter = Reporter.from_env()          # as set up by `tuneplane run`
    for step in range(steps):
        ...
        reporter.report({"train/loss": loss, "train/reward": reward}, step=step)
    reporter.close()

``report()`` never raises and never waits: it copies the metrics into a bounded queue that
one background thread drains. ``event()``, ``distribution()`` and their kin do the same with
observation events, on a queue of their own (128 events), and answer whether the event was
queued; ``trajectory()`` does it with trajectory documents (a queue of 256 documents or
64 MiB). What could not be delivered is counted (``health()``) and, at interpreter exit,
summed up on stderr. Strict calls (``status()``, ``observations()``) are the opposite:
synchronous, retried, and raising :class:`DeliveryFailed` when they fail.
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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import httpx

from tuneplane.client.errors import DeliveryFailed, InvalidObservation
from tuneplane.client.events import EventIds, ObservationsSent, prepare
from tuneplane.client.health import Health
from tuneplane.client.observing import ObservationCalls
from tuneplane.client.pipeline import Pipeline
from tuneplane.client.queue import EventQueue, PointQueue
from tuneplane.client.sender import ALERT_TYPE, OBSERVATIONS_PATH, Sender
from tuneplane.client.settings import FLUSH_TIMEOUT_DEFAULT, SpoolSettings, job_settings
from tuneplane.client.spool import Journal, Target
from tuneplane.client.trajectories import EvaluationCaps, Refused, prepare_trajectory
from tuneplane.client.trajectory_queue import RolloutBuffer, TrajectoryQueue
from tuneplane.client.transport import OUT_OF_TIME, Outcome, RetryPolicy, Transport
from tuneplane.contract.arena import AlertLevel, parse_alerts
from tuneplane.contract.ids import id_problem
from tuneplane.contract.limits import (
    HEARTBEAT_INTERVAL_SECONDS,
    JSON_MAX_DEPTH,
    OBSERVATION_BATCH_MAX,
    OBSERVATION_QUEUE_MAX,
    ROLLOUT_SAMPLES_PER_STEP,
    SCALAR_BATCH_MAX_POINTS,
    SCALAR_QUEUE_MAX_POINTS,
    TRAJECTORY_QUEUE_MAX,
    TRAJECTORY_QUEUE_MAX_BYTES,
)
from tuneplane.contract.protocol import RUN_STATUSES, RunStatus
from tuneplane.contract.trajectories import CapturePolicy, Diagnostic, Scope

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


def _captured(metrics: Mapping[Any, Any]) -> dict[Any, Any]:
    """Every value captured (:func:`_capture`); a nested mapping's values under
    ``outer/inner`` names, as W&B and Trackio store ``{"eval": {"acc": 0.5}}``. Nesting
    deeper than the JSON limit (or a mapping that holds itself) is left as it is, refused."""
    flat: dict[Any, Any] = {}
    pending: list[tuple[str, Mapping[Any, Any], int]] = [("", metrics, 0)]
    while pending:
        prefix, mapping, depth = pending.pop()
        for name, value in mapping.items():
            key = f"{prefix}{name}" if prefix else name
            if isinstance(value, Mapping) and depth < JSON_MAX_DEPTH:
                pending.append((f"{key}/", value, depth + 1))
            else:
                flat[key] = _capture(value)
    return flat


def parse_run_id(run_id: str) -> tuple[str, str]:
    """``"project/run"`` as ``(project, run)``; ValueError naming the rule otherwise."""
    project, slash, run = run_id.partition("/")
    for label, value in (("project", project), ("run", run)):
        problem = id_problem(value)
        if not slash or problem is not None:
            raise ValueError(f"run ID {run_id!r} must be 'project/run': {label} {problem}")
    return project, run


class Reporter(ObservationCalls):
    """Reports scalar metrics and observation events of one run through its ingest token.

    ``endpoint`` is the server's base URL (``http://host:8000``); ``run_id`` is
    ``"project/run"``; ``token`` is the attempt's ingest token. ``transport`` is passed to
    ``httpx.Client`` (tests and custom networking). The sender thread starts with the first
    ``report()`` or queued event, or with :meth:`start`; until then the reporter sends
    nothing, heartbeats included. ``next_step`` is the step of the first ``report()``
    without one (a resumed run's continue after its last step). ``val_upload_samples``
    and ``rollout_upload_samples`` are the trajectory text caps
    (``TUNEPLANE_JOB_VAL_UPLOAD_SAMPLES``, ``TUNEPLANE_JOB_ROLLOUT_UPLOAD_SAMPLES``).
    ``spool`` turns on the durable spool (``TUNEPLANE_SPOOL_DIR``): every batch is
    journaled on disk before it is sent, and ``tuneplane sync`` delivers what the server
    did not acknowledge (docs/sdk.md, "Durable spool"). ``system_interval`` samples CPU,
    memory and GPU into ``system/…`` series every that many seconds (``client/
    system_metrics.py``; None or 0: not at all, the default here; :meth:`from_env`, and so
    ``tuneplane run`` and ``init()``, use ``TUNEPLANE_SYSTEM_METRICS_SECONDS``, 10).
    """

    def __init__(
        self,
        endpoint: str,
        run_id: str,
        token: str,
        *,
        attempt: int | None = None,
        queue_capacity: int = SCALAR_QUEUE_MAX_POINTS,
        event_queue_capacity: int = OBSERVATION_QUEUE_MAX,
        trajectory_queue_capacity: int = TRAJECTORY_QUEUE_MAX,
        trajectory_queue_bytes: int = TRAJECTORY_QUEUE_MAX_BYTES,
        val_upload_samples: int | None = None,
        rollout_upload_samples: int = ROLLOUT_SAMPLES_PER_STEP,
        batch_points: int = SCALAR_BATCH_MAX_POINTS,
        flush_interval: float = FLUSH_INTERVAL_DEFAULT,
        heartbeat_interval: float = HEARTBEAT_INTERVAL_SECONDS,
        exit_timeout: float = FLUSH_TIMEOUT_DEFAULT,
        retry: RetryPolicy | None = None,
        status_retry: RetryPolicy = STATUS_RETRY,
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
        next_step: int = 0,
        spool: SpoolSettings | None = None,
        system_interval: float | None = None,
    ) -> None:
        self.project, self.run = parse_run_id(run_id)
        if not 1 <= batch_points <= SCALAR_BATCH_MAX_POINTS:
            raise ValueError(f"batch_points must be 1..{SCALAR_BATCH_MAX_POINTS}")
        if not 0 <= rollout_upload_samples <= ROLLOUT_SAMPLES_PER_STEP:
            raise ValueError(f"rollout_upload_samples must be 0..{ROLLOUT_SAMPLES_PER_STEP}")
        if val_upload_samples is not None and val_upload_samples < 0:
            raise ValueError("val_upload_samples must be a nonnegative number of trials")
        self.endpoint = endpoint.rstrip("/")
        self.attempt = attempt
        self._wake = threading.Event()
        self._queue = PointQueue(queue_capacity, batch_points, self._wake, next_step)
        self._events = EventQueue(event_queue_capacity, OBSERVATION_BATCH_MAX, self._wake)
        self._trajectories = TrajectoryQueue(
            trajectory_queue_capacity, trajectory_queue_bytes, self._wake
        )
        self._caps = EvaluationCaps(val_upload_samples)
        self._rollout_cap = rollout_upload_samples
        self._ids = EventIds(attempt)
        self._transport = Transport(self.endpoint, token, timeout=timeout, transport=transport)
        # Scalar batches overlap with their building where the server is reached directly.
        self._pipeline = (
            Pipeline.for_server(self.endpoint, token, timeout) if transport is None else None
        )
        self._batch_points = batch_points
        self._flush_interval = flush_interval
        self._heartbeat_interval = heartbeat_interval
        self._exit_timeout = exit_timeout
        self._retry = retry or RetryPolicy()
        self._status_retry = status_retry
        self._system_interval = system_interval
        # Opened by the sender thread on its first batch: init costs no disk access.
        self._journal = (
            None
            if spool is None
            else Journal(
                Path(spool.directory),
                Target(self.endpoint, self.project, self.run, attempt, token, spool.group),
                spool.max_mb * 2**20,
            )
        )
        self._sender: Sender | None = None
        self._running = False  # the sender thread is started and sending (not idle)
        self._start_lock = threading.Lock()
        self._closed = False
        self._logged_inputs: set[type[BaseException]] = set()
        self._logged_events: set[str] = set()
        self._logged_trajectories: set[str] = set()
        _reporters.add(self)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **options: object) -> Reporter:
        """The reporter ``tuneplane run`` set up for this process, from
        ``TUNEPLANE_JOB_ENDPOINT``, ``TUNEPLANE_JOB_RUN_ID`` and ``TUNEPLANE_JOB_TOKEN``
        (``TUNEPLANE_JOB_ATTEMPT``, ``TUNEPLANE_QUEUE_MAX_POINTS``,
        ``TUNEPLANE_FLUSH_TIMEOUT`` and the trajectory upload caps are read too). Raises
        :class:`NotConfigured` when they are missing or one breaks its rule (the message
        names each). Keyword ``options`` are passed to the constructor and win.
        """
        job = job_settings(os.environ if environ is None else environ)
        settings: dict[str, object] = {
            "attempt": job.attempt,
            "exit_timeout": job.exit_timeout,
            "queue_capacity": job.queue_capacity,
            "val_upload_samples": job.val_upload_samples,
            "rollout_upload_samples": job.rollout_upload_samples,
            "spool": job.spool,
            "system_interval": job.system_interval,
            "next_step": job.next_step,
            **options,
        }
        return cls(job.endpoint, job.run_id, job.token, **settings)  # type: ignore[arg-type]

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
                    copy = _captured(copy)
                    break
            self._queue.put(copy, step)
            if not self._running:
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

    def start(self) -> None:
        """Build the HTTP client and start the sender thread now, rather than on the first
        report: ``init()`` does, so that no later call waits for a thread or a client."""
        if not self._running:
            with contextlib.suppress(RuntimeError):  # closed: _start() says why
                self._transport.warm()
            self._start()

    @property
    def sending(self) -> bool:
        """Whether the sender thread was asked to send (by a report, or :meth:`start`)."""
        return self._running

    def prestart(self) -> None:
        """Start the sender thread now, idle (nothing sent, heartbeats included) until the
        first report: ``import tuneplane`` does under ``tuneplane run``, so that the first
        ``report()`` waits for no thread start."""
        with self._start_lock:
            if self._sender is None and not self._closed:
                self._launch(armed=False)

    def _start(self) -> None:
        with self._start_lock:
            if self._running or self._closed:
                return
            if self._sender is not None:  # started idle by prestart()
                self._sender.arm()
            elif not self._launch(armed=True):
                return
            self._running = True
            atexit.register(self._close_at_exit)

    def _launch(self, *, armed: bool) -> bool:
        """Create and start the sender thread (the caller holds the start lock); False when
        no thread could be started, and then nothing will be sent."""
        sender = Sender(
            self._queue,
            self._events,
            self._trajectories,
            self._transport,
            rollouts=RolloutBuffer(self._rollout_cap),
            pipeline=self._pipeline,
            journal=self._journal,
            wake=self._wake,
            batch_points=self._batch_points,
            flush_interval=self._flush_interval,
            heartbeat_interval=self._heartbeat_interval,
            retry=self._retry,
            system_interval=self._system_interval,
            armed=armed,
        )
        try:
            sender.start()
        except RuntimeError as exc:  # e.g. "can't create new thread at interpreter shutdown"
            logger.warning("tuneplane: metrics and events are not reported: %s", exc)
            self._closed = True
            for ledger in (self._queue, self._events, self._trajectories):
                ledger.close()
                ledger.drain_as_dropped(NO_SENDER)
            return False
        self._sender = sender
        return True

    # -- observation events: queued, answering whether they were -------------------------

    def observe(self, event: Mapping[str, object]) -> bool:
        """Queue one observation event in its wire form (see docs/evaluation.md); an
        ``event_id`` is given when it has none. True when queued; False, counted in
        ``health()``, when it breaks a rule, the queue is full or the reporter is closed.
        Never raises, never blocks."""
        try:
            prepared = prepare(event, self._ids)
        except Exception as exc:
            return self._refuse_event(exc)
        queued = self._events.put(prepared)
        if queued and not self._running:
            self._start()
        return queued

    def alert(
        self,
        title: str,
        text: str | None = None,
        *,
        level: AlertLevel = "warn",
        step: int | None = None,
    ) -> bool:
        """Queue an alert of the run (``level`` info, warn or error; a title of 1-200
        characters, a text of at most 4,000). True when queued; False, counted with the
        events in ``health()``, when refused. Never raises, never blocks.

        >>> reporter.alert("reward collapsed", "reward < 0.1 for 50 steps", level="error")
        True

        Without ``step``, the alert is at the step the run has reached (that of the last
        point reported), as an alert raised inside the training loop is about that step.
        """
        if step is None and (reached := self._queue.reached_step()) >= 0:
            step = reached
        item: dict[str, object] = {
            "alert_id": self._ids.next(),
            "title": title,
            "level": level,
            "step": step,
        }
        if text is not None:
            item["text"] = text
        try:
            parse_alerts({"alerts": [item]})
        except Exception as exc:
            return self._refuse_event(exc)
        queued = self._events.put({"type": ALERT_TYPE, **item})
        if queued and not self._running:
            self._start()
        return queued

    def _refuse_event(self, exc: Exception) -> bool:
        self._events.refuse(BAD_INPUT)
        rule = (
            exc.violations[0].rule
            if isinstance(exc, InvalidObservation) and exc.violations
            else type(exc).__name__
        )
        if rule not in self._logged_events:
            self._logged_events.add(rule)
            logger.warning("tuneplane: an observation event was refused: %s", exc)
        return False

    # -- trajectories: queued, answering whether they were -------------------------------

    def trajectory(
        self,
        *,
        scope: Scope,
        messages: Sequence[Mapping[str, Any]],
        total_messages: int | None = None,
        complete: bool | None = None,
        capture_policy: CapturePolicy = "all",
        round_id: str | None = None,
        trial_id: str | None = None,
        trial_attempt: int | None = None,
        step: int | None = None,
        trajectory_id: str | None = None,
        diagnostic: Diagnostic | None = None,
        reward: float | None = None,
        reward_missing: Sequence[str] | None = None,
        collection_policy: str | int | None = None,
        consumption_policy: str | int | None = None,
        metrics: Mapping[str, float] | None = None,
    ) -> bool:
        """Queue the messages of one evaluation trial (``scope="evaluation"``: ``round_id``,
        ``trial_id``, ``trial_attempt`` 0 unless given) or one training rollout
        (``scope="training"``: ``step``, ``trajectory_id``, and optionally ``diagnostic``
        ``failure``/``anomaly``/``low_reward``/``representative``, ``reward``, the reward
        functions that gave none (``reward_missing``), the ``collection_policy`` and
        ``consumption_policy`` versions). ``metrics`` are your producer's totals for the
        whole conversation (``input``, ``output``, ``cached`` tokens, ``cost_usd``), when
        it has them. Each message is a
        mapping with ``role`` and ``content`` (see docs/sdk.md); they are copied now.

        ``total_messages`` defaults to ``len(messages)`` and ``complete`` to whether they
        are equal. A conversation over 1,024 messages or 1 MiB is refused: cut it with
        :func:`tuneplane.truncate_messages`, which declares the truncation. A NaN or
        infinite ``reward`` is sent as no reward, marked invalid.

        True when accepted: queued, or left out on purpose by a retention cap (counted in
        ``health().trajectories_not_uploaded``). False, counted, when refused (logged once
        per rule), the queue is full or the reporter is closed. Never raises, never blocks.

        >>> reporter.trajectory(scope="training", step=120, trajectory_id="r3",
        ...                     diagnostic="low_reward", reward=0.05, messages=messages)
        True
        """
        fields = {
            "total_messages": total_messages,
            "complete": complete,
            "capture_policy": capture_policy,
            "round_id": round_id,
            "trial_id": trial_id,
            "trial_attempt": trial_attempt,
            "step": step,
            "trajectory_id": trajectory_id,
            "diagnostic": diagnostic,
            "reward": reward,
            "reward_missing": reward_missing,
            "collection_policy": collection_policy,
            "consumption_policy": consumption_policy,
            "metrics": metrics,
        }
        try:
            prepared = prepare_trajectory(scope, messages, fields)
        except Refused as exc:
            return self._refuse_trajectory(exc.rule, str(exc))
        except Exception as exc:  # a bug of ours, or input beyond reading: never raised
            return self._refuse_trajectory(type(exc).__name__, f"{type(exc).__name__}: {exc}")
        if not self._caps.uploads(prepared):
            self._trajectories.count_left_out()
            return True
        dropped = self._trajectories.put(prepared)
        if dropped is not None:
            self._log_trajectory_once(
                dropped,
                f"a trajectory's text was dropped ({dropped}: at most "
                f"{self._trajectories.capacity} documents or "
                f"{self._trajectories.capacity_bytes // 2**20} MiB wait to be sent); every "
                "drop is counted in health()",
            )
            return False
        if not self._running:
            self._start()
        return True

    def _refuse_trajectory(self, rule: str, message: str) -> bool:
        self._trajectories.refuse(BAD_INPUT)
        self._log_trajectory_once(rule, f"a trajectory was refused: {message}")
        return False

    def _log_trajectory_once(self, key: str, message: str) -> None:
        # Some rules name a number; past a few dozen kinds the counters say the rest.
        if key not in self._logged_trajectories and len(self._logged_trajectories) < 64:
            self._logged_trajectories.add(key)
            logger.warning("tuneplane: %s", message)

    # -- observation events: strict --------------------------------------------------------

    def observations(
        self, events: Iterable[Mapping[str, object]], *, timeout: float | None = None
    ) -> ObservationsSent:
        """Send observation events (wire form, see docs/evaluation.md) now, in batches of
        at most 32, and return when the server has them all. Every event is checked first:
        one that breaks a rule raises :class:`InvalidObservation` before anything is sent.
        Events without an ``event_id`` are given one; give your own to make a replay of
        the same events harmless. Transport errors and 5xx are retried (about 30 s per
        batch, or ``timeout`` seconds in all); then, or when the server refuses a batch,
        :class:`DeliveryFailed` is raised (batches before it were delivered).

        >>> sent = reporter.observations(trial_events)
        >>> sent.new, sent.duplicate
        (500, 0)
        """
        prepared = [
            prepare(event, self._ids, f"events[{index}]") for index, event in enumerate(events)
        ]
        if self._closed:
            raise DeliveryFailed(f"{self!r} is closed")
        deadline = None if timeout is None else time.monotonic() + timeout
        new = duplicate = 0
        for start in range(0, len(prepared), OBSERVATION_BATCH_MAX):
            chunk = prepared[start : start + OBSERVATION_BATCH_MAX]
            outcome = self._post_strictly(
                OBSERVATIONS_PATH,
                {"events": chunk},
                deadline,
                f"could not send observation events to {self.endpoint} ({start} of "
                f"{len(prepared)} delivered)",
                count_failures=True,
            )
            answer = outcome.body if isinstance(outcome.body, dict) else {}
            new += int(answer.get("new", 0))
            duplicate += int(answer.get("duplicate", 0))
        return ObservationsSent(new, duplicate, tuple(str(e["event_id"]) for e in prepared))

    # -- delivery ------------------------------------------------------------------------

    def health(self) -> Health:
        """Delivery counters now (points, events and trajectories queued, sent, dropped,
        ...)."""
        health = self._trajectories.add_to(self._events.add_to(self._queue.health()))
        if self._journal is not None and self._journal.not_journaled:
            health = replace(health, not_journaled=dict(self._journal.not_journaled))
        return health

    @property
    def spool_directory(self) -> Path | None:
        """This reporter's journal directory (durable spool), once it has one."""
        return None if self._journal is None else self._journal.directory

    def flush(self, timeout: float = FLUSH_TIMEOUT_DEFAULT) -> bool:
        """Wait up to ``timeout`` seconds until every point, event and trajectory reported
        so far was sent, dropped or left out (training rollouts waiting for their step's
        sample are chosen now); True when that happened in time."""
        ledgers = (self._queue, self._events, self._trajectories)
        if not self._running or self._sender is None:
            return all(ledger.pending == 0 for ledger in ledgers)
        deadline = time.monotonic() + timeout
        marks = [(ledger, ledger.mark()) for ledger in ledgers]
        self._trajectories.want_flush()
        self._wake.set()
        settled = all(
            ledger.wait_settled(mark, deadline - time.monotonic()) for ledger, mark in marks
        )
        poster = self._sender.poster
        # With the spool, what is journaled is settled; wait for it to be posted too.
        return settled and (poster is None or poster.wait_idle(deadline - time.monotonic()))

    def close(self, timeout: float = FLUSH_TIMEOUT_DEFAULT) -> Health:
        """Send what is queued for up to ``timeout`` seconds, then stop; later reports are
        dropped (counted). Returns the final counters. Calling it again does nothing."""
        with self._start_lock:
            if self._closed:
                return self.health()
            self._closed = True
        atexit.unregister(self._close_at_exit)
        for ledger in (self._queue, self._events, self._trajectories):
            ledger.close()
        sender = self._sender
        if sender is not None and not self._running:
            sender.abandon()  # started idle, never asked to send: it sends nothing
        elif sender is not None:
            sender.stop(time.monotonic() + timeout)
            # The sender bounds each request by the deadline; the grace covers the rest.
            sender.join(timeout + 1.0)
            if sender.is_alive():
                for ledger in (self._queue, self._events, self._trajectories):
                    ledger.drain_as_dropped(OUT_OF_TIME, abandon=True)
                return self.health()
        self._transport.close()
        if self._pipeline is not None:
            self._pipeline.close()
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
        self._post_strictly(
            STATUS_PATH,
            body,
            deadline,
            f"could not report status {status!r} of {self.project}/{self.run} to {self.endpoint}",
        )

    def _post_strictly(
        self,
        path: str,
        body: object,
        deadline: float | None,
        failure: str,
        *,
        count_failures: bool = False,
    ) -> Outcome:
        """POST with the strict calls' retries; :class:`DeliveryFailed` (``failure``, then
        why) when it was not delivered. ``count_failures`` counts failed attempts in
        ``health().failed_sends``, as for telemetry."""
        outcome = self._transport.post(
            path,
            body,
            retry=self._status_retry,
            deadline=lambda: deadline,
            on_failed_attempt=self._queue.count_failed_send if count_failures else None,
        )
        if not outcome.delivered:
            detail = f": {outcome.detail}" if outcome.detail else ""
            raise DeliveryFailed(f"{failure}: {outcome.reason}{detail}", outcome.status)
        return outcome

    def _forget_after_fork(self) -> None:
        """In a forked child the sender thread is gone and a lock may be held forever:
        start over with a closed queue, so that reports are counted, never waited on."""
        self._wake = threading.Event()
        self._queue = PointQueue(self._queue.capacity, self._batch_points, self._wake)
        self._queue.close()
        self._events = EventQueue(self._events.capacity, OBSERVATION_BATCH_MAX, self._wake)
        self._events.close()
        self._trajectories = TrajectoryQueue(
            self._trajectories.capacity, self._trajectories.capacity_bytes, self._wake
        )
        self._trajectories.close()
        self._ids = EventIds(self.attempt)
        self._start_lock = threading.Lock()
        self._closed = True
        self._sender = None
        self._running = False


def _after_fork_in_child() -> None:
    for reporter in list(_reporters):
        reporter._forget_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)
