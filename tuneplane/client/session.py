"""``tuneplane.init()``, ``log()``, ``alert()`` and ``finish()``: reporting from a notebook or
a plain script, without ``tuneplane run``.

::

    import tuneplane

    with tuneplane.init(project="grpo", name="qwen-7b", config={"lr": 1e-5}) as run:
        for step in range(steps):
            ...
            run.log({"train/loss": loss})          # or tuneplane.log(...)
    # an exception inside the block finishes the attempt as failed

``init()`` creates (or resumes) the run and starts an execution attempt with the user's API
key, exactly as the runner does (``runner.create_run`` / ``runner.start_attempt``). Under
``tuneplane run`` (``TUNEPLANE_JOB_*`` set) it attaches to the runner's run and attempt
instead, and the runner reports the attempt's status.

Several processes (``torchrun``): ``RANK`` and ``WORLD_SIZE`` are read. Only rank 0 reports
unless ``per_rank=True``, which reports every rank into series of its own, named
``<metric>@rank<N>``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any, Final, Literal

from tuneplane.client import default, ending, exports, starting
from tuneplane.client.attempt_config import post_config
from tuneplane.client.console import CONSOLE_MODES, ConsoleCapture
from tuneplane.client.errors import DeliveryFailed, ResumeRefused
from tuneplane.client.reporter import Reporter
from tuneplane.client.run_state import RunConfig, Summary
from tuneplane.client.runner import (
    SETUP_RETRY,
    SetupFailed,
    api_key,
    create_run,
    next_step,
    setup_api,
    start_attempt,
)
from tuneplane.client.settings import DISABLED, MODES, disabled, group_from_env, job_settings
from tuneplane.client.transport import Transport
from tuneplane.contract import environment
from tuneplane.contract.arena import AlertLevel
from tuneplane.contract.errors import InvalidInput
from tuneplane.contract.ids import display_name_problem, id_for_name
from tuneplane.contract.observations import SUMMARY_EVENT
from tuneplane.contract.run_meta import meta_fields
from tuneplane.contract.settings import Reader, SettingError

Resume = Literal["allow", "must", "never"]
#: ``init(mode=…)``, else ``TUNEPLANE_MODE``: W&B's modes.
Mode = Literal["online", "offline", "disabled"]
RESUME_MODES: Final[tuple[Resume, ...]] = ("allow", "must", "never")
#: ``init(console=…)``: copy stdout and stderr into the attempt's log, or not (W&B's names).
ConsoleMode = Literal["auto", "wrap", "redirect", "off"]
#: A rank's series under ``per_rank=True``: ``train/loss@rank1``.
RANK_SUFFIX: Final = "@rank{rank}"


def _say(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(f"tuneplane: {line}", file=sys.stderr, flush=True)


@dataclass(frozen=True, slots=True)
class Ranks:
    """This process's place among its launcher's (``torchrun`` sets the variables)."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Ranks:
        """``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``; ValueError naming one that is not a
        nonnegative integer (or a rank not below the world size)."""
        values: dict[str, int] = {}
        for name, default_value in (("RANK", 0), ("LOCAL_RANK", 0), ("WORLD_SIZE", 1)):
            raw = environ.get(name, "").strip()
            if not raw:
                values[name] = default_value
                continue
            if not raw.isdigit():
                raise ValueError(f"{name}={raw!r}: must be a nonnegative integer")
            values[name] = int(raw)
        ranks = cls(values["RANK"], values["LOCAL_RANK"], max(1, values["WORLD_SIZE"]))
        if ranks.rank >= ranks.world_size:
            raise ValueError(f"RANK={ranks.rank} must be below WORLD_SIZE={ranks.world_size}")
        return ranks


