"""The ``tuneplane`` command line."""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Sequence
from typing import Any

from tuneplane import __version__
from tuneplane.contract.errors import TuneplaneError
from tuneplane.contract.settings import SettingError
from tuneplane.launch_commands import add_launch_commands
from tuneplane.read_commands import add_read_commands
from tuneplane.run_commands import add_run_write_commands


def _add_database_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        help="data directory (default: $TUNEPLANE_DIR, $TRACKIO_DIR or ./tuneplane-data)",
    )
    parser.add_argument(
        "--database-url",
        help="sqlite:///PATH or postgresql://… (default: SQLite in the data directory)",
    )


def _describe(url: str) -> str:
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return f"SQLite at {parsed.database}"
    return f"PostgreSQL at {parsed.render_as_string(hide_password=True)}"


def _tune_interpreter() -> None:
    """The event loop and the SQLite writer share the GIL. A thread coming back from a
    database call waits up to the switch interval for it (5 ms by default, which would cap
    the writer at a few hundred statements a second); and the garbage collector need not
    rescan the objects built at startup."""
    sys.setswitchinterval(0.0005)
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def _log_to_stderr(level: str) -> None:
    """The server's own log lines (``tuneplane.*``: store outages, refused sign-ins, slow
    clients) at ``--log-level``, as uvicorn prints its own."""
    import logging

    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s:     %(name)s: %(message)s"))
    logger = logging.getLogger("tuneplane")
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from tuneplane.server.app import create_app
    from tuneplane.server.settings import Settings

    settings = Settings.from_env(
        data_dir=args.data_dir,
        database_url=args.database_url,
        host=args.host,
        port=args.port,
        root_path=args.root_path,
    )
    app = create_app(settings)
    # Building the API description prepares every route's request and response models,
    # which the framework otherwise does during the first requests (tens of ms each).
    app.openapi()
    _tune_interpreter()
    _log_to_stderr(args.log_level)
    ingest = "enabled" if settings.ingest_secret else "disabled (set TUNEPLANE_INGEST_SECRET)"
    address = f"http://{settings.host}:{settings.port}{settings.root_path}"
    print(
        f"tuneplane {__version__}: {address} "
        f"on {_describe(settings.database_url)}; ingestion {ingest}",
        file=sys.stderr,
        flush=True,
    )
    _print_access_notices(app, address)
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=args.log_level,
        access_log=args.access_log,
        # Forwarded headers count from TUNEPLANE_TRUSTED_PROXIES only (uvicorn would trust
        # loopback, or FORWARDED_ALLOW_IPS, by default): server/forwarded.py's rule.
        proxy_headers=bool(settings.trusted_proxies),
        forwarded_allow_ips=[str(network) for network in settings.trusted_proxies],
        # Live streams never end by themselves; do not let them hold up a shutdown.
        timeout_graceful_shutdown=3,
    )
    return 0


def _print_access_notices(app: Any, address: str) -> None:
    from tuneplane.server.admin import public_projects_notice

    state = app.state.tuneplane
    notice = public_projects_notice(state.database)
    if notice:
        print(f"tuneplane: {notice}", file=sys.stderr, flush=True)
    token = state.first_admin.token
    if token is not None:
        # As a notebook server prints its token: the one way in before any account exists.
        print(
            "tuneplane: no account yet. Create the first administrator here (one use, "
            f"this process only):\n    {address}/welcome#{token}",
            file=sys.stderr,
            flush=True,
        )


def _settings(args: argparse.Namespace) -> Any:
    from tuneplane.server.settings import Settings

    return Settings.from_env(data_dir=args.data_dir, database_url=args.database_url)


def _new_password(login: str) -> str:
    """A password from the terminal (asked twice), or one line of stdin when piped."""
    import getpass

    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\n")
    first = getpass.getpass(f"password for {login}: ")
    if getpass.getpass("again: ") != first:
        raise SystemExit("tuneplane: the two passwords differ; nothing changed")
    return first


