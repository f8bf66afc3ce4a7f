"""The ``tuneplane`` command line: one module per command group, each a thin layer over a
room of the package; nothing imports it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tuneplane import __version__
from tuneplane.cli.accounts import add_account_commands
from tuneplane.cli.delete import add_run_write_commands
from tuneplane.cli.doctor import add_doctor_command
from tuneplane.cli.evaluate import add_eval_commands
from tuneplane.cli.imports import add_import_commands
from tuneplane.cli.launch import add_launch_commands
from tuneplane.cli.reads import add_read_commands
from tuneplane.cli.run import add_run_command
from tuneplane.cli.serve import add_serve_commands
from tuneplane.cli.sync import add_sync_command
from tuneplane.contract.errors import TuneplaneError
from tuneplane.contract.settings import SettingError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tuneplane", description="Telemetry for fine-tuning and RL training runs."
    )
    parser.add_argument("--version", action="version", version=f"tuneplane {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    add_serve_commands(commands)
    add_run_command(commands)
    add_doctor_command(commands)
    add_account_commands(commands)
    add_run_write_commands(add_read_commands(commands))
    add_import_commands(commands)
    add_eval_commands(commands)
    add_sync_command(commands)
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