class Run:
    """The run :func:`init` started or attached to. ``reporting`` is False in a process
    that does not report (a rank other than 0, or telemetry that could not be set up);
    its calls then do nothing."""

    def __init__(
        self,
        project: str,
        name: str,
        reporter: Reporter | None,
        *,
        attempt: int | None = None,
        resumed: bool = False,
        ranks: Ranks | None = None,
        suffix: str = "",
        reports_status: bool = False,
        console: ConsoleCapture | None = None,
        journal: starting.Journaled | None = None,
        disabled: bool = False,
    ) -> None:
        self.project = project
        #: Made by ``init(mode="disabled")`` (or ``TUNEPLANE_MODE=disabled``): does nothing.
        self.disabled = disabled
        self.name = name
        self.attempt = attempt
        self.resumed = resumed
        self.ranks = ranks or Ranks()
        self._reporter = reporter
        self._suffix = suffix
        self._reports_status = reports_status
        self._console = console
        self._journal = journal
        self._finished = False
        self._lock = threading.Lock()
        #: W&B's ``run.config``: ``update()`` adds keys (run_state.RunConfig).
        self.config = RunConfig(None, self._add_config)
        #: W&B's ``run.summary``: final figures, sent when the run ends.
        self.summary = Summary()

    def __repr__(self) -> str:
        state = f"attempt {self.attempt}" if self.reporting else "not reporting"
        return f"Run('{self.project}/{self.name}', {state})"

    @property
    def reporting(self) -> bool:
        return self._reporter is not None

    @property
    def reporter(self) -> Reporter | None:
        """The reporter behind this run (None when this process does not report)."""
        return self._reporter

    def log(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Report scalar metrics at ``step`` (``None``: the step after the last one, which
        on a resumed run continues after its last stored step). Never raises, never waits.

        >>> run.log({"train/loss": 0.71, "train/reward": 0.4})
        """
        reporter = self._reporter
        if reporter is None:
            return
        if self._suffix:
            # Unreadable input goes to report() as it is, which refuses and counts it.
            with contextlib.suppress(Exception):
                metrics = {f"{name}{self._suffix}": value for name, value in metrics.items()}
        reporter.report(metrics, step)

    def alert(
        self,
        title: str,
        text: str | None = None,
        level: AlertLevel = "warn",
        *,
        step: int | None = None,
    ) -> bool:
        """Queue an alert of the run (``level`` ``info``, ``warn`` or ``error``); True when
        queued. Never raises, never waits."""
        reporter = self._reporter
        return False if reporter is None else reporter.alert(title, text, level=level, step=step)

    def register_export(
        self,
        path_or_uri: str | os.PathLike[str],
        step: int | None = None,
        format: str = "hf",
        digest: str | None = None,
    ) -> bool:
        """Record an export of this run with its digest (:func:`tuneplane.register_export`);
        True when queued. Never raises."""
        reporter = self._reporter
        if reporter is None:
            return False
        return exports.register_export(reporter, path_or_uri, step, format, digest)

    def finish(self, exit_code: int | None = None, *, timeout: float | None = None) -> None:
        """Send what is queued, report the attempt ``succeeded`` (``exit_code`` 0 or None)
        or ``failed`` (any other code), and stop reporting. Strict about nothing: a status
        that cannot be delivered is said on stderr. Calling it again does nothing."""
        status = "succeeded" if exit_code in (None, 0) else "failed"
        self._end(status, exit_code, timeout)

    def _end(self, status: str, exit_code: int | None, timeout: float | None) -> None:
        with self._lock:
            if self._finished:
                return
            self._finished = True
        _forget(self)
        reporter = self._reporter
        if reporter is None:
            return
        wait = reporter._exit_timeout if timeout is None else timeout
        for fields in self.summary.chunks():
            reporter.event(SUMMARY_EVENT, fields)
        reporter.flush(wait)
        if self._journal is not None:
            self._end_journaled(self._journal, status, exit_code, wait)
            return
        if self._console is not None:
            # The log, the exception's lines included, arrives before the status.
            lost = self._console.stop(wait).loss_summary()
            if lost is not None:
                _say(lost.removeprefix("tuneplane: "))
        if self._reports_status:
            try:
                reporter.status(status, exit_code, timeout=wait)  # type: ignore[arg-type]
            except DeliveryFailed as exc:
                _say(f"warning: {exc}")
        summary = reporter.close(wait).loss_summary()
        if summary is not None:
            _say(summary.removeprefix("tuneplane: "))

    def _add_config(self, added: dict[str, Any]) -> None:
        """Record keys ``config.update()`` added: journaled and posted with the spool,
        else posted now (a short retry, as ``init()``'s config); said on stderr."""
        reporter = self._reporter
        if reporter is None or self._finished:
            return
        body = {"config": added, "add": True}
        if self._journal is not None:
            self._journal.spool.config(body)
            return
        _answered, line = post_config(reporter._transport, body, self.attempt)
        if line.startswith("warning"):  # recorded: nothing to say, as W&B says nothing
            _say(line.removeprefix("warning: "))

    def _end_journaled(
        self, journal: starting.Journaled, status: str, exit_code: int | None, wait: float
    ) -> None:
        """With the spool: the log lines, then the status (with the time it was reached),
        journaled and posted in that order; what the server did not take waits for sync."""
        if self._console is not None:
            self._console.stop(wait)
        journal.spool.status(status, exit_code)  # type: ignore[arg-type]
        said = journal.spool.close(wait)
        assert self._reporter is not None
        lines = [
            journal.logs.stats().loss_summary(),
            self._reporter.close(0.0 if journal.offline else wait).loss_summary(),
        ]
        for line in [*lines, said]:
            if line is not None:
                _say(line.removeprefix("tuneplane: "))
        if journal.offline is not None:
            _say(
                f"{self.project}/{self.name} was journaled offline in {journal.offline}: run "
                "`tuneplane sync` to create it on the server"
            )

    def __enter__(self) -> Run:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self._end("succeeded", 0, None)
        else:
            self._crashed(exc_type, exc, traceback)

    def _crashed(
        self,
        exc_type: type[BaseException],
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """End the run on an exception: its traceback into the log first (a diagnosis
        reads it), then failed, or cancelled for Ctrl-C."""
        if self._console is not None and not self._finished:
            self._console.exception(exc_type, exc, traceback)
        if issubclass(exc_type, KeyboardInterrupt):
            self._end("cancelled", None, None)
        else:
            self._end("failed", 1, None)


_current: Run | None = None
_current_lock = threading.Lock()


def _forget(run: Run) -> None:
    global _current
    with _current_lock:
        if _current is run:
            _current = None


def current() -> Run | None:
    """The run the last :func:`init` of this process returned, until it is finished."""
    return _current


def _uncaught(
    exc_type: type[BaseException], exc: BaseException, traceback: TracebackType | None
) -> None:
    run = _current
    if run is not None:
        run._crashed(exc_type, exc, traceback)


def _at_exit(exit_code: int | None) -> None:
    """A script that ended without ``finish()``: the open run ends as the script did."""
    run = _current
    if run is not None:
        run.finish(exit_code)


def init(
    project: str | None = None,
    name: str | None = None,
    config: Mapping[str, Any] | None = None,
    *,
    resume: Resume = "allow",
    group: str | None = None,
    tags: list[str] | tuple[str, ...] | None = None,
    notes: str | None = None,
    server: str | None = None,
    per_rank: bool = False,
    data_dir: str | None = None,
    console: ConsoleMode = "wrap",
    mode: Mode | None = None,
) -> Run:
    """Create or resume the run ``project/name`` and start an execution attempt, with the
    API key of ``TUNEPLANE_API_KEY`` (or the ``admin.key`` of the data directory, as
    ``tuneplane run`` finds it), reporting to ``server`` (else ``TUNEPLANE_URL``).

    >>> run = tuneplane.init(project="grpo", name="qwen-7b", config={"lr": 1e-5})
    >>> tuneplane.log({"train/loss": 0.71})
    >>> tuneplane.finish()

    ``resume``: ``"allow"`` creates the run or resumes it; ``"must"`` resumes an existing
    run only; ``"never"`` creates a new one only. A resumed run's automatic steps continue
    after its last step. Its config stays what it was created with: a different ``config``
    is recorded on this attempt, and stderr says so in one line.

    A strict call: it raises :class:`ResumeRefused` when ``resume`` cannot be honoured
    (``"must"`` and the run does not exist, ``"never"`` and it does) and ValueError for a
    bad argument or ``RANK``/``WORLD_SIZE``. When the server cannot be reached or refuses
    the key, it says so on stderr and returns a run that does not report: training goes on.

    ``group`` (the runs of one sweep or seed set), ``tags`` and ``notes`` are stored with
    the run when this call creates it (a resumed run keeps its own; the dashboard and
    ``PATCH …/runs/{run}`` change them); a tag or group is letters, digits and ``_-.:/+@=``.
    Under ``tuneplane run`` the run and attempt are the runner's: ``project``, ``name``,
    ``config`` and ``resume`` are the runner's flags, and the runner reports the status.
    Without ``group``, ``TUNEPLANE_RUN_GROUP`` (else W&B's ``WANDB_RUN_GROUP``) names it.

    ``mode`` (else ``TUNEPLANE_MODE``): ``"offline"`` journals the run for ``tuneplane
    sync``; ``"disabled"`` returns a run whose calls all do nothing, with no network and no
    files (W&B's disabled mode).
    """
    env = os.environ
    if mode is not None and mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    off = mode == DISABLED if mode is not None else disabled(env)
    _check_arguments(project, name, resume, console, group, tags, notes, need_project=not off)
    previous = _current
    if previous is not None:
        # As W&B's reinit: a notebook's second init() would leave the first run "running".
        if not previous.disabled:
            _say(f"finishing {previous.project}/{previous.name} first: init() starts another run")
        previous.finish()
    if off:
        return _disabled_run(project, name, config)
    meta = _meta(group if group is not None else _group_from_env(), tags, notes)
    project, name = _named(project, "project", meta), _named(name, "name", meta)
    ranks = Ranks.from_env(env)
    suffix = RANK_SUFFIX.format(rank=ranks.rank) if per_rank else ""
    if env.get(environment.JOB_RUN_ID):
        run = _attach(project, name, config, ranks, suffix)
    elif ranks.rank != 0:
        why = (
            "with per_rank=True every rank reports under `tuneplane run` only, which shares "
            "one attempt among them"
            if per_rank
            else "only rank 0 reports"
        )
        _say(f"rank {ranks.rank} of {ranks.world_size} does not report ({why})")
        run = Run(project or "", name or "", None, ranks=ranks)
    else:
        assert project is not None
        setup = _Setup(resume, server, data_dir, ranks, meta, console != "off", mode)
        run = _start(project, name or _new_name(), config, setup)
        run._suffix = suffix
    if isinstance(config, Mapping):
        dict.update(run.config, config)  # what the run started with: not sent again
    _become_current(run)
    if run.reporting:
        ending.watch(_uncaught, _at_exit)
    return run


def _check_arguments(
    project: str | None,
    name: str | None,
    resume: str,
    console: str,
    group: str | None,
    tags: object,
    notes: str | None,
    *,
    need_project: bool = True,
) -> None:
    if console not in CONSOLE_MODES:
        raise ValueError(f"console must be one of {', '.join(CONSOLE_MODES)}, not {console!r}")
    if resume not in RESUME_MODES:
        raise ValueError(f"resume must be one of {', '.join(RESUME_MODES)}, not {resume!r}")
    attached = bool(os.environ.get(environment.JOB_RUN_ID))
    if not project and not attached and need_project:
        raise ValueError("project is required (outside `tuneplane run`)")
    for label, value in (("project", project), ("name", name)):
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{label} must be a string, not {type(value).__name__}")
    if resume == "must" and name is None and not attached:
        raise ValueError("resume='must' needs the name of the run to resume")
    if group is not None and not isinstance(group, str):
        raise ValueError("group must be a string")
    if notes is not None and not isinstance(notes, str):
        raise ValueError("notes must be a string")
    if tags is not None and not (
        isinstance(tags, list | tuple) and all(isinstance(t, str) for t in tags)
    ):
        raise ValueError("tags must be a list of strings")


def _disabled_run(project: str | None, name: str | None, config: object) -> Run:
    """A run whose calls do nothing (``run.config`` and ``run.summary`` work as dicts):
    no network, no files, no console capture, no exit hooks; ``tuneplane.report()`` and the
    event functions do nothing either."""
    run = Run(project or "", name or _new_name(), None, disabled=True)
    if isinstance(config, Mapping):
        dict.update(run.config, config)
    default.disable()
    _become_current(run)
    return run


def _group_from_env() -> str | None:
    """``TUNEPLANE_RUN_GROUP`` (ValueError naming it when it breaks the group rule), else
    W&B's ``WANDB_RUN_GROUP``."""
    reader = Reader(os.environ)
    group = group_from_env(reader)
    try:
        reader.done()
    except SettingError as exc:
        raise ValueError(exc.problems[0]) from None
    return group


def _meta(group: str | None, tags: Sequence[str] | None, notes: str | None) -> dict[str, object]:
    try:
        return meta_fields(group, tags, notes)
    except InvalidInput as exc:
        first = exc.violations[0]
        field = "notes" if first.field == "note" else first.field
        raise ValueError(f"{field}: {first.rule}") from None


def _named(given: str | None, label: str, meta: dict[str, object] | None) -> str | None:
    """The ID a project or run called ``given`` has (contract.ids.id_for_name, as the
    Trackio protocol and the importers map names); a run's name as given is kept as its
    display name. A name no rule can keep (empty, control characters) is said once on
    stderr and only its ID is used: training goes on."""
    if given is None:
        return None
    if given == "" and label == "name":
        return None  # no name: one is made, as without the argument
    mapped = id_for_name(given, fallback=label if label == "project" else "run")
    if (problem := display_name_problem(given)) is not None:
        _say(f"{label} {given!r}: {problem}; reporting it as {mapped!r}")
    elif meta is not None and mapped != given:
        meta["display_name" if label == "name" else "project_display_name"] = given
    return mapped


def _new_name() -> str:
    return time.strftime("run-%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def _become_current(run: Run) -> None:
    global _current
    with _current_lock:
        _current = run
    default.use(run.reporter if run.reporting and not run._suffix else None)


def _attach(
    project: str | None, name: str | None, config: object, ranks: Ranks, suffix: str
) -> Run:
    """The runner's run and attempt, from ``TUNEPLANE_JOB_*``."""
    job = job_settings(os.environ)  # NotConfigured naming a bad variable: a strict call
    job_project, _, job_run = job.run_id.partition("/")
    if (project, name) != (None, None) and (project or job_project, name or job_run) != (
        job_project,
        job_run,
    ):
        _say(f"under `tuneplane run` this process reports to {job.run_id}, not {project}/{name}")
    if ranks.rank != 0 and not suffix:
        _say(f"rank {ranks.rank} of {ranks.world_size} does not report (only rank 0 does)")
        return Run(job_project, job_run, None, attempt=job.attempt, ranks=ranks)
    reporter = Reporter(
        job.endpoint,
        job.run_id,
        job.token,
        attempt=job.attempt,
        exit_timeout=job.exit_timeout,
        queue_capacity=job.queue_capacity,
        val_upload_samples=job.val_upload_samples,
        rollout_upload_samples=job.rollout_upload_samples,
        spool=job.spool,
        # One process samples the machine: the others would write the same series.
        system_interval=job.system_interval if ranks.rank == 0 else None,
        next_step=job.next_step,
    )
    reporter.start()
    if isinstance(config, Mapping) and ranks.rank == 0:
        starting.declare_config(job, config)
    return Run(job_project, job_run, reporter, attempt=job.attempt, ranks=ranks, suffix=suffix)


@dataclass(frozen=True, slots=True)
class _Setup:
    """How :func:`init` sets up a run of its own."""

    resume: Resume
    server: str | None
    data_dir: str | None
    ranks: Ranks
    meta: Mapping[str, object] | None
    console: bool
    #: ``init(mode=…)``: None follows ``TUNEPLANE_MODE``.
    mode: Mode | None = None


def _start(project: str, name: str, config: Mapping[str, Any] | None, setup: _Setup) -> Run:
    """Set up the run and an attempt of our own; offline in the spool when asked to
    (``TUNEPLANE_MODE=offline``) or when the server cannot be reached with the spool on;
    else a run that does not report when the server cannot be reached or refuses."""
    options = starting.Options.read(setup.server)
    if setup.mode is not None:
        options = replace(options, offline=setup.mode == "offline")
    why = ""
    if not (options.offline and options.spool is not None):
        try:
            api = setup_api(options.url, api_key(setup.data_dir, os.environ))
            try:
                started, resumed, next_step = _set_up(
                    api, project, name, config, setup.resume, setup.meta
                )
            finally:
                api.close()
        except SetupFailed as exc:
            if not exc.unreachable or options.spool is None:
                _say(f"warning: telemetry is off for {project}/{name}: {exc}")
                return Run(project, name, None, ranks=setup.ranks)
            why = f"{exc}; "
        else:
            found = starting.online(project, name, started, next_step, options, setup.console)
            return _reporting(project, name, found, setup.ranks, resumed)
    found_offline = starting.offline(project, name, config, setup.meta, options, setup.console, why)
    if found_offline is None:
        return Run(project, name, None, ranks=setup.ranks)
    return _reporting(project, name, found_offline, setup.ranks, False)


def _reporting(
    project: str, name: str, found: starting.Reporting, ranks: Ranks, resumed: bool
) -> Run:
    return Run(
        project,
        name,
        found.reporter,
        attempt=found.attempt,
        resumed=resumed,
        ranks=ranks,
        reports_status=True,
        console=found.console,
        journal=found.journal,
    )


def _set_up(
    api: Transport,
    project: str,
    name: str,
    config: Mapping[str, Any] | None,
    resume: Resume,
    meta: Mapping[str, object] | None = None,
) -> tuple[Any, bool, int]:
    """Create or resume the run as ``resume`` allows and start an attempt: the attempt,
    whether the run was resumed, and the step of the first automatic ``log()``."""
    path = f"/api/v1/projects/{project}/runs/{name}"
    if resume == "must":
        found = api.get(path, retry=SETUP_RETRY)
        if found.status == 404:
            raise ResumeRefused(f"run {project}/{name} does not exist (resume='must')")
    differs = False
    try:
        created, _run = create_run(api, project, name, config, meta)
    except SetupFailed as exc:
        if exc.status != 409 or config is None:
            raise
        differs = True  # the run exists with another config: resume it without
        created, _run = create_run(api, project, name, None)
    if resume == "never" and not created:
        raise ResumeRefused(f"run {project}/{name} already exists (resume='never')")
    started = start_attempt(api, project, name, config)
    if differs:
        _say(
            f"run {project}/{name} keeps the config it was created with; attempt "
            f"{started.attempt}'s own config differs and is recorded on the attempt"
        )
    return started, not created, 0 if created else next_step(api, project, name)


# -- module-level calls: the current run's ---------------------------------------------------


def log(metrics: Mapping[str, float], step: int | None = None) -> None:
    """``log()`` of the run :func:`init` returned; without one, :func:`tuneplane.report`."""
    run = _current
    if run is None:
        default.report(metrics, step)
    else:
        run.log(metrics, step)


def alert(
    title: str, text: str | None = None, level: AlertLevel = "warn", *, step: int | None = None
) -> bool:
    """``alert()`` of the run :func:`init` returned (or of ``tuneplane run``'s reporter);
    True when queued. Never raises, never waits.

    >>> tuneplane.alert("reward collapsed", "reward < 0.1 for 50 steps", level="error")
    True
    """
    run = _current
    if run is not None:
        return run.alert(title, text, level, step=step)
    reporter = default.default_reporter()
    return False if reporter is None else reporter.alert(title, text, level=level, step=step)


def _reporter_of_current_run() -> Reporter | None:
    run = _current
    return run.reporter if run is not None else default.default_reporter()


#: ``Reporter.trajectory`` of the run :func:`init` returned (or of ``tuneplane run``'s
#: reporter); True when queued or left out by a retention cap. Never raises, never waits.
trajectory = default.routed(
    Reporter.trajectory,
    _reporter_of_current_run,
    "the run init() returned, else the process-wide reporter",
)


#: ``register_export`` of the run :func:`init` returned (or of ``tuneplane run``'s reporter).
register_export = default.routed(
    exports.register_export,
    _reporter_of_current_run,
    "the run init() returned, else the process-wide reporter",
)


def finish(exit_code: int | None = None) -> None:
    """``finish()`` of the run :func:`init` returned; nothing without one."""
    run = _current
    if run is not None:
        run.finish(exit_code)
