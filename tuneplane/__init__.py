"""tuneplane: telemetry for fine-tuning and RL training runs.

Training code starts a run with :func:`init` and reports with :func:`log`, :func:`alert` and
:func:`finish` (the calls of W&B and Trackio); under ``tuneplane run``, :func:`report` and
the observation events (:func:`event`, :func:`distribution` and their kin) need no
``init()``. :func:`trajectory` reports the messages of an evaluation trial or a training
rollout (:func:`truncate_messages` cuts a long one, saying so); :func:`register_export`
records an export the run wrote, with its digest. :class:`Api` reads runs and their points
back, as lists or NumPy, pandas or polars frames::

    import tuneplane

    with tuneplane.init(project="grpo", name="qwen-7b", config={"lr": 1e-5}):
        tuneplane.log({"train/loss": 0.71, "train/reward": 0.4})
        tuneplane.distribution("rollout/reward", rewards, bounds=[0, 1, 2, 4, 8])
"""

# The version is defined first: the client reads it for its User-Agent.
from tuneplane.client import default as _default
from tuneplane.client.api import Api
from tuneplane.client.default import (
    declare_population,
    distribution,
    event,
    health_snapshot,
    report,
    trial_result,
)
from tuneplane.client.errors import (
    ApiError,
    DeliveryFailed,
    InvalidObservation,
    NotConfigured,
    ReporterError,
    ResumeRefused,
)
from tuneplane.client.events import histogram
from tuneplane.client.health import Health
from tuneplane.client.reporter import Reporter
from tuneplane.client.session import (
    Run,
    alert,
    finish,
    init,
    log,
    register_export,
    trajectory,
)
from tuneplane.client.trajectories import truncate_messages
from tuneplane.contract.version import __version__

# Under `tuneplane run`: the reporter's thread, started now, so no training call waits for it.
_default.prepare()

__all__ = [
    "Api",
    "ApiError",
    "DeliveryFailed",
    "Health",
    "InvalidObservation",
    "NotConfigured",
    "Reporter",
    "ReporterError",
    "ResumeRefused",
    "Run",
    "__version__",
    "alert",
    "declare_population",
    "distribution",
    "event",
    "finish",
    "health_snapshot",
    "histogram",
    "init",
    "log",
    "register_export",
    "report",
    "trajectory",
    "trial_result",
    "truncate_messages",
]
