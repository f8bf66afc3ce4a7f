"""``tuneplane run --project P --run R -- CMD ARGS…``: run a training command with telemetry.

The runner creates (or resumes) the run with the user's API key, starts an execution
attempt to get an ingest token, and starts the command with ``TUNEPLANE_JOB_*`` in its
environment so that ``tuneplane.report()`` inside it knows where to send. It reports the
attempt's status, forwards the command's stdout and stderr line by line to the server while
echoing them unchanged, passes SIGINT/SIGTERM on to the command, and exits with its code.

Telemetry never stops training: when the server cannot be reached, or refuses the key, the
runner says so on stderr and runs the command anyway, untracked.

Exit codes: the command's own code; ``128 + N`` when it was killed by signal N (as a shell
reports it; the status sent to the server carries Python's ``-N``); 127 when the command
could not be started; 2 for a usage error of the runner itself or a setting that breaks its
rule.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import IO, Any, BinaryIO, Final, Protocol

import httpx

from tuneplane.client import offline as offline_attempts
from tuneplane.client.attempt_spool import AttemptSpool
from tuneplane.client.errors import DeliveryFailed
from tuneplane.client.logs import LineSplitter, LogShipper
from tuneplane.client.reporter import Reporter
from tuneplane.client.settings import (
    COMMAND_SETTINGS,
    DISABLED,
    FLUSH_TIMEOUT,
    FLUSH_TIMEOUT_DEFAULT,
    MODE,
    SpoolSettings,
    group_from_env,
    spool_settings,
)
from tuneplane.client.spool import Target
from tuneplane.client.started import StartedAttempt
from tuneplane.client.transport import Outcome, RetryPolicy, Transport
from tuneplane.contract import environment
from tuneplane.contract.datadir import resolve_data_dir
from tuneplane.contract.errors import InvalidInput
from tuneplane.contract.ids import display_name_problem, id_for_name
from tuneplane.contract.limits import RUN_CONFIG_MAX_BYTES
from tuneplane.contract.protocol import RunStatus
from tuneplane.contract.run_meta import meta_fields
from tuneplane.contract.settings import Reader

#: Setting up is retried briefly: a server that is down must not delay training for long.
SETUP_RETRY: Final = RetryPolicy(attempts=3, first_delay=0.25, max_delay=1.0)
SETUP_TIMEOUT: Final = 5.0
#: Seconds to wait for the pipes to close once the command exited (a daemon it started
#: may hold them open for ever).
PIPE_GRACE: Final = 5.0
_JOB_VARIABLES: Final = (
    environment.JOB_ENDPOINT,
    environment.JOB_RUN_ID,
    environment.JOB_TOKEN,
    environment.JOB_ATTEMPT,
    environment.JOB_NEXT_STEP,
    environment.JOB_ATTEMPT_KEY,
)


class Follower(Protocol):
    """Something that runs beside the command with the attempt's reporter (the NeMo-RL
    follower): made before the command starts, started with it, stopped once it ended."""

    def start(self) -> None: ...

    def stop(self, timeout: float) -> None: ...


class UsageError(Exception):
    """The runner's own arguments are wrong: exit 2 before anything runs."""


class SetupFailed(Exception):
    """Telemetry could not be set up; the command runs untracked. ``status`` is the
    server's HTTP status when it refused (None when it did not answer); ``unreachable``
    says the server could not be reached (with the spool, the attempt goes offline)."""

    def __init__(
        self, message: str, status: int | None = None, *, unreachable: bool = False
    ) -> None:
        super().__init__(message)
        self.status = status
        self.unreachable = unreachable