def _user(args: argparse.Namespace) -> int:
    from tuneplane.server import admin

    settings = _settings(args)
    action = args.user_command
    if action == "add":
        lines = admin.add_user(settings, args.login, _new_password(args.login), admin=args.admin)
    elif action == "list":
        lines = admin.list_users(settings)
    elif action in ("disable", "enable"):
        lines = admin.set_disabled(settings, args.login, action == "disable")
    else:
        lines = admin.reset_password(settings, args.login, _new_password(args.login))
    print("\n".join(lines))
    return 0


def _project(args: argparse.Namespace) -> int:
    from tuneplane.server import admin

    lines = admin.set_visibility(_settings(args), args.name, args.project_command)
    print("\n".join(lines))
    return 0


def _add_account_commands(commands: Any) -> None:
    user = commands.add_parser("user", help="local accounts (on this machine's database)")
    user_commands = user.add_subparsers(dest="user_command", required=True)
    for name, text in (
        ("add", "add an account (the password is asked for, or read from stdin)"),
        ("list", "list the accounts"),
        ("disable", "disable an account: its sessions and API keys stop at once"),
        ("enable", "enable a disabled account"),
        ("reset-password", "set a new password (ends the account's sessions)"),
    ):
        sub = user_commands.add_parser(name, help=text)
        if name != "list":
            sub.add_argument("login")
        if name == "add":
            sub.add_argument("--admin", action="store_true", help="a site administrator")
        _add_database_options(sub)
        sub.set_defaults(handler=_user)
    project = commands.add_parser("project", help="a project's visibility")
    project_commands = project.add_subparsers(dest="project_command", required=True)
    for visibility in ("public", "private"):
        sub = project_commands.add_parser(visibility, help=f"make a project {visibility}")
        sub.add_argument("name")
        _add_database_options(sub)
        sub.set_defaults(handler=_project)


def _doctor(args: argparse.Namespace) -> int:
    import os

    from tuneplane import doctor
    from tuneplane.client.runner import api_key

    environ = os.environ
    url = (
        args.server
        or environ.get("TUNEPLANE_INGEST_URL")
        or environ.get("TUNEPLANE_URL")
        or "http://127.0.0.1:8000"
    ).rstrip("/")
    settings = None
    if not args.workers_only:
        try:
            from tuneplane.server.settings import Settings
        except ModuleNotFoundError:
            print("SKIP  the database and blob store: the server's packages are not installed")
        else:
            settings = Settings.from_env(data_dir=args.data_dir, database_url=args.database_url)
    return doctor.run_checks(url, api_key(args.data_dir, environ), environ, settings)


def _db_upgrade(args: argparse.Namespace) -> int:
    from tuneplane.server.settings import Settings
    from tuneplane.store.database import Database

    settings = Settings.from_env(data_dir=args.data_dir, database_url=args.database_url)
    database = Database(settings.database_url)
    try:
        database.migrate()
    finally:
        database.close()
    print(f"database is up to date: {_describe(settings.database_url)}")
    return 0


def _run(args: argparse.Namespace) -> int:
    from tuneplane.client.runner import RunnerOptions, UsageError, run

    try:
        options = RunnerOptions.build(
            project=args.project,
            run=args.run,
            command=args.command,
            config=args.config,
            server=args.server,
            data_dir=args.data_dir,
            group=args.group,
            tags=args.tag,
            note=args.note,
            attempt_from_env=args.attempt_from_env,
        )
    except UsageError as exc:
        print(f"tuneplane run: {exc}", file=sys.stderr)
        return 2
    try:
        return run(options, follow=_nemo_rl_follower(args.follow_nemo_rl))
    except KeyboardInterrupt:  # before the command started; afterwards it gets the signal
        return 130


