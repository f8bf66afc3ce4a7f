"""``tuneplane user`` and ``tuneplane project``: local accounts and a project's visibility,
on this machine's database."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tuneplane.cli.options import add_database_options, server_settings


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

    settings = server_settings(args)
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

    lines = admin.set_visibility(server_settings(args), args.name, args.project_command)
    print("\n".join(lines))
    return 0


def add_account_commands(commands: Any) -> None:
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
        add_database_options(sub)
        sub.set_defaults(handler=_user)
    project = commands.add_parser("project", help="a project's visibility")
    project_commands = project.add_subparsers(dest="project_command", required=True)
    for visibility in ("public", "private"):
        sub = project_commands.add_parser(visibility, help=f"make a project {visibility}")
        sub.add_argument("name")
        add_database_options(sub)
        sub.set_defaults(handler=_project)
