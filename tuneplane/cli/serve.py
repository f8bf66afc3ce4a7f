"""``tuneplane serve`` and ``tuneplane db upgrade``: the server and its database."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from tuneplane import __version__
from tuneplane.cli.options import add_database_options, describe_database

#: More processes than this on one machine is a mistake, not a deployment.
WORKERS_MAX = 64


def _serve(args: argparse.Namespace) -> int:
    from tuneplane.server.settings import Settings

    # Settings first: a bad one is said before the web stack is imported (seconds).
    flags = {
        "data_dir": args.data_dir,
        "database_url": args.database_url,
        "host": args.host,
        "port": args.port,
        "root_path": args.root_path,
    }
    settings = Settings.from_env(**flags)
    if args.workers > 1:
        return _serve_workers(args, settings, flags)
    import uvicorn

    from tuneplane.server.app import create_app
    from tuneplane.server.serving import log_to_stderr, tune_interpreter

    app = create_app(settings)
    # Building the API description prepares every route's request and response models,
    # which the framework otherwise does during the first requests (tens of ms each).
    app.openapi()
    tune_interpreter()
    log_to_stderr(args.log_level)
    address = _announce(settings)
    _print_access_notices(app.state.tuneplane.database)
    _print_first_admin_link(address, app.state.tuneplane.first_admin.token, "this process only")
    uvicorn.run(app, **_uvicorn_options(args, settings))
    return 0


def _uvicorn_options(args: argparse.Namespace, settings: Any) -> dict[str, Any]:
    return {
        "host": settings.host,
        "port": settings.port,
        "log_level": args.log_level,
        "access_log": args.access_log,
        # Forwarded headers count from TUNEPLANE_TRUSTED_PROXIES only (uvicorn would trust
        # loopback, or FORWARDED_ALLOW_IPS, by default): server/forwarded.py's rule.
        "proxy_headers": bool(settings.trusted_proxies),
        "forwarded_allow_ips": [str(network) for network in settings.trusted_proxies],
        # Live streams never end by themselves; do not let them hold up a shutdown.
        "timeout_graceful_shutdown": 3,
    }


def _announce(settings: Any) -> str:
    ingest = "enabled" if settings.ingest_secret else "disabled (set TUNEPLANE_INGEST_SECRET)"
    address = f"http://{settings.host}:{settings.port}{settings.root_path}"
    print(
        f"tuneplane {__version__}: {address} "
        f"on {describe_database(settings.database_url)}; ingestion {ingest}",
        file=sys.stderr,
        flush=True,
    )
    return address


def _serve_workers(args: argparse.Namespace, settings: Any, flags: dict[str, Any]) -> int:
    """``--workers N``: N server processes accepting on one socket (PostgreSQL only)."""
    if settings.database_url.startswith("sqlite"):
        print(
            f"tuneplane serve: --workers {args.workers} needs PostgreSQL: SQLite allows one "
            "server process per data directory. Run one (without --workers), or use "
            "--database-url postgresql://… for several.",
            file=sys.stderr,
        )
        return 2
    import secrets

    import uvicorn

    from tuneplane.server.admin import first_admin_wanted
    from tuneplane.server.serving import worker_flags
    from tuneplane.store.database import Database

    database = Database(settings.database_url)
    try:
        database.migrate()
        token = secrets.token_urlsafe(32) if first_admin_wanted(database) else None
        address = _announce(settings)
        print(f"tuneplane: {args.workers} server processes", file=sys.stderr, flush=True)
        _print_access_notices(database)
    finally:
        database.close()
    first = {"first_admin": token} if token else {}
    os.environ.update(worker_flags({**flags, **first, "log_level": args.log_level}))
    _print_first_admin_link(address, token, f"any of the {args.workers} processes")
    uvicorn.run(
        "tuneplane.server.serving:worker_app",
        factory=True,
        workers=args.workers,
        **_uvicorn_options(args, settings),
    )
    return 0


def _print_access_notices(database: Any) -> None:
    from tuneplane.server.admin import public_projects_notice

    notice = public_projects_notice(database)
    if notice:
        print(f"tuneplane: {notice}", file=sys.stderr, flush=True)


def _print_first_admin_link(address: str, token: str | None, where: str) -> None:
    if token is not None:
        # As a notebook server prints its token: the one way in before any account exists.
        print(
            f"tuneplane: no account yet. Create the first administrator here (one use, {where}):"
            f"\n    {address}/welcome#{token}",
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


def _workers(value: str) -> int:
    if not value.isdigit() or not 1 <= int(value) <= WORKERS_MAX:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {WORKERS_MAX}")
    return int(value)


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
    serve.add_argument(
        "--workers",
        type=_workers,
        default=1,
        metavar="N",
        help="server processes accepting on one socket (PostgreSQL only; default 1)",
    )
    serve.set_defaults(handler=_serve)

    db = commands.add_parser("db", help="database maintenance")
    db_commands = db.add_subparsers(dest="db_command", required=True)
    upgrade = db_commands.add_parser("upgrade", help="apply pending migrations")
    add_database_options(upgrade)
    upgrade.set_defaults(handler=_db_upgrade)