@dataclass(frozen=True, slots=True)
class RunnerOptions:
    project: str
    run: str
    command: tuple[str, ...]
    server: str
    api_key: str | None
    config: dict[str, Any] | None = None
    #: ``--attempt-from-env``: the attempt the server that launched this job started.
    launched: StartedAttempt | None = None
    flush_timeout: float = FLUSH_TIMEOUT_DEFAULT
    #: ``--group``, ``--tag`` and ``--note``: stored when the run is created.
    meta: Mapping[str, object] | None = None
    #: The durable spool (``TUNEPLANE_SPOOL_DIR``): the runner's log lines and status are
    #: journaled, and a server that cannot be reached at start makes the attempt offline.
    spool: SpoolSettings | None = None
    #: ``TUNEPLANE_MODE=offline``: journal the whole attempt without reaching the server.
    offline: bool = False
    #: ``TUNEPLANE_MODE=disabled``: run the command untracked, saying nothing.
    disabled: bool = False

    def __repr__(self) -> str:  # the API key never prints
        return f"RunnerOptions({self.project}/{self.run}, server={self.server!r})"

    @classmethod
    def build(
        cls,
        *,
        project: str,
        run: str,
        command: Sequence[str],
        config: str | None = None,
        server: str | None = None,
        data_dir: str | None = None,
        environ: Mapping[str, str] | None = None,
        group: str | None = None,
        tags: Sequence[str] | None = None,
        note: str | None = None,
        attempt_from_env: bool = False,
    ) -> RunnerOptions:
        """Options from the command line and the environment; :class:`UsageError` when
        they are wrong, :class:`SettingError` naming each variable or flag that breaks its
        rule (the command's own SDK settings included)."""
        env = os.environ if environ is None else environ
        reader = Reader(env)
        if group is None:
            group = group_from_env(reader)
        for label, value in (("--project", project), ("--run", run)):
            problem = display_name_problem(value)
            if problem is not None:
                raise UsageError(f"{label} {value!r}: {problem}")
        try:
            meta = meta_fields(group, tags, note)
        except InvalidInput as exc:
            flag = exc.violations[0].field.partition("[")[0].replace("tags", "tag")
            raise UsageError(f"--{flag}: {exc.violations[0].rule}") from None
        # People name runs as they like; the run's ID is derived from the name, which is
        # kept as its display name (the same mapping as init() and the Trackio protocol).
        if id_for_name(run) != run:
            meta["display_name"] = run
        if id_for_name(project, fallback="project") != project:
            meta["project_display_name"] = project
        project, run = id_for_name(project, fallback="project"), id_for_name(run)
        args = list(command)
        if args and args[0] == "--":
            args = args[1:]
        if not args:
            raise UsageError("no command given: tuneplane run --project P --run R -- CMD ARGS…")
        if server:
            server = reader.check(environment.URL_SETTING.rule, "--server", server)
        else:
            server = reader.read(environment.URL_SETTING)
        key = reader.get(environment.API_KEY_SETTING)
        timeout = reader.read(FLUSH_TIMEOUT)
        launched = launched_attempt(reader, project, run) if attempt_from_env else None
        if launched is not None:
            server = launched.endpoint  # the job reports where its server said
        # The command's SDK reads them: refuse them now rather than once training started.
        for setting in COMMAND_SETTINGS:
            reader.get(setting)
        spool = spool_settings(reader)
        mode = reader.read(MODE)
        reader.done()
        return cls(
            project=project,
            run=run,
            command=tuple(args),
            server=(server or environment.DEFAULT_URL).rstrip("/"),
            api_key=key or _admin_key(data_dir, env),
            config=_parse_config(config),
            launched=launched,
            flush_timeout=timeout,
            meta=meta or None,
            spool=spool,
            offline=mode == "offline",
            disabled=mode == DISABLED,
        )


def launched_attempt(reader: Reader, project: str, run: str) -> StartedAttempt | None:
    """The attempt a server started for the job it launched (``--attempt-from-env``): the
    ``TUNEPLANE_JOB_*`` variables it set, all of them, naming this run. None when one
    breaks its rule (the reader lists it); :class:`UsageError` when one is missing."""
    names = (environment.JOB_ENDPOINT_SETTING, environment.JOB_RUN_ID_SETTING,
             environment.JOB_TOKEN_SETTING, environment.JOB_ATTEMPT_SETTING)  # fmt: skip
    endpoint = reader.get(environment.JOB_ENDPOINT_SETTING)
    run_id = reader.get(environment.JOB_RUN_ID_SETTING)
    token = reader.get(environment.JOB_TOKEN_SETTING)
    attempt = reader.get(environment.JOB_ATTEMPT_SETTING)
    if reader.problems:
        return None
    if endpoint is None or run_id is None or token is None or attempt is None:
        raise UsageError(
            f"--attempt-from-env: {', '.join(s.name for s in names)} must all be set (the "
            "server that launched this job sets them)"
        )
    if run_id != f"{project}/{run}":
        raise UsageError(f"--attempt-from-env: {environment.JOB_RUN_ID} names {run_id}, "
                         f"not {project}/{run}")  # fmt: skip
    return StartedAttempt(attempt, token, endpoint)


