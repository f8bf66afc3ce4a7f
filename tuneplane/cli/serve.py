"""``tuneplane serve`` and ``tuneplane db upgrade``: the server and its database."""

from __future__ import annotations

import argparse
import gc
import sys
from typing import Any

from tuneplane import __version__
from tuneplane.cli.options import add_database_options, describe_database


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
    from tuneplane.server.settings import Settings

    # Settings first: a bad one is said before the web stack is imported (seconds).
    settings = Settings.from_env(
        data_dir=args.data_dir,
        database_url=args.database_url,
        host=args.host,
        port=args.port,
        root_path=args.root_path,
    )
    import uvicorn

    from tuneplane.server.app import create_app

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
        f"on {describe_database(settings.database_url)}; ingestion {ingest}",
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


def _db_upgrade(args: argparse.Namespace) -> int:
    from tuneplane.server.settings import Settings
    from tuneplane.store.database import Database

    settings = Settings.from_env(data_dir=args.data_dir, database_url=args.database_url)
    database = Database(settings.database_url)
    try:
        database.migrate()
    finally:
        database.close()
    print(f"database is up to date: {describe_database(settings.database_url)}")
    return 0


def add_serve_commands(commands: Any) -> None:
    serve = commands.add_parser("serve", help="run the server")
    add_database_options(serve)
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

    db = commands.add_parser("db", help="database maintenance")
    db_commands = db.add_subparsers(dest="db_command", required=True)
    upgrade = db_commands.add_parser("upgrade", help="apply pending migrations")
    add_database_options(upgrade)
    upgrade.set_defaults(handler=_db_upgrade)
