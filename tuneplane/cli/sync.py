"""``tuneplane sync``: deliver what the durable spool kept."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tuneplane.cli.progress import progress


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
    results = sync(Path(directory), server=server, progress=progress("items delivered"))
    if not results:
        print(f"tuneplane sync: nothing to deliver in {directory}", file=sys.stderr)
    for result in results:
        print(f"tuneplane sync: {describe(result)}", file=sys.stderr)
    return 0 if all(result.complete for result in results) else 1


def add_sync_command(commands: Any) -> None:
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