def api_key(data_dir: str | None, env: Mapping[str, str]) -> str | None:
    """``TUNEPLANE_API_KEY``, or the admin key ``tuneplane serve`` wrote in its data
    directory (``data_dir``, else ``TUNEPLANE_DIR``, else the default); None without
    either. :class:`SettingError` when the variable breaks its rule."""
    key = environment.API_KEY_SETTING.get(env)
    return key or _admin_key(data_dir, env)


def _admin_key(data_dir: str | None, env: Mapping[str, str]) -> str | None:
    path = resolve_data_dir(data_dir, env) / environment.ADMIN_KEY_FILE
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def _parse_config(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text()
        except OSError as exc:
            raise UsageError(f"--config: cannot read {text[1:]}: {exc.strerror}") from exc
    try:
        config = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"--config is not valid JSON: {exc}") from exc
    if not isinstance(config, dict):
        raise UsageError("--config must be a JSON object")
    size = len(json.dumps(config, separators=(",", ":")).encode())
    if size > RUN_CONFIG_MAX_BYTES:
        raise UsageError(f"--config is {size} bytes; at most {RUN_CONFIG_MAX_BYTES} allowed")
    return config


# -- setting up: the run, the attempt, the token ---------------------------------------------


@dataclass(frozen=True, slots=True)
class Session:
    """One execution attempt with telemetry."""

    attempt: int
    token: str
    reporter: Reporter
    logs: LogShipper
    #: Where the command reports to: the server's TUNEPLANE_INGEST_URL when it has one.
    endpoint: str
    #: The step of the command's first automatic report: after a resumed run's last.
    next_step: int = 0
    #: With the durable spool: the journal of the runner's own log lines and status.
    spool: AttemptSpool | None = None
    #: An attempt journaled offline, for `tuneplane sync` to create (attempt 0, no token).
    offline: offline_attempts.OfflineAttempt | None = None
    #: The Idempotency-Key the attempt was started with (None: a server launched it).
    key: str | None = None

    def __repr__(self) -> str:
        return f"Session(attempt={self.attempt})"


def open_session(options: RunnerOptions, transport: httpx.BaseTransport | None = None) -> Session:
    """Create or resume the run and start an attempt; :class:`SetupFailed` says why not."""
    key = None
    if options.launched is not None:  # a server launched the job: its run is new
        started, first_step = options.launched, 0
    else:
        api = setup_api(options.server, options.api_key, transport)
        key = uuid.uuid4().hex
        try:
            created, _ = create_run(api, options.project, options.run, options.config, options.meta)
            started = start_attempt(api, options.project, options.run, key=key)
            first_step = 0 if created else next_step(api, options.project, options.run)
        finally:
            api.close()
    reporter = Reporter(
        options.server,
        f"{options.project}/{options.run}",
        started.token,
        attempt=started.attempt,
        transport=transport,
    )
    spool = None
    if options.spool is not None:
        target = Target(
            options.server, options.project, options.run, started.attempt, started.token
        )
        spool = attempt_spool(options.spool, target, transport)
    logs = LogShipper(Transport(options.server, started.token, transport=transport), spool=spool)
    return Session(
        started.attempt, started.token, reporter, logs, started.endpoint, first_step, spool,
        key=key,
    )  # fmt: skip


def attempt_spool(
    settings: SpoolSettings, target: Target, transport: httpx.BaseTransport | None = None
) -> AttemptSpool:
    """The journal of the runner's (or init()'s) own log lines and status."""
    sender = Transport(target.endpoint, target.token, transport=transport)
    return AttemptSpool(Path(settings.directory), target, settings.max_mb * 2**20, sender)


