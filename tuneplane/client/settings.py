"""The SDK's own environment variables (the ones ``tuneplane run`` sets are in
``tuneplane.contract.environment``), with their rules and defaults."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from tuneplane.client.errors import NotConfigured
from tuneplane.contract import environment
from tuneplane.contract.datadir import DATA_DIR, TRACKIO_DIR
from tuneplane.contract.limits import (
    FLUSH_TIMEOUT_MAX_SECONDS,
    QUEUE_MAX_POINTS_MAX,
    ROLLOUT_SAMPLES_PER_STEP,
    SCALAR_QUEUE_MAX_POINTS,
    VAL_UPLOAD_SAMPLES_MAX,
)
from tuneplane.contract.run_meta import GROUP_MAX_CHARS, WORD_RULE, as_group, word_problem
from tuneplane.contract.settings import Reader, Rule, Setting, SettingError, integer, number

#: Seconds the SDK and the runner keep sending at exit before giving up (default 10).
FLUSH_TIMEOUT_VARIABLE: Final = "TUNEPLANE_FLUSH_TIMEOUT"
FLUSH_TIMEOUT_DEFAULT: Final = 10.0
#: Points the SDK queue holds before new ones are dropped (default 100,000).
QUEUE_MAX_POINTS_VARIABLE: Final = "TUNEPLANE_QUEUE_MAX_POINTS"
#: Trials of an evaluation round whose trajectories are uploaded (unset: the round's rule).
VAL_UPLOAD_SAMPLES_VARIABLE: Final = "TUNEPLANE_JOB_VAL_UPLOAD_SAMPLES"
#: Training rollouts per step whose trajectories are uploaded (default 32).
ROLLOUT_UPLOAD_SAMPLES_VARIABLE: Final = "TUNEPLANE_JOB_ROLLOUT_UPLOAD_SAMPLES"

FLUSH_TIMEOUT: Final = Setting(
    FLUSH_TIMEOUT_VARIABLE,
    number("seconds", FLUSH_TIMEOUT_MAX_SECONDS, zero=True),
    FLUSH_TIMEOUT_DEFAULT,
    "Seconds the SDK and the runner keep sending at exit.",
    default_text=f"{FLUSH_TIMEOUT_DEFAULT:g}",
)
QUEUE_MAX_POINTS: Final = Setting(
    QUEUE_MAX_POINTS_VARIABLE,
    integer(1, QUEUE_MAX_POINTS_MAX, "points"),
    SCALAR_QUEUE_MAX_POINTS,
    "Points the SDK queue holds before new ones are dropped.",
)
VAL_UPLOAD_SAMPLES: Final = Setting(
    VAL_UPLOAD_SAMPLES_VARIABLE,
    integer(0, VAL_UPLOAD_SAMPLES_MAX, "trials"),
    None,
    "Trials of an evaluation round that keep their trajectory text (0: none). Unset: every "
    "trial of a cohort of at most 128, else 32.",
)
ROLLOUT_UPLOAD_SAMPLES: Final = Setting(
    ROLLOUT_UPLOAD_SAMPLES_VARIABLE,
    integer(0, ROLLOUT_SAMPLES_PER_STEP, "rollouts"),
    ROLLOUT_SAMPLES_PER_STEP,
    "Training rollouts per step that keep their trajectory text, stratified by diagnostic "
    "category (0: none).",
)
#: Seconds between samples of CPU, memory and GPU into ``system/…`` series (0: off).
SYSTEM_METRICS_VARIABLE: Final = "TUNEPLANE_SYSTEM_METRICS_SECONDS"
SYSTEM_METRICS_DEFAULT: Final = 10.0
SYSTEM_METRICS_MAX_SECONDS: Final = 3600.0
SYSTEM_METRICS: Final = Setting(
    SYSTEM_METRICS_VARIABLE,
    number("seconds", SYSTEM_METRICS_MAX_SECONDS, zero=True),
    SYSTEM_METRICS_DEFAULT,
    "Seconds between samples of CPU, memory and GPU into system/… series (0: off).",
    default_text=f"{SYSTEM_METRICS_DEFAULT:g}",
)
#: The durable spool (docs/sdk.md, "Durable spool"): unset, none.
SPOOL_DIR_VARIABLE: Final = "TUNEPLANE_SPOOL_DIR"
SPOOL_MAX_MB_VARIABLE: Final = "TUNEPLANE_SPOOL_MAX_MB"
SPOOL_MAX_MB_DEFAULT: Final = 1024
SPOOL_MAX_MB_MAX: Final = 2**20  # a terabyte


def _directory(raw: str) -> str | None:
    return None if os.path.isfile(raw) else raw


SPOOL_DIR: Final = Setting(
    SPOOL_DIR_VARIABLE,
    Rule("must be a directory, not a file", _directory),
    None,
    "A directory where the SDK journals every point, event and trajectory before sending "
    "it; `tuneplane sync` delivers what the server did not acknowledge. Unset: no spool.",
)
SPOOL_MAX_MB: Final = Setting(
    SPOOL_MAX_MB_VARIABLE,
    integer(1, SPOOL_MAX_MB_MAX, "MB"),
    SPOOL_MAX_MB_DEFAULT,
    "Megabytes one reporter's journal may hold; past that, new batches are not journaled.",
)

#: Offline is a mode (docs/sdk.md, "Offline runs"): with the spool, a run is journaled whole
#: and `tuneplane sync` creates it later.
MODE_VARIABLE: Final = "TUNEPLANE_MODE"
MODES: Final = ("online", "offline", "disabled")
#: W&B's ``mode="disabled"``: every call does nothing, with no network and no files.
DISABLED: Final = "disabled"


def _mode(raw: str) -> str | None:
    return raw if raw in MODES else None


MODE: Final = Setting(
    MODE_VARIABLE,
    Rule("must be online, offline or disabled", _mode),
    "online",
    "offline: init() and `tuneplane run` journal the run in the spool (TUNEPLANE_SPOOL_DIR) "
    "without reaching the server, and `tuneplane sync` creates and delivers it later; "
    "disabled: every SDK call does nothing (no network, no files) and `tuneplane run` runs "
    "the command untracked; online (the default) goes offline only when the server cannot "
    "be reached at start.",
)


def disabled(environ: Mapping[str, str]) -> bool:
    """``TUNEPLANE_MODE=disabled``: nothing is reported, and nothing says it is not."""
    return environ.get(MODE_VARIABLE, "").strip() == DISABLED


#: The group of the runs ``init()`` and ``tuneplane run`` create, when not given.
RUN_GROUP_VARIABLE: Final = "TUNEPLANE_RUN_GROUP"
#: W&B's variable, read when ours is unset, so that a launcher written for W&B groups here
#: too; its groups are free text, mapped as other tools' groups are (never refused).
WANDB_RUN_GROUP_VARIABLE: Final = "WANDB_RUN_GROUP"


def _group(raw: str) -> str | None:
    return raw if word_problem(raw, GROUP_MAX_CHARS) is None else None


RUN_GROUP: Final = Setting(
    RUN_GROUP_VARIABLE,
    Rule(f"must be 1-{GROUP_MAX_CHARS} {WORD_RULE}", _group),
    None,
    "The group of a run init() or `tuneplane run` creates when neither init(group=) nor "
    "--group gives one (else W&B's WANDB_RUN_GROUP, its other characters becoming -).",
)


def group_from_env(reader: Reader) -> str | None:
    """``TUNEPLANE_RUN_GROUP`` (a bad one is a problem of ``reader``), else W&B's
    ``WANDB_RUN_GROUP`` as a group here (:func:`~tuneplane.contract.run_meta.as_group`)."""
    return reader.get(RUN_GROUP) or as_group(reader.environ.get(WANDB_RUN_GROUP_VARIABLE))


#: Every variable the SDK (in a training process) reads.
SDK_SETTINGS: Final[tuple[Setting[Any], ...]] = (
    *environment.JOB_SETTINGS,
    FLUSH_TIMEOUT,
    QUEUE_MAX_POINTS,
    VAL_UPLOAD_SAMPLES,
    ROLLOUT_UPLOAD_SAMPLES,
    SPOOL_DIR,
    SPOOL_MAX_MB,
    SYSTEM_METRICS,
    MODE,
)

#: Every variable ``tuneplane run`` reads (the SDK's queue and upload caps for its command).
RUNNER_SETTINGS: Final[tuple[Setting[Any], ...]] = (
    environment.URL_SETTING,
    environment.API_KEY_SETTING,
    DATA_DIR,
    TRACKIO_DIR,
    FLUSH_TIMEOUT,
    QUEUE_MAX_POINTS,
    VAL_UPLOAD_SAMPLES,
    ROLLOUT_UPLOAD_SAMPLES,
    SPOOL_DIR,
    SPOOL_MAX_MB,
    SYSTEM_METRICS,
    MODE,
    RUN_GROUP,
)
#: What ``tuneplane run`` checks for its command, whose SDK would refuse a bad value only
#: once training had started.
COMMAND_SETTINGS: Final[tuple[Setting[Any], ...]] = (
    QUEUE_MAX_POINTS,
    VAL_UPLOAD_SAMPLES,
    ROLLOUT_UPLOAD_SAMPLES,
    SPOOL_DIR,
    SPOOL_MAX_MB,
    SYSTEM_METRICS,
)


@dataclass(frozen=True, slots=True)
class SpoolSettings:
    """The durable spool: the directory journals go under, and one journal's bound."""

    directory: str
    max_mb: int = SPOOL_MAX_MB_DEFAULT
    #: An offline attempt's directory (``offline-<key>``, :mod:`tuneplane.client.offline`).
    group: str = ""


