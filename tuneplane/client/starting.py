"""How :func:`tuneplane.init` starts reporting a run of its own, once the run is known: the
SDK's settings as it reads them, then the reporter, the console capture and (with the
durable spool) the journal of its log lines and status — for an attempt started on the
server, or for one journaled offline (:mod:`tuneplane.client.offline`) when
``TUNEPLANE_MODE=offline`` or the server could not be reached with the spool on. Also the
config ``init()`` declares under ``tuneplane run``, recorded on the runner's attempt.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tuneplane.client import offline as offline_attempts
from tuneplane.client.attempt_config import config_body, journal_config, send_config
from tuneplane.client.attempt_spool import AttemptSpool
from tuneplane.client.console import ConsoleCapture
from tuneplane.client.errors import DeliveryFailed
from tuneplane.client.logs import LogShipper
from tuneplane.client.reporter import Reporter
from tuneplane.client.runner import SETUP_TIMEOUT, attempt_spool
from tuneplane.client.settings import (
    FLUSH_TIMEOUT,
    MODE,
    QUEUE_MAX_POINTS,
    ROLLOUT_UPLOAD_SAMPLES,
    SYSTEM_METRICS,
    VAL_UPLOAD_SAMPLES,
    JobSettings,
    SpoolSettings,
    spool_settings,
)
from tuneplane.client.spool import Target
from tuneplane.client.started import StartedAttempt
from tuneplane.client.transport import Transport
from tuneplane.contract import environment
from tuneplane.contract.settings import Reader


def say(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(f"tuneplane: {line}", file=sys.stderr, flush=True)


@dataclass(frozen=True, slots=True)
class Journaled:
    """With the durable spool: the journal of the run's log lines and status, the log
    shipper that feeds it, and the offline attempt's directory when it is one."""

    spool: AttemptSpool
    logs: LogShipper
    offline: Path | None = None


@dataclass(frozen=True, slots=True)
class Reporting:
    """What a run of ``init()``'s own reports through."""

    reporter: Reporter
    console: ConsoleCapture
    attempt: int | None
    journal: Journaled | None = None


@dataclass(frozen=True, slots=True)
class Options:
    """The SDK's settings as :func:`init` reads them."""

    url: str
    exit_timeout: float
    capacity: int
    val_samples: int | None
    rollout_samples: int
    spool: SpoolSettings | None
    system_interval: float
    offline: bool

    @classmethod
    def read(cls, server: str | None) -> Options:
        """From the environment (``server``, when given, wins over ``TUNEPLANE_URL``);
        :class:`~tuneplane.contract.settings.SettingError` naming each bad variable."""
        reader = Reader(os.environ)
        url = server or reader.read(environment.URL_SETTING) or environment.DEFAULT_URL
        options = cls(
            url.rstrip("/"),
            reader.read(FLUSH_TIMEOUT),
            reader.read(QUEUE_MAX_POINTS),
            reader.get(VAL_UPLOAD_SAMPLES),
            reader.read(ROLLOUT_UPLOAD_SAMPLES),
            spool_settings(reader),
            reader.read(SYSTEM_METRICS),
            reader.read(MODE) == "offline",
        )
        reader.done()
        return options

    def reporter(
        self,
        endpoint: str,
        run_id: str,
        token: str,
        attempt: int | None,
        next_step: int,
        spool: SpoolSettings | None = None,
    ) -> Reporter:
        return Reporter(
            endpoint,
            run_id,
            token,
            attempt=attempt,
            exit_timeout=self.exit_timeout,
            queue_capacity=self.capacity,
            next_step=next_step,
            val_upload_samples=self.val_samples,
            rollout_upload_samples=self.rollout_samples,
            spool=spool or self.spool,
            system_interval=self.system_interval,
        )


def online(
    project: str,
    name: str,
    started: StartedAttempt,
    next_step: int,
    options: Options,
    console_on: bool,
) -> Reporting:
    """Report the attempt started on the server; with the spool, the log lines and the
    status are journaled and posted in order."""
    reporter = options.reporter(
        started.endpoint, f"{project}/{name}", started.token, started.attempt, next_step
    )
    reporter.start()  # the sender builds its HTTP client now, off the training thread
    spool = None
    if options.spool is not None:
        target = Target(started.endpoint, project, name, started.attempt, started.token)
        spool = attempt_spool(options.spool, target)
        spool.status("running")
    else:
        try:
            reporter.status("running", timeout=SETUP_TIMEOUT)
        except DeliveryFailed as exc:
            say(f"warning: {exc}")
    say(f"reporting {project}/{name} (attempt {started.attempt}) to {options.url}")
    # The exception that ends the run is logged whether or not the console is copied.
    logs = LogShipper(Transport(started.endpoint, started.token), spool=spool)
    console = ConsoleCapture(logs)
    if console_on:
        console.start()
    journal = Journaled(spool, logs) if spool is not None else None
    return Reporting(reporter, console, started.attempt, journal)


def offline(
    project: str,
    name: str,
    config: Mapping[str, Any] | None,
    meta: Mapping[str, object] | None,
    options: Options,
    console_on: bool,
    why: str,
) -> Reporting | None:
    """Journal the run and its attempt in the spool, for ``tuneplane sync`` to create;
    None (said on stderr) when the spool cannot be written."""
    assert options.spool is not None
    try:
        found = offline_attempts.create(
            Path(options.spool.directory), options.url, project, name, config, meta
        )
    except OSError as exc:
        say(f"warning: telemetry is off for {project}/{name}: the spool cannot be written ({exc})")
        return None
    spool_of_attempt = replace(options.spool, group=found.group)
    reporter = options.reporter(options.url, f"{project}/{name}", "", None, 0, spool_of_attempt)
    reporter.start()
    target = Target(options.url, project, name, None, "", found.group)
    spool = attempt_spool(spool_of_attempt, target)
    spool.status("running")
    say(
        f"{why}journaling {project}/{name} offline in {found.directory} (`tuneplane sync` "
        "creates it on the server later)"
    )
    logs = LogShipper(Transport(options.url, ""), spool=spool)
    console = ConsoleCapture(logs)
    if console_on:
        console.start()
    return Reporting(reporter, console, None, Journaled(spool, logs, found.directory))


def declare_config(job: JobSettings, config: Mapping[str, Any]) -> None:
    """init()'s config under the runner, recorded on the runner's attempt (and as the
    run's while it has none): the runner started the attempt before it was known. Offline,
    or when the server cannot be reached, it is journaled for ``tuneplane sync``."""
    body, problem = config_body(config)
    if body is None:
        say(f"warning: init()'s config is not recorded: {problem}")
        return
    if job.token:
        answered, line = send_config(job.endpoint, job.token, body, job.attempt)
        if answered or job.spool is None:
            say(line)
            return
    if job.spool is not None:
        project, _, run = job.run_id.partition("/")
        target = Target(job.endpoint, project, run, job.attempt, job.token, job.spool.group)
        if journal_config(Path(job.spool.directory), target, job.spool.max_mb, body):
            say("init()'s config is kept in the spool for `tuneplane sync`")