def open_offline_session(options: RunnerOptions) -> Session:
    """Journal the attempt in the spool without the server: its run, config and meta for
    ``tuneplane sync`` to create, and beside them the log lines, status and what the
    command reports (OSError when the spool cannot be written)."""
    assert options.spool is not None
    found = offline_attempts.create(
        Path(options.spool.directory),
        options.server,
        options.project,
        options.run,
        options.config,
        options.meta,
    )
    spool = replace(options.spool, group=found.group)
    run_id = f"{options.project}/{options.run}"
    reporter = Reporter(options.server, run_id, "", spool=spool)
    target = Target(options.server, options.project, options.run, None, "", found.group)
    journal = attempt_spool(spool, target)
    logs = LogShipper(Transport(options.server, ""), spool=journal)
    return Session(0, "", reporter, logs, options.server, 0, journal, found)


def next_step(api: Transport, project: str, run: str) -> int:
    """The step after the run's last one (0 without any): where a resumed run's automatic
    steps continue. Read once the new attempt started, as an older attempt then writes no
    more."""
    found = api.get(f"/api/v1/projects/{project}/runs/{run}", retry=SETUP_RETRY)
    last = found.body.get("last_step") if isinstance(found.body, dict) else None
    return last + 1 if isinstance(last, int) else 0


def setup_api(
    server: str, key: str | None, transport: httpx.BaseTransport | None = None
) -> Transport:
    """The transport that sets runs up with the user's API key; :class:`SetupFailed`
    without a key."""
    if key is None:
        raise SetupFailed(
            f"no API key: set {environment.API_KEY}, or run where `tuneplane serve` wrote "
            f"{environment.ADMIN_KEY_FILE} in its data directory (--data-dir)"
        )
    return Transport(server, key, timeout=SETUP_TIMEOUT, transport=transport)


def create_run(
    api: Transport,
    project: str,
    run: str,
    config: Mapping[str, Any] | None,
    meta: Mapping[str, object] | None = None,
) -> tuple[bool, dict[str, Any]]:
    """Create the run, or resume it: ``(created, the run object)``. A config that differs
    from the existing run's is a :class:`SetupFailed` with status 409. ``meta`` (group,
    tags, note: :func:`~tuneplane.contract.run_meta.meta_fields`) goes with a new run."""
    body: dict[str, object] = {"run": run, **(meta or {})}
    if config is not None:
        body["config"] = dict(config)
    outcome = _call(api, f"/api/v1/projects/{project}/runs", body, "create the run")
    answer = outcome.body if isinstance(outcome.body, dict) else {}
    return outcome.status == 201, answer


def start_attempt(
    api: Transport,
    project: str,
    run: str,
    config: Mapping[str, Any] | None = None,
    *,
    key: str | None = None,
) -> StartedAttempt:
    """Start the run's next execution attempt (``config``, when given, is recorded on it).
    ``key`` is the idempotency key (default: a new one), which ``tuneplane sync`` keeps
    for an offline attempt so that a sync cut short never starts a second one."""
    # A retry after a lost answer must not start a second attempt.
    once = {"Idempotency-Key": key or uuid.uuid4().hex}
    body = {} if config is None else {"config": dict(config)}
    path = f"/api/v1/projects/{project}/runs/{run}/attempts"
    answer = _call(api, path, body, "start an attempt", once).body
    try:
        attempt, token = int(answer["attempt"]), str(answer["token"])
        endpoint = str(answer.get("ingest_url") or api.base_url)
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        raise SetupFailed(f"unexpected answer to starting an attempt: {answer!r}") from exc
    return StartedAttempt(attempt, token, endpoint)