def spool_settings(reader: Reader) -> SpoolSettings | None:
    """``TUNEPLANE_SPOOL_DIR`` and ``TUNEPLANE_SPOOL_MAX_MB`` (problems go to ``reader``)."""
    directory = reader.get(SPOOL_DIR)
    max_mb = reader.read(SPOOL_MAX_MB)
    return None if directory is None else SpoolSettings(directory, max_mb)


def flush_timeout(environ: Mapping[str, str]) -> float:
    """``TUNEPLANE_FLUSH_TIMEOUT``; :class:`~tuneplane.contract.settings.SettingError`
    when it breaks its rule."""
    return FLUSH_TIMEOUT.read(environ)


@dataclass(frozen=True, slots=True)
class JobSettings:
    """What a training process under ``tuneplane run`` reads from its environment."""

    endpoint: str
    run_id: str
    token: str
    attempt: int | None
    exit_timeout: float
    queue_capacity: int
    val_upload_samples: int | None = None
    rollout_upload_samples: int = ROLLOUT_SAMPLES_PER_STEP
    spool: SpoolSettings | None = None
    system_interval: float = SYSTEM_METRICS_DEFAULT
    next_step: int = 0
    #: The key the runner started the attempt with (a retried upload names it).
    attempt_key: str | None = None

    def __repr__(self) -> str:  # the token never prints
        return f"JobSettings({self.run_id!r} at {self.endpoint!r}, attempt={self.attempt})"