def _nemo_rl_follower(log_dir: str | None) -> Any:
    """What follows a NeMo-RL log directory with the attempt's reporter, or None."""
    if log_dir is None:
        return None
    from tuneplane.client.integrations.nemo_rl import NemoRlFollower
    from tuneplane.import_upload import NemoRlSource

    def say(message: str) -> None:
        print(f"tuneplane: {message}", file=sys.stderr, flush=True)

    text_samples = _val_upload_samples()
    return lambda reporter: NemoRlFollower(NemoRlSource(reporter, log_dir, text_samples), say=say)


def _progress(what: str) -> Any:
    """A progress line on stderr for long imports: redrawn on a terminal, every tenth
    otherwise."""
    shown = {"last": -1}

    def show(done: int, total: int) -> None:
        tenth = done * 10 // max(total, 1)
        if sys.stderr.isatty():
            end = "\n" if done == total else ""
            print(f"\rtuneplane: {what} {done}/{total}", end=end, file=sys.stderr, flush=True)
        elif total >= 100 and tenth != shown["last"]:
            shown["last"] = tenth
            print(f"tuneplane: {what} {done}/{total}", file=sys.stderr, flush=True)

    return show


def _upload_progress() -> Any:
    """One progress line per kind of item delivered (events, then trajectories)."""
    lines: dict[str, Any] = {}

    def show(what: str, done: int, total: int) -> None:
        lines.setdefault(what, _progress(what))(done, total)

    return show


def _job_reporter(command: str) -> Any:
    """The reporter of the ``tuneplane run`` job, or None after saying, in one line, that
    there is none: an upload has no credentials of its own."""
    from tuneplane.client.errors import NotConfigured
    from tuneplane.import_upload import job_reporter

    try:
        return job_reporter()
    except NotConfigured as exc:
        print(
            f"tuneplane {command}: uploads go to the current run: run it under "
            f"`tuneplane run --project P --run R -- tuneplane {command} ...` ({exc})",
            file=sys.stderr,
        )
        return None


def _deliver(reporter: Any, snapshots: Sequence[Any], retry: str) -> int:
    """Upload each snapshot; 1 with a line saying what did not arrive and how to retry."""
    from tuneplane.import_upload import NotDelivered, upload

    try:
        for snapshot in snapshots:
            delivered = upload(reporter, snapshot, _upload_progress())
            print(f"tuneplane: {delivered.describe()}", file=sys.stderr)
    except NotDelivered as failed:
        print(
            f"tuneplane: not delivered: {failed.message}; `tuneplane import upload {retry}` "
            "retries it (what already arrived is not stored twice)",
            file=sys.stderr,
        )
        return 1
    finally:
        reporter.close()
    return 0


def _refused(refused: Any, what: str = "written or uploaded") -> int:
    for problem in refused.problems:
        print(f"tuneplane: {problem}", file=sys.stderr)
    print(f"tuneplane: nothing was {what}", file=sys.stderr)
    return 2


def _import_harbor(args: argparse.Namespace) -> int:
    from tuneplane.importers.harbor_import import import_harbor
    from tuneplane.importers.plan import EXAMPLE_PLAN
    from tuneplane.importers.problems import ImportRefused, Problem
    from tuneplane.importers.snapshot import out_problems, summary, write_snapshot
    from tuneplane.importers.text import load_redactor

    if args.example_plan:
        print(EXAMPLE_PLAN, end="")
        return 0
    missing = [flag for flag in ("plan", "root", "out") if getattr(args, flag) is None]
    if missing:
        print(f"tuneplane import harbor: --{', --'.join(missing)} required", file=sys.stderr)
        return 2
    reporter = _job_reporter("import harbor") if args.upload else None
    if args.upload and reporter is None:
        return 2
    out = out_problems(args.out)
    try:
        redactor = load_redactor(args.redactor) if args.redactor else None
        snapshot = import_harbor(
            args.plan,
            args.root,
            trace_limit=args.trace_limit,
            redactor=redactor,
            progress=_progress("trial attempts read"),
        )
    except ImportRefused as refused:
        return _refused(ImportRefused([*out, *refused.problems]))
    if out:
        return _refused(ImportRefused(out))
    try:
        write_snapshot(snapshot, args.out)
    except OSError as failed:
        return _refused(ImportRefused([Problem(args.out, "", f"cannot be written: {failed}")]))
    for line in summary(snapshot):
        print(f"tuneplane: {line}", file=sys.stderr)
    print(f"tuneplane: snapshot written to {args.out}", file=sys.stderr)
    return 0 if reporter is None else _deliver(reporter, [snapshot], args.out)


