"""User API keys and per-attempt ingest tokens. Only SHA-256 hashes are stored; a secret is
found by its hash, so comparing never depends on how much of a guess was right."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, func, insert, select, update

from tuneplane.contract.environment import (
    ADMIN_KEY_FILE,
    API_KEY_PREFIX,
    INGEST_TOKEN_PREFIX,
)
from tuneplane.contract.errors import AttemptSuperseded, NotFound, Unauthorized
from tuneplane.store.dialect import upsert
from tuneplane.store.schema import api_keys, attempts, projects, runs, users
from tuneplane.store.sql import Dialect

T = TypeVar("T")


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_secret(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def ensure_admin_key(connection: Connection, data_dir: Path) -> Path:
    """Make sure ``<data_dir>/admin.key`` holds a key the database accepts; returns its path.

    The file is created once, readable by its owner only; the CLI on this machine reads it.
    """
    path = data_dir / ADMIN_KEY_FILE
    if path.exists():
        key = path.read_text().strip()
    else:
        data_dir.mkdir(parents=True, exist_ok=True)
        key = new_secret(API_KEY_PREFIX)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(key + "\n")
    connection.execute(
        upsert(connection, api_keys)
        .values(name="admin", key_hash=hash_secret(key), created_at=time.time())
        .on_conflict_do_nothing(index_elements=[api_keys.c.key_hash])
    )
    return path


@dataclass(frozen=True, slots=True)
class KeyHolder:
    """Whose API key it is: an account (``user_id``), or the site administrator (the admin
    key, which belongs to none)."""

    user_id: int | None
    can_write: bool
    is_admin: bool


def resolve_api_key(connection: Connection, key: str) -> KeyHolder | None:
    """The holder of a valid API key; None for an unknown or revoked key, or one whose
    account is disabled. Looked up on every request, so a revoked key stops at once."""
    if not key.startswith(API_KEY_PREFIX):
        return None
    row = connection.execute(
        select(api_keys.c.user_id, api_keys.c.scope, users.c.is_admin, users.c.disabled_at)
        .select_from(api_keys.outerjoin(users, users.c.id == api_keys.c.user_id))
        .where(api_keys.c.key_hash == hash_secret(key), api_keys.c.revoked_at.is_(None))
    ).first()
    if row is None or row.disabled_at is not None:
        return None
    if row.user_id is None:
        return KeyHolder(None, can_write=True, is_admin=True)
    return KeyHolder(row.user_id, can_write=row.scope == "write", is_admin=bool(row.is_admin))


@dataclass(frozen=True, slots=True)
class ApiKey:
    id: int
    name: str
    scope: str
    created_at: float
    revoked: bool

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "name": self.name,
            "scope": self.scope,
            "created_at": self.created_at,
            "revoked": self.revoked,
        }


def create_api_key(connection: Connection, user_id: int, name: str, scope: str) -> tuple[int, str]:
    """A named personal key; its id and the key itself (shown once, stored hashed)."""
    key = new_secret(API_KEY_PREFIX)
    key_id = connection.execute(
        insert(api_keys)
        .values(
            name=name,
            key_hash=hash_secret(key),
            created_at=time.time(),
            user_id=user_id,
            scope=scope,
        )
        .returning(api_keys.c.id)
    ).scalar_one()
    return int(key_id), key


def list_api_keys(connection: Connection, user_id: int) -> list[ApiKey]:
    rows = connection.execute(
        select(
            api_keys.c.id,
            api_keys.c.name,
            api_keys.c.scope,
            api_keys.c.created_at,
            api_keys.c.revoked_at.is_not(None),
        )
        .where(api_keys.c.user_id == user_id)
        .order_by(api_keys.c.id)
    )
    return [ApiKey(*row) for row in rows]


def revoke_api_key(connection: Connection, user_id: int, key_id: int) -> None:
    revoked = connection.execute(
        update(api_keys)
        .where(api_keys.c.id == key_id, api_keys.c.user_id == user_id)
        .values(revoked_at=func.coalesce(api_keys.c.revoked_at, time.time()))
    ).rowcount
    if not revoked:
        raise NotFound(f"key: you have no API key {key_id}")


@dataclass(frozen=True, slots=True)
class IssuedToken:
    attempt: int
    token: str
    expires_at: float


def start_attempt(
    connection: Connection, run_id: int, token_days: float, request_key: str | None = None
) -> IssuedToken:
    """Execution attempt N+1 of a run, with a fresh ingest token scoped to it.

    A ``request_key`` seen before for this run names the attempt it started: that attempt
    is returned again with a new token (the answer carrying the first one was lost, or the
    caller would not be asking again), and no attempt is added. Either way the token it
    replaces, or every token of the attempts it supersedes, writes no more from the moment
    this commits (:func:`check_current`)."""
    now = time.time()
    token = new_secret(INGEST_TOKEN_PREFIX)
    expires_at = now + token_days * 86_400
    if request_key is not None:
        started = connection.execute(
            update(attempts)
            .where(attempts.c.run_id == run_id, attempts.c.request_key == request_key)
            .values(token_hash=hash_secret(token), token_expires_at=expires_at)
            .returning(attempts.c.attempt)
        ).scalar_one_or_none()
        if started is not None:
            return IssuedToken(attempt=started, token=token, expires_at=expires_at)
    _wait_for_writes_of_latest(connection, run_id)
    number = connection.execute(
        update(runs)
        .where(runs.c.id == run_id)
        .values(attempt_count=runs.c.attempt_count + 1, updated_at=now)
        .returning(runs.c.attempt_count)
    ).scalar_one()
    connection.execute(
        insert(attempts).values(
            run_id=run_id,
            attempt=number,
            started_at=now,
            token_hash=hash_secret(token),
            token_expires_at=expires_at,
            request_key=request_key,
        )
    )
    return IssuedToken(attempt=number, token=token, expires_at=expires_at)


def _wait_for_writes_of_latest(connection: Connection, run_id: int) -> None:
    """On PostgreSQL, lock the run's latest attempt: a write of that attempt in flight on
    any server process (it holds the row FOR SHARE) commits first, and none starts until
    the new attempt is committed. Taken before the run's row, so that a write which goes
    on to update the run (status, heartbeat) cannot deadlock with us. SQLite has one
    writer, which orders the two by itself."""
    if connection.dialect.name == "sqlite":
        return
    latest = select(runs.c.attempt_count).where(runs.c.id == run_id).scalar_subquery()
    connection.execute(
        select(attempts.c.id)
        .where(attempts.c.run_id == run_id, attempts.c.attempt == latest)
        .with_for_update()
    )


@dataclass(frozen=True, slots=True)
class TokenScope:
    """What an ingest token may write to: one run, one execution attempt."""

    run_id: int
    attempt_id: int
    attempt: int
    project: str
    run: str
    expires_at: float
    token_hash: str


def resolve_ingest_token(connection: Connection, token: str) -> TokenScope:
    invalid = Unauthorized("authorization: the ingest token is not valid")
    if not token.startswith(INGEST_TOKEN_PREFIX):
        raise invalid
    row = connection.execute(
        select(
            attempts.c.run_id,
            attempts.c.id,
            attempts.c.attempt,
            projects.c.name,
            runs.c.name,
            attempts.c.token_expires_at,
            attempts.c.token_hash,
        )
        .join(runs, runs.c.id == attempts.c.run_id)
        .join(projects, projects.c.id == runs.c.project_id)
        .where(attempts.c.token_hash == hash_secret(token))
    ).first()
    if row is None:
        raise invalid
    scope = TokenScope(*row)
    if scope.expires_at <= time.time():
        raise Unauthorized("authorization: the ingest token has expired; start a new attempt")
    return scope


def check_current(connection: Connection, scope: TokenScope) -> None:
    """Refuse a write whose token was replaced or has expired, or whose attempt a newer one
    superseded. It runs in the write's own transaction: what a server process has cached
    about a token never decides, so a credential stops writing, on every process sharing
    the database, from the moment it is replaced.

    Fixed SQL through the driver's cursor: this runs on every ingest write."""
    dialect = Dialect(connection)
    cursor = dialect.cursor
    # FOR SHARE: a start_attempt() that supersedes this attempt waits for this write.
    lock = "" if dialect.is_sqlite else " FOR SHARE"
    cursor.execute(
        dialect.sql("SELECT token_hash, token_expires_at FROM attempts WHERE id = ?" + lock),
        (scope.attempt_id,),
    )
    found = cursor.fetchone()
    if found is None:  # the run was deleted, and its attempts with it
        raise Unauthorized("authorization: the ingest token is not valid (its run was deleted)")
    token_hash, expires_at = found
    if not hmac.compare_digest(token_hash, scope.token_hash):
        raise Unauthorized(
            "authorization: the ingest token was replaced (the attempt was started again "
            "with its Idempotency-Key); use the token that answer carried"
        )
    if expires_at <= time.time():
        raise Unauthorized("authorization: the ingest token has expired; start a new attempt")
    cursor.execute(dialect.sql("SELECT attempt_count FROM runs WHERE id = ?"), (scope.run_id,))
    (latest,) = cursor.fetchone()
    if latest != scope.attempt:
        raise AttemptSuperseded(scope.attempt, latest)


def write_as(connection: Connection, scope: TokenScope, fn: Callable[..., T], *args: Any) -> T:
    """``fn(connection, *args)``, if ``scope``'s token may still write (:func:`check_current`)."""
    check_current(connection, scope)
    return fn(connection, *args)
