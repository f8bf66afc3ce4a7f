"""Accounts and browser sessions.

Passwords are hashed with argon2id (``argon2-cffi``, its recommended parameters); a session
is a random token in a cookie, of which only the SHA-256 is stored, so a stolen database
opens no session and signing out (or disabling the account) revokes it on every server
process at once.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass
from typing import Final

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from sqlalchemy import Connection, func, insert, select, text, update

from tuneplane.contract.access import SESSION_PREFIX
from tuneplane.contract.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    TooManyRequests,
    Violation,
)
from tuneplane.contract.limits import (
    PASSWORD_MAX_CHARS,
    PASSWORD_MIN_CHARS,
    SESSION_DAYS,
    SIGN_IN_FAILURES_MAX,
    SIGN_IN_WINDOW_SECONDS,
)
from tuneplane.store.credentials import hash_secret, new_secret
from tuneplane.store.schema import sessions, sign_in_failures, users

_hasher = PasswordHasher()

# Verified against when the login is unknown, so a wrong login costs what a wrong
# password does and the timing does not tell which accounts exist. The hash of a random
# password nobody kept, written out because making it cost every process that imports this
# module 0.35 s; its parameters are the hasher's (tests/store/test_accounts.py checks).
DUMMY_HASH: Final = (
    "$argon2id$v=19$m=65536,t=3,p=4$1wRkfC0aX4cwZn8BGzz4lw"
    "$LvZ0zMT3LLVA/ipFsMYEC6joQvri+FZK33C4/z/nywo"
)


@dataclass(frozen=True, slots=True)
class User:
    id: int
    login: str
    email: str | None
    display_name: str | None
    is_admin: bool
    disabled: bool
    created_at: float

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "login": self.login,
            "email": self.email,
            "display_name": self.display_name,
            "is_admin": self.is_admin,
            "disabled": self.disabled,
            "created_at": self.created_at,
        }


_USER_COLUMNS = (
    users.c.id,
    users.c.login,
    users.c.email,
    users.c.display_name,
    users.c.is_admin,
    users.c.disabled_at.is_not(None),
    users.c.created_at,
)


def password_problem(password: str) -> str | None:
    if not PASSWORD_MIN_CHARS <= len(password) <= PASSWORD_MAX_CHARS:
        return f"must be {PASSWORD_MIN_CHARS}-{PASSWORD_MAX_CHARS} characters"
    return None


def hash_password(password: str) -> str:
    problem = password_problem(password)
    if problem:
        raise InvalidInput((Violation("password", problem),))
    return _hasher.hash(password)


def count_users(connection: Connection) -> int:
    return int(connection.execute(select(func.count()).select_from(users)).scalar_one())


def add_user(
    connection: Connection,
    login: str,
    *,
    password_hash: str | None,
    email: str | None = None,
    display_name: str | None = None,
    is_admin: bool = False,
    oidc: tuple[str, str] | None = None,
) -> User:
    """A new account; 409 when the login is taken. Hash the password first
    (:func:`hash_password`, slow on purpose) outside the writer."""
    taken = connection.execute(select(users.c.id).where(users.c.login == login)).first()
    if taken is not None:
        raise Conflict(f"login: an account named {login!r} already exists")
    issuer, subject = oidc if oidc is not None else (None, None)
    user_id = connection.execute(
        insert(users)
        .values(
            login=login,
            email=email,
            display_name=display_name,
            password_hash=password_hash,
            is_admin=is_admin,
            oidc_issuer=issuer,
            oidc_subject=subject,
            created_at=time.time(),
        )
        .returning(users.c.id)
    ).scalar_one()
    return get_user(connection, user_id)


def get_user(connection: Connection, user_id: int) -> User:
    row = connection.execute(select(*_USER_COLUMNS).where(users.c.id == user_id)).first()
    if row is None:
        raise NotFound(f"user: no account with id {user_id}")
    return User(*row)


def find_user(connection: Connection, login: str) -> User:
    row = connection.execute(select(*_USER_COLUMNS).where(users.c.login == login)).first()
    if row is None:
        raise NotFound(f"login: no account named {login!r}")
    return User(*row)


def find_oidc_user(connection: Connection, issuer: str, subject: str) -> User | None:
    row = connection.execute(
        select(*_USER_COLUMNS).where(users.c.oidc_issuer == issuer, users.c.oidc_subject == subject)
    ).first()
    return None if row is None else User(*row)


def list_users(connection: Connection) -> list[User]:
    return [User(*row) for row in connection.execute(select(*_USER_COLUMNS).order_by(users.c.id))]


def set_disabled(connection: Connection, login: str, disabled: bool = True) -> User:
    """Disable (or enable) an account; disabling ends its sessions at once."""
    user = find_user(connection, login)
    now = time.time()
    connection.execute(
        update(users).where(users.c.id == user.id).values(disabled_at=now if disabled else None)
    )
    if disabled:
        revoke_sessions(connection, user.id)
    return get_user(connection, user.id)


def set_password(connection: Connection, login: str, password_hash: str) -> User:
    """A new password (hashed by the caller); every session of the account ends."""
    user = find_user(connection, login)
    connection.execute(
        update(users).where(users.c.id == user.id).values(password_hash=password_hash)
    )
    revoke_sessions(connection, user.id)
    return user


def stored_password_hash(connection: Connection, login: str) -> tuple[int | None, str]:
    """The account's id and password hash, for :func:`verify_password` off the writer;
    ``(None, a dummy hash)`` when there is no usable local account, so the caller spends
    the same time either way."""
    row = connection.execute(
        select(users.c.id, users.c.password_hash).where(
            users.c.login == login, users.c.disabled_at.is_(None)
        )
    ).first()
    if row is None or row.password_hash is None:
        return None, DUMMY_HASH
    return row.id, row.password_hash


def verify_password(password_hash: str, password: str) -> bool:
    """Constant-time comparison by the library; slow on purpose (call it on a thread)."""
    try:
        return _hasher.verify(password_hash, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


# --- sessions -------------------------------------------------------------------------------


def create_session(connection: Connection, user_id: int) -> str:
    """A new session for the account; the token goes into the cookie, its hash here."""
    token = new_secret(SESSION_PREFIX)
    now = time.time()
    connection.execute(
        insert(sessions).values(
            user_id=user_id,
            token_hash=hash_secret(token),
            created_at=now,
            expires_at=now + SESSION_DAYS * 86_400,
        )
    )
    return token


def session_user(connection: Connection, token: str) -> User | None:
    """The account a session cookie signs in, or None when it is unknown, expired,
    revoked, or its account is disabled."""
    if not token.startswith(SESSION_PREFIX):
        return None
    row = connection.execute(
        select(*_USER_COLUMNS)
        .join(sessions, sessions.c.user_id == users.c.id)
        .where(
            sessions.c.token_hash == hash_secret(token),
            sessions.c.revoked_at.is_(None),
            sessions.c.expires_at > time.time(),
            users.c.disabled_at.is_(None),
        )
    ).first()
    return None if row is None else User(*row)


def end_session(connection: Connection, token: str) -> None:
    connection.execute(
        update(sessions)
        .where(sessions.c.token_hash == hash_secret(token), sessions.c.revoked_at.is_(None))
        .values(revoked_at=time.time())
    )


def revoke_sessions(connection: Connection, user_id: int) -> None:
    connection.execute(
        update(sessions)
        .where(sessions.c.user_id == user_id, sessions.c.revoked_at.is_(None))
        .values(revoked_at=time.time())
    )


# --- sign-in rate limit ---------------------------------------------------------------------

#: The first key of the PostgreSQL advisory locks that serialize a subject's sign-in
#: attempts (two-key locks do not share a key space with the one-key ones used elsewhere).
_PG_SIGN_IN_LOCKS: Final = 0x7369_676E
_PG_LOCK_SUBJECT: Final = text(
    "SELECT pg_advisory_xact_lock(CAST(:space AS integer), CAST(:key AS integer))"
)


def reserve_sign_in_attempt(connection: Connection, subjects: tuple[str, ...]) -> list[int]:
    """Take one sign-in attempt for each subject (``account:<login>``, ``address:<ip>``)
    before the password is checked, or refuse when one of them has none left: at most
    ``SIGN_IN_FAILURES_MAX`` attempts per subject within the window, counted in the
    database so every server process shares them. A reserved attempt counts as failed
    until :func:`forget_sign_in_attempt` gives it back (the password was right); one whose
    request died midway stays counted. Answers the reservation's row ids.

    Counting and reserving must be one step, or parallel tries all see room and all check
    a password: SQLite has one writer, so its transaction is alone; on PostgreSQL each
    subject's lock is held until commit (taken in one order, so two tries never wait on
    each other's), and the count that follows sees every attempt committed before."""
    now = time.time()
    if connection.dialect.name == "postgresql":
        for key in sorted({zlib.crc32(subject.encode()) - 2**31 for subject in subjects}):
            connection.execute(_PG_LOCK_SUBJECT, {"space": _PG_SIGN_IN_LOCKS, "key": key})
    since = now - SIGN_IN_WINDOW_SECONDS
    for subject in subjects:
        attempts = connection.execute(
            select(func.count())
            .select_from(sign_in_failures)
            .where(sign_in_failures.c.subject == subject, sign_in_failures.c.at > since)
        ).scalar_one()
        if attempts >= SIGN_IN_FAILURES_MAX:
            raise TooManyRequests(
                f"sign-in: too many failed attempts for this {subject.partition(':')[0]}; "
                f"try again in {SIGN_IN_WINDOW_SECONDS // 60} minutes"
            )
    reserved = [
        connection.execute(
            insert(sign_in_failures)
            .values(subject=subject, at=now)
            .returning(sign_in_failures.c.id)
        ).scalar_one()
        for subject in subjects
    ]
    # Old attempts count for nothing: keep the table small.
    connection.execute(sign_in_failures.delete().where(sign_in_failures.c.at <= since))
    return reserved


def forget_sign_in_attempt(connection: Connection, reserved: list[int]) -> None:
    """Give back a reservation of :func:`reserve_sign_in_attempt`: the password was right,
    and a successful sign-in counts against no limit."""
    connection.execute(sign_in_failures.delete().where(sign_in_failures.c.id.in_(reserved)))
