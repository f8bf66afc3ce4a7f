"""The typed observation calls of :class:`~tuneplane.client.reporter.Reporter`: each
builds one event in its wire form (docs/evaluation.md) and queues it with ``observe()``,
which checks it, counts a refusal and never raises."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tuneplane.client.events import histogram
from tuneplane.client.trajectories import EvaluationCaps
from tuneplane.contract.declared import canonical_digest, recorded
from tuneplane.contract.observations import TrialStatus


class ObservationCalls(ABC):
    """Free events, distributions, health snapshots, trial results and population
    declarations, queued through :meth:`observe`."""

    #: The trajectory text caps a declaration tells about its round.
    _caps: EvaluationCaps

    @abstractmethod
    def observe(self, event: Mapping[str, object]) -> bool:
        """Queue one observation event in its wire form; True when queued."""

    @abstractmethod
    def _refuse_event(self, exc: Exception) -> bool:
        """Count and log an event that broke a rule; False."""

    def event(
        self, name: str, fields: Mapping[str, object] | None = None, *, step: int | None = None
    ) -> bool:
        """Queue a free event: ``name`` (a metric-style name) and up to 32 ``fields`` of
        finite numbers, booleans or strings. True when queued (not yet delivered); False,
        counted in ``health()``, when refused. Never raises, never blocks.

        >>> reporter.event("rollout/done", {"tokens": 512, "env": "math"}, step=7)
        True
        """
        return self.observe({"type": "event", "name": name, "step": step, "fields": fields})

    def distribution(
        self,
        name: str,
        values: Iterable[float] | None = None,
        *,
        bounds: Sequence[float],
        counts: Sequence[int] | None = None,
        step: int | None = None,
        fields: Mapping[str, object] | None = None,
    ) -> bool:
        """Queue a histogram of ``values`` (counted here, each one, see :func:`histogram`)
        or of ``counts`` already made, one per bucket ``(-inf, b0], (b0, b1], …,
        (bn-1, +inf)`` of ``bounds`` (1-64 finite, strictly increasing). Give ``values``
        or ``counts``, not both. True when queued; False, counted, when refused.

        >>> reporter.distribution("rollout/reward", rewards, bounds=[0, 1, 2, 4, 8], step=7)
        True
        """
        try:
            if (values is None) == (counts is None):
                raise ValueError("give the raw values or the counts per bucket, not both")
            shape = (
                histogram(values, bounds)
                if values is not None
                else {"bounds": bounds, "counts": counts}
            )
        except Exception as exc:
            return self._refuse_event(exc)
        return self.observe(
            {
                "type": "distribution",
                "name": name,
                "step": step,
                "histogram": shape,
                "fields": fields,
            }
        )

    def health_snapshot(self, fields: Mapping[str, object], *, step: int | None = None) -> bool:
        """Queue a health snapshot (GPU memory, throughput, ...: up to 32 fields). Unlike
        other events, snapshots stay findable however many events follow them
        (``GET …/observations?type=health``). True when queued."""
        return self.observe({"type": "health", "step": step, "fields": fields})

    def trial_result(
        self,
        round_id: str,
        trial_id: str,
        status: TrialStatus,
        *,
        trial_attempt: int = 0,
        eligible: bool = False,
        reward: float | None = None,
        error_type: str | None = None,
        event_id: str | None = None,
    ) -> bool:
        """Queue one terminal trial attempt of evaluation round ``round_id``: ``status`` is
        ``success``, ``failure`` (the model was wrong), ``infra_error`` (the execution
        failed) or ``unscored``. ``eligible`` is your training-eligibility decision (never
        for ``infra_error`` or ``unscored``; keep held-out evaluation ineligible). True
        when queued. For many results at once, and delivery you can wait for, use
        :meth:`observations`."""
        return self.observe(
            {
                "type": "trial",
                "event_id": event_id,
                "round_id": round_id,
                "trial_id": trial_id,
                "trial_attempt": trial_attempt,
                "status": status,
                "eligible": eligible,
                "reward": reward,
                "error_type": error_type,
            }
        )

    def declare_population(
        self,
        round_id: str,
        expected: int,
        *,
        dataset: str | None = None,
        cohort: str | None = None,
        verifier: str | None = None,
        settings: str | None = None,
        task_name: str | None = None,
        task_version: str | None = None,
        event_id: str | None = None,
        protocol: dict[str, Any] | None = None,
        planned_trials: Sequence[str] | None = None,
    ) -> bool:
        """Queue the declaration of round ``round_id``: ``expected`` trials, and the
        lowercase hex SHA-256 digests of the dataset manifest, cohort, verifier and
        settings where known. The first declaration of a round wins; a changed population
        needs a new round ID. True when queued. With ``TUNEPLANE_JOB_VAL_UPLOAD_SAMPLES``
        set, the declaration carries it as the round's ``text_samples``, and this
        reporter's ``trajectory()`` uploads the text of about that many of its trials.

        ``protocol`` (the evaluation settings, JSON-like) is recorded redacted when it
        fits 8 KiB, and is what ``settings`` is taken over when no ``settings`` digest is
        given: two rounds whose settings differ then name the keys that differ.
        ``planned_trials`` (every planned trial ID, ``expected`` of them, at most 256) names
        the trials never reported."""
        if settings is None and protocol is not None:
            settings = canonical_digest(protocol)
        digests = {
            name: digest
            for name, digest in (
                ("dataset", dataset),
                ("cohort", cohort),
                ("verifier", verifier),
                ("settings", settings),
            )
            if digest is not None
        }
        task = {"name": task_name, "version": task_version}
        queued = self.observe(
            {
                "type": "population",
                "event_id": event_id,
                "round_id": round_id,
                "expected": expected,
                "digests": digests,
                "task": {k: v for k, v in task.items() if v is not None} or None,
                "text_samples": self._caps.override,
                **recorded(protocol, planned_trials, expected),
            }
        )
        if queued:
            self._caps.declared(round_id, expected)
        return queued
