"""tuneplane: telemetry for fine-tuning and RL training runs.

Training code reports scalar metrics with :func:`report` and observation events with
:func:`event`, :func:`distribution` and their kin (or a :class:`Reporter` of its own);
``tuneplane run`` sets up the environment they read::

    import tuneplane

    tuneplane.report({"train/loss": 0.71, "train/reward": 0.4}, step=120)
    tuneplane.distribution("rollout/reward", rewards, bounds=[0, 1, 2, 4, 8], step=120)
"""

__version__ = "0.1.0"

# The version is defined first: the client reads it for its User-Agent.
from tuneplane.client.default import (
    declare_population,
    distribution,
    event,
    health_snapshot,
    report,
    trial_result,
)
from tuneplane.client.errors import (
    DeliveryFailed,
    InvalidObservation,
    NotConfigured,
    ReporterError,
)
from tuneplane.client.events import histogram
from tuneplane.client.health import Health
from tuneplane.client.reporter import Reporter

__all__ = [
    "DeliveryFailed",
    "Health",
    "InvalidObservation",
    "NotConfigured",
    "Reporter",
    "ReporterError",
    "__version__",
    "declare_population",
    "distribution",
    "event",
    "health_snapshot",
    "histogram",
    "report",
    "trial_result",
]