def _val_upload_samples() -> int | None:
    """The job's TUNEPLANE_JOB_VAL_UPLOAD_SAMPLES (SettingError when it breaks its rule)."""
    import os

    from tuneplane.client.settings import VAL_UPLOAD_SAMPLES
    from tuneplane.contract.settings import Reader

    reader = Reader(os.environ)
    value = reader.get(VAL_UPLOAD_SAMPLES)
    reader.done()
    return value


def _import_lm_eval(args: argparse.Namespace) -> int:
    from tuneplane.importers.lm_eval import import_lm_eval, write_snapshots
    from tuneplane.importers.problems import ImportRefused
    from tuneplane.importers.snapshot import summary
    from tuneplane.importers.text import load_redactor

    text_samples = _val_upload_samples()
    reporter = _job_reporter("import lm-eval") if args.upload else None
    if args.upload and reporter is None:
        return 2
    try:
        redactor = load_redactor(args.redactor) if args.redactor else None
        imported = import_lm_eval(
            args.path,
            text_samples=text_samples,
            redactor=redactor,
            progress=_progress("tasks read"),
        )
        written = write_snapshots(imported, args.out)
    except ImportRefused as refused:
        if reporter is not None:
            reporter.close()
        return _refused(refused)
    for warning in imported.warnings:
        print(f"tuneplane: warning: {warning}", file=sys.stderr)
    for snapshot in imported.snapshots.values():
        for line in summary(snapshot):
            print(f"tuneplane: {line}", file=sys.stderr)
    print(f"tuneplane: {len(written)} snapshots written to {args.out}", file=sys.stderr)
    if reporter is None:
        return 0
    return _deliver(reporter, list(imported.snapshots.values()), args.out)


def _deliver_rollouts(reporter: Any, snapshots: Sequence[Any], retry: str) -> int:
    """Upload each training step's rollouts; 1 with a line saying what did not arrive."""
    from tuneplane.import_upload import NotDelivered, upload_rollouts

    try:
        for snapshot in snapshots:
            delivered = upload_rollouts(reporter, snapshot, _upload_progress())
            print(f"tuneplane: {delivered.describe()}", file=sys.stderr)
    except NotDelivered as failed:
        reporter.close()
        print(
            f"tuneplane: not delivered: {failed.message}; `tuneplane import upload {retry}` "
            "retries it (what already arrived is not stored twice)",
            file=sys.stderr,
        )
        return 1
    return 0


def _import_nemo_rl(args: argparse.Namespace) -> int:
    from tuneplane.importers.nemo_rl import import_nemo_rl, write_snapshots
    from tuneplane.importers.problems import ImportRefused
    from tuneplane.importers.snapshot import summary

    reporter = _job_reporter("import nemo-rl") if args.upload else None
    if args.upload and reporter is None:
        return 2
    try:
        imported = import_nemo_rl(
            args.log_dir, text_samples=_val_upload_samples(), progress=_progress("files read")
        )
        written = write_snapshots(imported, args.out)
    except ImportRefused as refused:
        if reporter is not None:
            reporter.close()
        return _refused(refused)
    for warning in imported.warnings:
        print(f"tuneplane: warning: {warning}", file=sys.stderr)
    for rollouts in imported.rollouts:
        print(f"tuneplane: {rollouts.summary()}", file=sys.stderr)
    for snapshot in imported.rounds:
        for line in summary(snapshot):
            print(f"tuneplane: {line}", file=sys.stderr)
    print(f"tuneplane: {len(written)} snapshots written to {args.out}", file=sys.stderr)
    if reporter is None:
        return 0
    code = _deliver_rollouts(reporter, imported.rollouts, args.out)
    return code or _deliver(reporter, imported.rounds, args.out)


