"""The SDK's exceptions. Reporting metrics never raises; only the strict calls do.

::

    ReporterError             base of everything the SDK raises
    ├── NotConfigured         Reporter.from_env() without TUNEPLANE_JOB_* in the environment
    └── DeliveryFailed        a strict call (Reporter.status, run creation) failed for good
"""

from __future__ import annotations


class ReporterError(Exception):
    """Base class of the SDK's exceptions."""


class NotConfigured(ReporterError):
    """The environment does not say where to report (run the command under ``tuneplane
    run``, or set ``TUNEPLANE_JOB_ENDPOINT``, ``TUNEPLANE_JOB_RUN_ID`` and
    ``TUNEPLANE_JOB_TOKEN``)."""


class DeliveryFailed(ReporterError):
    """A strict request failed: the server refused it (``status`` is its HTTP status) or
    could not be reached after every retry (``status`` is None)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