def _call(
    api: Transport, path: str, body: object, what: str, headers: dict[str, str] | None = None
) -> Outcome:
    outcome = api.post(path, body, retry=SETUP_RETRY, headers=headers)
    if outcome.delivered:
        return outcome
    if outcome.status in (401, 403):
        # The server's own words: "this API key is read-only" says what to change.
        said = f": {outcome.detail}" if outcome.detail else ""
        why = f"the server refused the API key ({outcome.status}{said})"
    elif outcome.status is None:
        why = f"{api.base_url} is unreachable ({outcome.detail})"
    else:
        why = f"{outcome.reason}: {outcome.detail}"
    raise SetupFailed(
        f"could not {what}: {why}", outcome.status, unreachable=outcome.status is None
    )


def child_environment(
    base: Mapping[str, str], options: RunnerOptions, session: Session | None
) -> dict[str, str]:
    """The command's environment: ours, with the attempt's ``TUNEPLANE_JOB_*`` (or none of
    them, when telemetry is off, so that an outer run's token is not reused)."""
    env = {k: v for k, v in base.items() if k not in _JOB_VARIABLES}
    # A Python child writing to a pipe would buffer its output in blocks; logs are live.
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.pop(environment.JOB_OFFLINE, None)
    if session is not None and session.offline is not None:
        env[environment.JOB_ENDPOINT] = session.endpoint
        env[environment.JOB_RUN_ID] = f"{options.project}/{options.run}"
        env[environment.JOB_OFFLINE] = session.offline.group
    elif session is not None:
        env[environment.JOB_ENDPOINT] = session.endpoint
        env[environment.JOB_RUN_ID] = f"{options.project}/{options.run}"
        env[environment.JOB_TOKEN] = session.token
        env[environment.JOB_ATTEMPT] = str(session.attempt)
        env[environment.JOB_NEXT_STEP] = str(session.next_step)
        if session.key is not None:
            env[environment.JOB_ATTEMPT_KEY] = session.key
    return env


# -- running the command -------------------------------------------------------------------


def _pump(source: IO[bytes], echo: BinaryIO | None, stream: str, logs: LogShipper | None) -> None:
    """Copy the child's output to ours as it comes (partial lines too: progress bars), and
    hand complete lines to the log shipper."""
    splitter = LineSplitter()
    fd = source.fileno()
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        if echo is not None:
            try:
                echo.write(chunk)
                echo.flush()
            except (OSError, ValueError):
                echo = None  # our own output is gone; keep draining the child's
        if logs is not None:
            for line in splitter.feed(chunk):
                logs.add(stream, line)
    if logs is not None:
        for line in splitter.end():
            logs.add(stream, line)


class _Signals:
    """Passes SIGINT and SIGTERM on to the command and remembers that one came."""

    FORWARDED: Final = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._process = process
        self.received: int | None = None
        self._previous = {sig: signal.signal(sig, self._forward) for sig in self.FORWARDED}

    def _forward(self, signum: int, _frame: FrameType | None) -> None:
        self.received = signum
        if signum == signal.SIGINT and _terminal_sent_sigint():
            return  # Ctrl-C reached the whole foreground process group, the command too
        with contextlib.suppress(ProcessLookupError):
            self._process.send_signal(signum)

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def _terminal_sent_sigint() -> bool:
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def final_status(returncode: int, signalled: bool) -> RunStatus:
    if signalled:
        return "cancelled"
    return "succeeded" if returncode == 0 else "failed"


def exit_code(returncode: int) -> int:
    """The runner's exit code: the command's, or 128 + N when signal N killed it."""
    return returncode if returncode >= 0 else 128 - returncode