def _import_upload(args: argparse.Namespace) -> int:
    from tuneplane.importers.problems import ImportRefused
    from tuneplane.importers.rollout_snapshot import read_all

    reporter = _job_reporter("import upload")
    if reporter is None:
        return 2
    try:  # every snapshot is read and checked before anything is sent
        snapshots, rollouts = read_all(args.snapshots)
    except ImportRefused as refused:
        reporter.close()
        return _refused(refused, "uploaded")
    retry = " ".join(args.snapshots)
    return _deliver_rollouts(reporter, rollouts, retry) or _deliver(reporter, snapshots, retry)


def _import_trackio(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tuneplane.importers.trackio import TrackioDirectoryError, default_directory
    from tuneplane.server.trackio_import import import_directory

    directory = Path(args.directory) if args.directory else default_directory()
    try:
        totals, notes = import_directory(
            _settings(args),
            directory,
            visibility=args.visibility,
            progress=_progress("Trackio rows imported"),
        )
    except TrackioDirectoryError as exc:
        print(f"tuneplane import trackio: {exc}", file=sys.stderr)
        return 2
    for line in notes.lines():
        print(f"tuneplane: note: {line}", file=sys.stderr)
    print(f"tuneplane: imported {totals.summary()}", file=sys.stderr)
    return 0


def _add_trackio_import(sources: Any) -> None:
    trackio = sources.add_parser(
        "trackio",
        help="Trackio projects (metrics, system metrics, configs, alerts) into the database",
        description="Import every Trackio project database (<project>.db) in DIR into the "
        "server's database, idempotently: what is stored already is skipped. Trackio's files "
        "are only read. With SQLite, stop the server first (or let `tuneplane serve` import "
        "its own data directory).",
    )
    trackio.add_argument(
        "directory",
        nargs="?",
        metavar="DIR",
        help="Trackio's data directory (default: $TRACKIO_DIR or Trackio's own)",
    )
    trackio.add_argument(
        "--visibility",
        choices=["public", "private"],
        help="visibility of projects this creates (default: $TUNEPLANE_DEFAULT_VISIBILITY)",
    )
    _add_database_options(trackio)
    trackio.set_defaults(handler=_import_trackio)


def _add_import_commands(commands: Any) -> None:
    parser = commands.add_parser("import", help="import other tools' evaluation results")
    sources = parser.add_subparsers(dest="import_command", required=True)
    _add_trackio_import(sources)
    harbor = sources.add_parser(
        "harbor",
        help="Harbor trial directories and ATIF trajectories, into a snapshot",
        description="Read the trials an import plan lists (docs/import.md) into a snapshot "
        "file, and with --upload deliver it to the current run. Starts no agent, sandbox "
        "or training.",
    )
    harbor.add_argument("--plan", help="the import plan (JSON; see --example-plan)")
    harbor.add_argument("--root", help="the directory the plan's directories are beneath")
    harbor.add_argument("--out", help="the snapshot file to write")
    harbor.add_argument(
        "--trace-limit",
        type=int,
        default=0,
        help="keep the text of at most N trajectories (0-128; default 0: no text)",
    )
    harbor.add_argument("--redactor", help="module:function applied to all text first")
    _add_upload_flag(harbor)
    harbor.add_argument(
        "--example-plan", action="store_true", help="print an example plan and exit"
    )
    harbor.set_defaults(handler=_import_harbor)
    lm_eval = sources.add_parser(
        "lm-eval",
        help="an lm-eval run's results and samples, into one snapshot per task",
        description="Read an lm-eval output directory (results_*.json and the "
        "samples_<task>_*.jsonl beside it, docs/import.md) into one snapshot per task: one "
        "trial per document.",
    )
    lm_eval.add_argument(
        "path", metavar="DIR", help="lm_eval's --output_path (or one results_*.json in it)"
    )
    lm_eval.add_argument("--out", required=True, help="the directory to write snapshots to")
    lm_eval.add_argument("--redactor", help="module:function applied to all text first")
    _add_upload_flag(lm_eval)
    lm_eval.set_defaults(handler=_import_lm_eval)
    nemo_rl = sources.add_parser(
        "nemo-rl",
        help="NeMo-RL step files: training rollouts and validation rounds, into snapshots",
        description="Read a NeMo-RL 0.7 log directory (train_data_step{N}.jsonl and "
        "val_data_step{N}.jsonl, docs/import.md) into a snapshot per step: at most 32 "
        "stratified rollouts of each training step, and each validation step as a round.",
    )
    nemo_rl.add_argument(
        "log_dir", metavar="LOG_DIR", help="the step files' directory (or the exp_NNN's parent)"
    )
    nemo_rl.add_argument("--out", required=True, help="the directory to write snapshots to")
    _add_upload_flag(nemo_rl)
    nemo_rl.set_defaults(handler=_import_nemo_rl)
    upload = sources.add_parser(
        "upload",
        help="deliver saved snapshots to the current run (inside `tuneplane run`)",
        description="Send snapshots written by `tuneplane import ...` to the run of the "
        "`tuneplane run` job this runs in, without reading the sources again. Sending one "
        "again adds only what is missing.",
    )
    upload.add_argument(
        "snapshots", nargs="+", metavar="SNAPSHOT", help="snapshot files, or directories of them"
    )
    upload.set_defaults(handler=_import_upload)


def _add_upload_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--upload",
        action="store_true",
        help="then deliver the snapshot to the current run (inside `tuneplane run`)",
    )


