"""The SDK's own environment variables (the ones ``tuneplane run`` sets are in
``tuneplane.contract.environment``), with their defaults."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Final

#: Seconds the SDK and the runner keep sending at exit before giving up (default 10).
FLUSH_TIMEOUT_VARIABLE: Final = "TUNEPLANE_FLUSH_TIMEOUT"
FLUSH_TIMEOUT_DEFAULT: Final = 10.0
#: Points the SDK queue holds before new ones are dropped (default 100,000).
QUEUE_MAX_POINTS_VARIABLE: Final = "TUNEPLANE_QUEUE_MAX_POINTS"

logger = logging.getLogger("tuneplane")


def seconds_setting(environ: Mapping[str, str], name: str, default: float) -> float:
    """A non-negative number of seconds from ``environ[name]``; the default, with a
    warning, when it is something else."""
    raw = environ.get(name, "")
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        logger.warning("tuneplane: ignoring %s=%r (not a number of seconds)", name, raw)
        return default
    return value


def flush_timeout(environ: Mapping[str, str]) -> float:
    return seconds_setting(environ, FLUSH_TIMEOUT_VARIABLE, FLUSH_TIMEOUT_DEFAULT)
