"""``tuneplane doctor``: the command; its checks are in doctor_checks (imported when it runs)."""

from __future__ import annotations

import argparse
from typing import Any

from tuneplane.cli.options import add_database_options


def _doctor(args: argparse.Namespace) -> int:
    import os

    from tuneplane.cli.doctor_checks import run_checks
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
    return run_checks(url, api_key(args.data_dir, environ), environ, settings)


def add_doctor_command(commands: Any) -> None:
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
    add_database_options(doctor)
    doctor.add_argument(
        "--workers-only",
        action="store_true",
        help="check the URL and streams only (on a worker, without the server's storage)",
    )
    doctor.set_defaults(handler=_doctor)