def _eval_arguments(args: argparse.Namespace) -> list[str]:
    """The command again, for the interpreter that runs Harbor."""
    arguments = ["eval", "run", "--plan", args.plan]
    arguments += ["--out", args.out] if args.out is not None else []
    arguments += ["--trace-limit", str(args.trace_limit)]
    arguments += ["--redactor", args.redactor] if args.redactor else []
    arguments += ["--resume"] if args.resume else []
    return arguments + (["--upload"] if args.upload else [])


def _eval_run(args: argparse.Namespace) -> int:
    import os

    from tuneplane.coordinator.evaluate import EvalOptions, check_plan, evaluate, refused
    from tuneplane.coordinator.plan import EXAMPLE_EVAL_PLAN
    from tuneplane.coordinator.runtime import require_harbor

    def say(line: str) -> None:
        print(f"tuneplane: {line}", file=sys.stderr, flush=True)

    if args.example_plan:
        print(EXAMPLE_EVAL_PLAN, end="")
        return 0
    if args.plan is None:
        print("tuneplane eval run: --plan required", file=sys.stderr)
        return 2
    options = EvalOptions(args.plan, args.out, args.trace_limit, args.redactor, args.resume)
    if args.check_plan:
        return check_plan(options, say)
    if refused(options, say):
        return 2
    missing = require_harbor(_eval_arguments(args), os.environ)  # may exec another Python
    if missing is not None:
        print(f"tuneplane eval run: {missing}", file=sys.stderr)
        return 2
    reporter = _job_reporter("eval run") if args.upload else None
    if args.upload and reporter is None:
        return 2
    evaluated = evaluate(options, say)
    if reporter is None:
        return evaluated.code
    if evaluated.snapshot is None or evaluated.signal is not None:
        reporter.close()
        say("nothing was delivered")
        return evaluated.code
    retry = os.path.join(args.out, "snapshot.json")
    return max(evaluated.code, _deliver(reporter, [evaluated.snapshot], retry))


