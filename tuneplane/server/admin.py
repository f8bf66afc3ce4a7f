"""Site administration on this machine: accounts and project visibility, written to the
database directly (as ``tuneplane db upgrade`` is), so it works with the server running or
not, and before any account exists.

Each function is one ``tuneplane user …`` / ``tuneplane project …`` command; it returns the
lines to print. Passwords are asked for by the command line, never taken as arguments (they
would land in the shell's history and in ``ps``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection

from tuneplane.contract.access import Visibility
from tuneplane.server.settings import Settings
from tuneplane.store import access, accounts
from tuneplane.store.database import Database


@contextmanager
def _opened(settings: Settings) -> Iterator[Database]:
    # No lock: the server may hold the data directory; SQLite serializes the few writes.
    database = Database(settings.database_url, lock=False)
    try:
        database.migrate()
        yield database
    finally:
        database.close()


def add_user(settings: Settings, login: str, password: str, *, admin: bool) -> list[str]:
    digest = accounts.hash_password(password)
    with _opened(settings) as database:
        user = database.run_write(
            lambda c: accounts.add_user(c, login, password_hash=digest, is_admin=admin)
        )
    kind = "administrator" if user.is_admin else "account"
    return [f"added {kind} {user.login!r}; sign in at /sign-in"]


def list_users(settings: Settings) -> list[str]:
    with _opened(settings) as database, database.connect() as connection:
        users = accounts.list_users(connection)
    if not users:
        return ["no accounts yet: tuneplane user add LOGIN --admin"]
    return [
        f"{user.login}\t{'admin' if user.is_admin else 'user'}\t"
        f"{'disabled' if user.disabled else 'active'}"
        for user in users
    ]


def set_disabled(settings: Settings, login: str, disabled: bool) -> list[str]:
    with _opened(settings) as database:
        database.run_write(accounts.set_disabled, login, disabled)
    if disabled:
        return [f"disabled {login!r}: its sessions and API keys stop working now"]
    return [f"enabled {login!r}"]


def reset_password(settings: Settings, login: str, password: str) -> list[str]:
    digest = accounts.hash_password(password)
    with _opened(settings) as database:
        database.run_write(accounts.set_password, login, digest)
    return [f"new password for {login!r}; its sessions ended"]


def set_visibility(settings: Settings, project: str, visibility: Visibility) -> list[str]:
    with _opened(settings) as database:
        database.run_write(_visibility_of_existing, project, visibility)
    return [f"project {project!r} is {visibility} now"]


def _visibility_of_existing(connection: Connection, project: str, visibility: Visibility) -> None:
    access.find_project_id(connection, project)  # NotFound names it when there is none
    access.set_visibility(connection, project, visibility)


def first_admin_wanted(database: Database) -> bool:
    """Whether no account exists yet: the server prints a link to make the first."""
    with database.connect() as connection:
        return accounts.count_users(connection) == 0


def public_projects_notice(database: Database) -> str | None:
    """One line for the server's start: how many projects anyone can read, and how to
    change that (projects from before accounts existed became public on upgrade)."""
    with database.connect() as connection:
        count = access.count_public_projects(connection)
    if not count:
        return None
    return (
        f"{count} public project{'s' if count != 1 else ''}: anyone who can reach this server "
        "reads their runs; make one private with `tuneplane project private NAME`"
    )
