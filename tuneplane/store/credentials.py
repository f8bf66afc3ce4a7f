"""User API keys and per-attempt ingest tokens. Only SHA-256 hashes are stored; a secret is
found by its hash, so comparing never depends on how much of a guess was right."""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, insert, select, update

from tuneplane.contract.environment import (
    ADMIN_KEY_FILE,
    API_KEY_PREFIX,
    INGEST_TOKEN_PREFIX,
)
from tuneplane.contract.errors import Unauthorized
from tuneplane.store.dialect import upsert
from tuneplane.store.schema import api_keys, attempts, projects, runs


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


def api_key_is_valid(connection: Connection, key: str) -> bool:
    if not key.startswith(API_KEY_PREFIX):
        return False
    found = connection.execute(
        select(api_keys.c.id).where(api_keys.c.key_hash == hash_secret(key))
    ).first()
    return found is not None


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
    caller would not be asking again), and no attempt is added."""
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


@dataclass(frozen=True, slots=True)
class TokenScope:
    """What an ingest token may write to: one run, one execution attempt."""

    run_id: int
    attempt_id: int
    attempt: int
    project: str
    run: str
    expires_at: float


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