def _add_eval_commands(commands: Any) -> None:
    parser = commands.add_parser("eval", help="run evaluations")
    actions = parser.add_subparsers(dest="eval_command", required=True)
    run = actions.add_parser(
        "run",
        help="run a fixed-checkpoint Harbor cohort into a new directory and its snapshot",
        description="Run the plan's trials one at a time through Harbor's Python API "
        "(Python 3.12+ with harbor: this one, or $TUNEPLANE_HARBOR_PYTHON), then write the "
        "snapshot `tuneplane import harbor` would write from their directories "
        "(docs/import.md). Exits 0 when every planned trial ran and has an outcome.",
    )
    run.add_argument("--plan", help="the evaluation plan (JSON; see --example-plan)")
    run.add_argument("--out", help="the new directory to write (it must not exist)")
    run.add_argument(
        "--resume",
        action="store_true",
        help="continue the interrupted execution in --out (same plan): completed trials "
        "are not run again, and its snapshot is the same round",
    )
    run.add_argument(
        "--check-plan",
        action="store_true",
        help="check the plan's local paths and declarations only (no Harbor, no sandbox)",
    )
    run.add_argument(
        "--trace-limit",
        type=int,
        default=0,
        help="trials whose ATIF text is kept in the snapshot (default 0: none; at most 128)",
    )
    run.add_argument("--redactor", help="module:function applied to all text first")
    _add_upload_flag(run)
    run.add_argument("--example-plan", action="store_true", help="print an example plan")
    run.set_defaults(handler=_eval_run)


def _sync(args: argparse.Namespace) -> int:
    import os
    from pathlib import Path

    from tuneplane.client.settings import SPOOL_DIR
    from tuneplane.client.sync import describe, sync
    from tuneplane.contract.settings import HTTP_URL, Reader, SettingError

    reader = Reader(os.environ)
    directory = args.directory or reader.get(SPOOL_DIR)
    server = reader.check(HTTP_URL, "--server", args.server) if args.server else None
    try:
        reader.done()
    except SettingError as exc:
        print(f"tuneplane sync: {exc}", file=sys.stderr)
        return 2
    if not directory:
        print(
            "tuneplane sync: name the spool directory, or set TUNEPLANE_SPOOL_DIR", file=sys.stderr
        )
        return 2
    if not Path(directory).is_dir():
        print(f"tuneplane sync: {directory} is not a directory", file=sys.stderr)
        return 2
    results = sync(Path(directory), server=server, progress=_progress("items delivered"))
    if not results:
        print(f"tuneplane sync: nothing to deliver in {directory}", file=sys.stderr)
    for result in results:
        print(f"tuneplane sync: {describe(result)}", file=sys.stderr)
    return 0 if all(result.complete for result in results) else 1


def _add_sync_command(commands: Any) -> None:
    sync = commands.add_parser(
        "sync",
        help="deliver what the durable spool kept (TUNEPLANE_SPOOL_DIR)",
        description="Send every batch the SDK journaled in DIR that the server did not "
        "acknowledge, with its original IDs, to its run and attempt; delete what was "
        "delivered. Exits with 1, naming what, when anything could not be delivered.",
    )
    sync.add_argument(
        "directory", nargs="?", metavar="DIR", help="the spool (default: $TUNEPLANE_SPOOL_DIR)"
    )
    sync.add_argument(
        "--server", help="send to this server URL instead of the one each journal names"
    )
    sync.set_defaults(handler=_sync)


