"""The ``tuneplane`` command line."""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Sequence

from tuneplane import __version__
from tuneplane.contract.errors import TuneplaneError
from tuneplane.contract.settings import SettingError


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


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from tuneplane.server.app import create_app
    from tuneplane.server.settings import Settings

    settings = Settings.from_env(
        data_dir=args.data_dir, database_url=args.database_url, host=args.host, port=args.port
    )
    app = create_app(settings)
    # Building the API description prepares every route's request and response models,
    # which the framework otherwise does during the first requests (tens of ms each).
    app.openapi()
    _tune_interpreter()
    ingest = "enabled" if settings.ingest_secret else "disabled (set TUNEPLANE_INGEST_SECRET)"
    print(
        f"tuneplane {__version__}: http://{settings.host}:{settings.port} "
        f"on {_describe(settings.database_url)}; ingestion {ingest}",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=args.log_level,
        access_log=args.access_log,
        # Live streams never end by themselves; do not let them hold up a shutdown.
        timeout_graceful_shutdown=3,
    )
    return 0


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
        )
    except UsageError as exc:
        print(f"tuneplane run: {exc}", file=sys.stderr)
        return 2
    try:
        return run(options)
    except KeyboardInterrupt:  # before the command started; afterwards it gets the signal
        return 130


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
    run.add_argument("--project", required=True, help="project ID")
    run.add_argument("--run", required=True, help="run ID (created, or resumed when it exists)")
    run.add_argument("--config", help="run config: a JSON object, or @FILE holding one")
    run.add_argument(
        "--server", help="server URL (default: $TUNEPLANE_URL or http://127.0.0.1:8000)"
    )
    run.add_argument(
        "--data-dir",
        help="where to find admin.key when $TUNEPLANE_API_KEY is unset "
        "(default: $TUNEPLANE_DIR, $TRACKIO_DIR or ./tuneplane-data)",
    )
    run.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    run.set_defaults(handler=_run)

    db = commands.add_parser("db", help="database maintenance")
    db_commands = db.add_subparsers(dest="db_command", required=True)
    upgrade = db_commands.add_parser("upgrade", help="apply pending migrations")
    _add_database_options(upgrade)
    upgrade.set_defaults(handler=_db_upgrade)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.handler(args)
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