def _say(message: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(f"tuneplane: {message}", file=sys.stderr, flush=True)


def _report_status(
    session: Session, status: RunStatus, code: int | None = None, timeout: float | None = None
) -> None:
    if session.spool is not None:
        session.spool.status(status, code)  # journaled, then posted after the lines before it
        return
    try:
        session.reporter.status(status, code, timeout=timeout)
    except DeliveryFailed as exc:
        _say(f"warning: {exc}")


def _finish(session: Session, options: RunnerOptions, status: RunStatus, code: int) -> None:
    """Send the remaining log lines, then the final status, each for at most the flush
    timeout; say what was lost (with the spool: what waits in it for `tuneplane sync`)."""
    stats = session.logs.close(options.flush_timeout)
    _report_status(session, status, code, timeout=options.flush_timeout)
    said = session.spool.close(options.flush_timeout) if session.spool is not None else None
    session.reporter.close(0)
    summary = session.logs.stats().loss_summary() if session.spool is not None else None
    summary = summary or stats.loss_summary()
    if summary is not None:
        _say(summary.removeprefix("tuneplane: "))
    if said is not None:
        _say(said)
    if session.offline is not None:
        _say(
            f"{options.project}/{options.run} was journaled offline in "
            f"{session.offline.directory}: run `tuneplane sync` to create it on the server"
        )


def _follower(
    follow: Callable[[Reporter], Follower] | None, session: Session | None
) -> Follower | None:
    if follow is None:
        return None
    if session is None:
        _say("warning: telemetry is off, so no step files are followed")
        return None
    return follow(session.reporter)


def _stop_follower(follower: Follower, session: Session, timeout: float) -> None:
    """Let the follower finish, then send what it queued (the reporter is closed at
    once afterwards), each within ``timeout``."""
    deadline = time.monotonic() + timeout
    follower.stop(timeout)
    if not session.reporter.flush(max(0.0, deadline - time.monotonic())):
        _say("warning: not everything the follower queued was sent within the flush timeout")


def _set_up(options: RunnerOptions, transport: httpx.BaseTransport | None) -> Session | None:
    """The attempt: on the server; offline in the spool (``TUNEPLANE_MODE=offline``, or a
    server that cannot be reached with the spool on); or none, the command untracked."""
    if options.disabled:
        return None
    unreachable: SetupFailed | None = None
    if not (options.offline and options.spool is not None):
        try:
            session = open_session(options, transport)
        except SetupFailed as exc:
            if not exc.unreachable or options.spool is None:
                _say(f"warning: telemetry is off for this run: {exc}. Running the command anyway.")
                return None
            unreachable = exc
        else:
            _say(
                f"reporting {options.project}/{options.run} (attempt {session.attempt}) "
                f"to {options.server}"
            )
            return session
    try:
        session = open_offline_session(options)
    except OSError as exc:
        _say(f"warning: telemetry is off for this run: the spool cannot be written ({exc})")
        return None
    why = f"{unreachable}; " if unreachable is not None else ""
    assert session.offline is not None
    _say(
        f"{why}journaling {options.project}/{options.run} offline in "
        f"{session.offline.directory} (`tuneplane sync` creates it on the server later)"
    )
    return session


def run(
    options: RunnerOptions,
    transport: httpx.BaseTransport | None = None,
    follow: Callable[[Reporter], Follower] | None = None,
) -> int:
    """Run the command to its end; returns the exit code for the runner. ``follow`` makes
    a :class:`Follower` of the attempt's reporter (before the command starts, so that it
    knows what was there before), started beside the command and stopped, within the
    flush timeout, once the command has ended."""
    session = _set_up(options, transport)
    env = child_environment(os.environ, options, session)
    follower = _follower(follow, session)
    try:
        process = subprocess.Popen(
            options.command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
    except OSError as exc:
        _say(f"cannot start {options.command[0]!r}: {exc.strerror or exc}")
        if session is not None:
            _finish(session, options, "failed", 127)
        return 127
    signals = _Signals(process)
    try:
        logs = session.logs if session is not None else None
        pumps = [
            threading.Thread(
                target=_pump,
                args=(pipe, echo, stream, logs),
                name=f"tuneplane-{stream}",
                daemon=True,
            )
            for pipe, echo, stream in (
                (process.stdout, getattr(sys.stdout, "buffer", None), "stdout"),
                (process.stderr, getattr(sys.stderr, "buffer", None), "stderr"),
            )
        ]
        for pump in pumps:
            pump.start()
        if session is not None:
            _report_status(session, "running")
        if follower is not None:
            follower.start()
        returncode = process.wait()
        for pump in pumps:
            pump.join(PIPE_GRACE)
        if follower is not None and session is not None:
            _stop_follower(follower, session, options.flush_timeout)
        if session is not None:
            status = final_status(returncode, signals.received is not None)
            _finish(session, options, status, returncode)
    finally:
        signals.restore()
    return exit_code(returncode)
