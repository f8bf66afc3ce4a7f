"""Options several commands share: where the server's database is."""

from __future__ import annotations

import argparse
from typing import Any


def add_database_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        help="data directory (default: $TUNEPLANE_DIR, $TRACKIO_DIR or ./tuneplane-data)",
    )
    parser.add_argument(
        "--database-url",
        help="sqlite:///PATH or postgresql://… (default: SQLite in the data directory)",
    )


def describe_database(url: str) -> str:
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return f"SQLite at {parsed.database}"
    return f"PostgreSQL at {parsed.render_as_string(hide_password=True)}"


def server_settings(args: argparse.Namespace) -> Any:
    from tuneplane.server.settings import Settings

    return Settings.from_env(data_dir=args.data_dir, database_url=args.database_url)
