"""``tuneplane runs delete PROJECT/RUN [--yes]``: the run commands that change what the
server stores, beside the reading ones, with the user's key as ``tuneplane run`` finds it.

Exit codes: 0 deleted (or not confirmed), 1 not found, 2 a usage error or bad setting, 3 the
server is unreachable, 4 the key was refused, 5 the server failed.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import IO, Any

from tuneplane.contract import environment
from tuneplane.contract.settings import Reader


def add_run_write_commands(run_commands: Any) -> None:
    """Add ``delete`` to the ``runs`` command's subparsers."""
    delete = run_commands.add_parser(
        "delete",
        help="delete a run and all its data (owners)",
        description="Delete PROJECT/RUN on the server: its points, events, alerts, logs, "
        "outcomes, trajectories and their bodies. The name can be used again at once; the "
        "data is removed in the background. Asks first unless --yes.",
    )
    delete.add_argument("target", metavar="PROJECT/RUN")
    delete.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    delete.add_argument(
        "--server", help=f"server URL (default: ${environment.URL} or {environment.DEFAULT_URL})"
    )
    delete.add_argument(
        "--data-dir",
        help=f"where to find {environment.ADMIN_KEY_FILE} when ${environment.API_KEY} is unset",
    )
    delete.set_defaults(handler=runs_delete)


def _confirmed(target: str, stdin: IO[str]) -> bool:
    if not stdin.isatty():
        print(
            f"tuneplane runs delete: {target}: pass --yes to delete without a terminal to ask",
            file=sys.stderr,
        )
        return False
    print(f"Delete {target} and all its data? This cannot be undone. Type the run's ID: ",
          end="", file=sys.stderr, flush=True)  # fmt: skip
    return stdin.readline().strip() == target.partition("/")[2]


def runs_delete(args: argparse.Namespace, stdin: IO[str] | None = None) -> int:
    from tuneplane.client.run_admin import AdminFailed, delete_run
    from tuneplane.client.runner import api_key

    project, _, run = args.target.partition("/")
    if not project or not run or "/" in run:
        print(f"tuneplane runs delete: {args.target!r}: name a run as PROJECT/RUN", file=sys.stderr)
        return 2
    reader = Reader(os.environ)
    if args.server:
        server = reader.check(environment.URL_SETTING.rule, "--server", args.server)
    else:
        server = reader.read(environment.URL_SETTING)
    reader.done()
    if not args.yes and not _confirmed(args.target, stdin or sys.stdin):
        print("tuneplane runs delete: not deleted", file=sys.stderr)
        return 0 if (stdin or sys.stdin).isatty() else 2
    try:
        delete_run(server or environment.DEFAULT_URL, api_key(args.data_dir, os.environ),
                   project, run)  # fmt: skip
    except AdminFailed as failed:
        print(f"tuneplane runs delete: {failed.message}", file=sys.stderr)
        return failed.exit_code
    print(f"deleted {project}/{run}: its data is being removed in the background")
    return 0