def job_settings(environ: Mapping[str, str]) -> JobSettings:
    """The job's settings; :class:`NotConfigured` saying which variables are missing, or
    (caused by a :class:`SettingError`) which are wrong, one line each."""
    # An offline attempt has no token yet: `tuneplane sync` starts it later.
    offline = bool(environ.get(environment.JOB_OFFLINE))
    needed = environment.JOB_SETTINGS[:2] if offline else environment.JOB_SETTINGS[:3]
    missing = [s.name for s in needed if not environ.get(s.name)]
    if missing:
        raise NotConfigured(
            f"{', '.join(missing)} not set: run the training command under "
            "`tuneplane run` to report metrics"
        )
    reader = Reader(environ)
    endpoint = reader.get(environment.JOB_ENDPOINT_SETTING)
    run_id = reader.get(environment.JOB_RUN_ID_SETTING)
    token = reader.get(environment.JOB_TOKEN_SETTING) if not offline else ""
    group = reader.get(environment.JOB_OFFLINE_SETTING)
    reader.read(MODE)  # the runner decided; checked here as every SDK setting is
    attempt = reader.get(environment.JOB_ATTEMPT_SETTING)
    next_step = reader.read(environment.JOB_NEXT_STEP_SETTING)
    attempt_key = reader.get(environment.JOB_ATTEMPT_KEY_SETTING)
    exit_timeout = reader.read(FLUSH_TIMEOUT)
    capacity = reader.read(QUEUE_MAX_POINTS)
    val_samples = reader.get(VAL_UPLOAD_SAMPLES)
    rollout_samples = reader.read(ROLLOUT_UPLOAD_SAMPLES)
    spool = spool_settings(reader)
    system_interval = reader.read(SYSTEM_METRICS)
    if environ.get("RANK", "0").strip() not in ("", "0"):
        system_interval = 0  # rank 0 samples the machine; the others would repeat it
    try:
        reader.done()
    except SettingError as exc:
        raise NotConfigured(str(exc)) from exc
    if group and spool is None:
        raise NotConfigured(
            f"{environment.JOB_OFFLINE} needs {SPOOL_DIR_VARIABLE}: an offline attempt is "
            "journaled there"
        )
    if group and spool is not None:
        spool = replace(spool, group=group)
    # Present (checked above) and valid (or done() raised).
    assert endpoint is not None
    assert run_id is not None
    assert token is not None
    return JobSettings(
        endpoint,
        run_id,
        token,
        attempt,
        exit_timeout,
        capacity,
        val_samples,
        rollout_samples,
        spool,
        system_interval,
        next_step,
        attempt_key,
    )