def _add_doctor_command(commands: Any) -> None:
    doctor = commands.add_parser(
        "doctor",
        help="check what workers and the dashboard need: ingest URL, live streams, storage",
        description="Check that the ingest URL workers will use answers and is no loopback "
        "address inside a cluster, that live streams are not buffered by a proxy, and that "
        "the database and the blob store take writes; print what to fix. Exit 1 when a check "
        "fails.",
    )
    doctor.add_argument(
        "--server",
        help="the URL workers use (default: $TUNEPLANE_INGEST_URL, $TUNEPLANE_URL or "
        "http://127.0.0.1:8000)",
    )
    _add_database_options(doctor)
    doctor.add_argument(
        "--workers-only",
        action="store_true",
        help="check the URL and streams only (on a worker, without the server's storage)",
    )
    doctor.set_defaults(handler=_doctor)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tuneplane", description="Telemetry for fine-tuning and RL training runs."
    )
    parser.add_argument("--version", action="version", version=f"tuneplane {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the server")
    _add_database_options(serve)
    serve.add_argument("--host", help="listen address (default: $TUNEPLANE_HOST or 127.0.0.1)")
    # Checked with $TUNEPLANE_PORT's rule, so both say the same thing when wrong.
    serve.add_argument("--port", help="listen port (default: $TUNEPLANE_PORT or 8000)")
    serve.add_argument(
        "--root-path",
        help="the path prefix a reverse proxy serves this under, such as /tuneplane "
        "(default: $TUNEPLANE_ROOT_PATH or none)",
    )
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning"])
    serve.add_argument("--access-log", action="store_true", help="log every request")
    serve.set_defaults(handler=_serve)

    run = commands.add_parser(
        "run",
        help="run a training command with telemetry",
        description="Run CMD with its metrics, logs and status reported to the server. "
        "Telemetry failures never stop CMD; the exit code is CMD's.",
        usage="tuneplane run --project P --run R [options] -- CMD [ARGS ...]",
    )
    run.add_argument("--project", required=True, help="project name (its ID is derived from it)")
    run.add_argument(
        "--run",
        required=True,
        help="run name, any text (created, or resumed when it exists; its ID is derived)",
    )
    run.add_argument("--config", help="run config: a JSON object, or @FILE holding one")
    run.add_argument("--group", help="the run's group (the runs of one sweep or seed set)")
    run.add_argument("--tag", action="append", help="a tag of the run (repeat for more)")
    run.add_argument("--note", help="a note about the run (free text)")
    run.add_argument(
        "--server", help="server URL (default: $TUNEPLANE_URL or http://127.0.0.1:8000)"
    )
    run.add_argument(
        "--data-dir",
        help="where to find admin.key when $TUNEPLANE_API_KEY is unset "
        "(default: $TUNEPLANE_DIR, $TRACKIO_DIR or ./tuneplane-data)",
    )
    run.add_argument(
        "--attempt-from-env",
        action="store_true",
        help="report into the attempt $TUNEPLANE_JOB_* name, which the server that launched "
        "this job started (docs/launch.md), instead of creating one",
    )
    run.add_argument(
        "--follow-nemo-rl",
        metavar="LOG_DIR",
        help="import each completed NeMo-RL step file of LOG_DIR while CMD runs "
        "(in the background; docs/import.md)",
    )
    run.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    run.set_defaults(handler=_run)

    db = commands.add_parser("db", help="database maintenance")
    db_commands = db.add_subparsers(dest="db_command", required=True)
    upgrade = db_commands.add_parser("upgrade", help="apply pending migrations")
    _add_database_options(upgrade)
    upgrade.set_defaults(handler=_db_upgrade)
    _add_doctor_command(commands)
    _add_account_commands(commands)
    add_run_write_commands(add_read_commands(commands))
    _add_import_commands(commands)
    _add_eval_commands(commands)
    _add_sync_command(commands)
    add_launch_commands(commands)
    return parser


#: What ``pip install 'tuneplane[server]'`` adds to the SDK's light install.
SERVER_PACKAGES = frozenset({"fastapi", "starlette", "uvicorn", "sqlalchemy", "alembic",
                             "argon2", "authlib", "httpx2", "jsonschema"})  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.handler(args)
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in SERVER_PACKAGES:
            raise
        print(
            f"tuneplane {args.command}: needs the server's packages ({exc.name} is not "
            "installed): pip install 'tuneplane[server]'",
            file=sys.stderr,
        )
        return 2
    except TuneplaneError as exc:
        print(f"tuneplane: {exc.message}", file=sys.stderr)
        return 2
    except SettingError as exc:  # a bad setting or flag: one line each, nothing started
        for problem in exc.problems:
            print(f"tuneplane: {problem}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
