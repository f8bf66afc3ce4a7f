"""Offline attempts: a run reported while the server does not know it yet.

With the durable spool on, ``TUNEPLANE_MODE=offline`` (or a server that cannot be reached
when ``init()`` or ``tuneplane run`` starts) journals the whole attempt: what would have
created the run and started the attempt is written here, in the run's spool directory, and
everything the attempt reports goes into journals beside it, with no token::

    <spool>/<project>/<run>/offline-<key>/
        run.json        the server, the run, its config and meta, the key (written once)
        started.json    the attempt and token `tuneplane sync` started (mode 0600)
        <pid>.<k>-<ms>/ journals (:mod:`~tuneplane.client.spool`), as an online attempt's

``tuneplane sync`` creates the run (or resumes it) and starts the attempt with the user's
API key, sending ``key`` as the ``Idempotency-Key``: a sync interrupted before it wrote
``started.json`` gets the same attempt again, never a second one. Then it delivers the
journals with that attempt's token, as an online attempt's.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

from tuneplane.client.started import StartedAttempt

OFFLINE_PREFIX: Final = "offline-"
RUN_FILE: Final = "run.json"
STARTED_FILE: Final = "started.json"


@dataclass(frozen=True, slots=True)
class OfflineAttempt:
    """An attempt journaled while its run was not set up on the server."""

    directory: Path
    endpoint: str
    project: str
    run: str
    key: str
    config: dict[str, Any] | None = None
    meta: dict[str, object] | None = None
    created_at: float = 0.0

    @property
    def group(self) -> str:
        return self.directory.name

    def __repr__(self) -> str:
        return f"OfflineAttempt({self.project}/{self.run} {self.group})"


def create(
    root: Path,
    endpoint: str,
    project: str,
    run: str,
    config: Mapping[str, Any] | None = None,
    meta: Mapping[str, object] | None = None,
) -> OfflineAttempt:
    """Make an offline attempt's directory and its ``run.json`` (OSError if it cannot be
    written). The key is random: each offline start is an attempt of its own."""
    key = secrets.token_hex(8)
    directory = root / project / run / f"{OFFLINE_PREFIX}{key}"
    directory.mkdir(mode=0o700, parents=True)
    attempt = OfflineAttempt(
        directory,
        endpoint,
        project,
        run,
        key,
        dict(config) if config else None,
        dict(meta) if meta else None,
        time.time(),
    )
    body = {
        "endpoint": endpoint,
        "project": project,
        "run": run,
        "key": key,
        "config": attempt.config,
        "meta": attempt.meta,
        "created_at": attempt.created_at,
    }
    _write(directory / RUN_FILE, orjson.dumps(body, default=str))
    return attempt


def find(directory: Path, project: str, run: str) -> OfflineAttempt:
    """The offline attempt of a journal's group directory (``offline-<key>``); ValueError
    when its ``run.json`` is missing or unreadable."""
    path = directory / RUN_FILE
    try:
        body = orjson.loads(path.read_bytes())
        return OfflineAttempt(
            directory,
            str(body["endpoint"]),
            str(body.get("project") or project),
            str(body.get("run") or run),
            str(body["key"]),
            body.get("config") or None,
            body.get("meta") or None,
            float(body.get("created_at") or 0.0),
        )
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: not an offline attempt's run file ({exc})") from exc


def started(directory: Path) -> StartedAttempt | None:
    """The attempt ``tuneplane sync`` started for this offline attempt, once it has."""
    with contextlib.suppress(OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        body = orjson.loads((directory / STARTED_FILE).read_bytes())
        return StartedAttempt(int(body["attempt"]), str(body["token"]), str(body["endpoint"]))
    return None


def record_started(directory: Path, found: StartedAttempt) -> None:
    body = {"attempt": found.attempt, "token": found.token, "endpoint": found.endpoint}
    _write(directory / STARTED_FILE, orjson.dumps(body))


def remove(directory: Path) -> None:
    """Delete an offline attempt whose journals were all delivered (none is left)."""
    if any(path.is_dir() for path in directory.iterdir()):
        return
    for name in (RUN_FILE, STARTED_FILE, RUN_FILE + ".tmp", STARTED_FILE + ".tmp"):
        with contextlib.suppress(FileNotFoundError):
            (directory / name).unlink()
    with contextlib.suppress(OSError):
        directory.rmdir()


def _write(path: Path, data: bytes) -> None:
    """Whole or not at all: a crash leaves the old file or none, never half of one."""
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    temporary.replace(path)
