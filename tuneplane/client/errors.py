"""The SDK's exceptions. Reporting metrics never raises; only the strict calls do.

::

    ReporterError             base of everything the SDK raises
    ├── NotConfigured         Reporter.from_env() without TUNEPLANE_JOB_* in the environment,
    │                         or with a variable that breaks its rule
    ├── DeliveryFailed        a strict call (Reporter.status, Reporter.observations, run
    │                         creation) failed for good
    ├── InvalidObservation    Reporter.observations() was given an event that breaks a rule
    │                         (also a ValueError); nothing was sent
    ├── ResumeRefused         init(resume="must") of a run that does not exist, or
    │                         init(resume="never") of one that does
    └── ApiError              a read of tuneplane.Api the server refused (``status`` is its
                              HTTP status) or that reached no server (``status`` is None)
"""

from __future__ import annotations

from collections.abc import Sequence

from tuneplane.contract.errors import Violation


class ReporterError(Exception):
    """Base class of the SDK's exceptions."""


class NotConfigured(ReporterError):
    """The environment does not say where to report (run the command under ``tuneplane
    run``, or set ``TUNEPLANE_JOB_ENDPOINT``, ``TUNEPLANE_JOB_RUN_ID`` and
    ``TUNEPLANE_JOB_TOKEN``), or one of its variables breaks its rule (the message names
    the variable, its value and what is allowed)."""


class DeliveryFailed(ReporterError):
    """A strict request failed: the server refused it (``status`` is its HTTP status) or
    could not be reached after every retry (``status`` is None)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class InvalidObservation(ReporterError, ValueError):
    """An observation event breaks a rule of the wire contract. ``violations`` names each
    broken rule and its field (``events[3].histogram.bounds: must be strictly
    increasing``)."""

    def __init__(self, violations: Sequence[Violation]) -> None:
        self.violations = tuple(violations)
        message = "; ".join(str(v) for v in self.violations[:5])
        if len(self.violations) > 5:
            message += f" (and {len(self.violations) - 5} more)"
        super().__init__(message)
        self.message = message


class ResumeRefused(ReporterError):
    """``init()`` could not honour ``resume``: ``"must"`` and the run does not exist, or
    ``"never"`` and it does. Nothing was started."""


class ApiError(ReporterError):
    """A read of :class:`tuneplane.Api` failed: ``status`` is the server's HTTP status (401
    no valid key, 403 not allowed, 404 no such project, run or series, or one the key may
    not see) and ``message`` its own words; ``status`` is None when no server answered."""

    def __init__(self, message: str, status: int | None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
