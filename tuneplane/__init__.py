"""tuneplane: telemetry for fine-tuning and RL training runs.

Training code reports scalar metrics with :func:`report` (or a :class:`Reporter` of its
own); ``tuneplane run`` sets up the environment both read::

    import tuneplane

    tuneplane.report({"train/loss": 0.71, "train/reward": 0.4}, step=120)
"""

__version__ = "0.1.0"

# The version is defined first: the client reads it for its User-Agent.
from tuneplane.client.default import report
from tuneplane.client.errors import DeliveryFailed, NotConfigured, ReporterError
from tuneplane.client.health import Health
from tuneplane.client.reporter import Reporter

__all__ = [
    "DeliveryFailed",
    "Health",
    "NotConfigured",
    "Reporter",
    "ReporterError",
    "__version__",
    "report",
]
