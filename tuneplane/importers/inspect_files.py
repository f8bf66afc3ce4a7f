"""Finding and reading Inspect AI logs (``.eval`` and ``.json``) through Inspect's own reader.

``inspect_ai`` is an optional extra (``tuneplane[inspect]``), imported only here and only
when an import runs, so the light client never needs it. Logs are listed with
``inspect_ai.log.list_eval_logs`` and parsed with ``read_eval_log``; what they hold is read
first by us, up to its limit: the file's bytes (:data:`IMPORT_INSPECT_LOG_MAX_BYTES`), and
for an ``.eval`` zip the sizes its members declare
(:data:`IMPORT_INSPECT_LOG_UNPACKED_MAX_BYTES`), so a small zip that unpacks to gigabytes is
refused before Inspect opens it. Samples' events (every model call, the bulk of a log) are
never parsed: the import needs the messages, scores and errors.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote, urlparse

from tuneplane.contract.limits import (
    IMPORT_INSPECT_LOG_MAX_BYTES,
    IMPORT_INSPECT_LOG_UNPACKED_MAX_BYTES,
)
from tuneplane.importers.bounded import describe, read_bounded
from tuneplane.importers.problems import ImportRefused, Problem

#: What to install when ``inspect_ai`` is missing.
EXTRA: Final = "tuneplane[inspect]"
SUFFIXES: Final = (".eval", ".json")


@dataclass(frozen=True, slots=True)
class LogFile:
    """One Inspect log, parsed by Inspect (``log`` is its ``EvalLog``)."""

    path: str
    log: Any


def inspect_log_module(what: str) -> Any:
    """``inspect_ai.log``, or :class:`ImportRefused` saying which extra installs it."""
    try:
        import inspect_ai.log as module
    except ImportError as exc:
        rule = f"needs the inspect_ai package, which is not installed: pip install '{EXTRA}'"
        raise ImportRefused([Problem(what, "", rule)]) from exc
    return module


def _local(name: str) -> str:
    """A path from the ``file://`` URI Inspect lists a log by."""
    parsed = urlparse(name)
    return unquote(parsed.path) if parsed.scheme == "file" else name


def find_logs(path: str) -> list[str]:
    """The logs ``path`` names: the file itself, or every ``.eval`` and ``.json`` log
    Inspect lists beneath the directory, oldest first."""
    where = Path(path)
    if where.is_file():
        if where.suffix not in SUFFIXES:
            raise ImportRefused([Problem(path, "", "is not an Inspect log (.eval or .json)")])
        return [str(where)]
    if not where.is_dir():
        raise ImportRefused([Problem(path, "", "does not exist")])
    module = inspect_log_module(path)
    try:
        found = module.list_eval_logs(str(where.resolve()), formats=["eval", "json"])
    except Exception as exc:  # whatever Inspect raises for a directory it cannot list
        raise ImportRefused(
            [Problem(path, "", f"Inspect cannot list it: {type(exc).__name__}: {exc}")]
        ) from exc
    logs = sorted(_local(info.name) for info in found)
    if not logs:
        raise ImportRefused([Problem(path, "", "holds no Inspect log (.eval or .json)")])
    return logs


def _unpacked_problem(path: str, data: bytes) -> Problem | None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            size = sum(member.file_size for member in archive.infolist())
    except zipfile.BadZipFile as exc:
        return Problem(path, "", f"is not an Inspect .eval log (not a zip file: {exc})")
    if size > IMPORT_INSPECT_LOG_UNPACKED_MAX_BYTES:
        limit = describe(IMPORT_INSPECT_LOG_UNPACKED_MAX_BYTES)
        rule = f"unpacks to {size} bytes: an .eval log is read up to {limit}; it was not read"
        return Problem(path, "", rule)
    return None


def read_log(path: str) -> LogFile:
    """The log at ``path`` parsed by Inspect, without its samples' events;
    :class:`ImportRefused` naming the file when it is too large or not a log."""
    module = inspect_log_module(path)
    kind = "eval" if path.endswith(".eval") else "json"
    try:
        data = read_bounded(path, IMPORT_INSPECT_LOG_MAX_BYTES, "an Inspect log")
    except OSError as exc:
        raise ImportRefused([Problem(path, "", f"cannot be read: {exc.strerror}")]) from exc
    problem = _unpacked_problem(path, data) if kind == "eval" else None
    if problem is not None:
        raise ImportRefused([problem])
    try:
        log = module.read_eval_log(
            io.BytesIO(data), format=kind, exclude_fields={"events"}, resolve_attachments=True
        )
    except Exception as exc:  # Inspect's reader raises pydantic, zip and JSON errors alike
        detail = " ".join(str(exc).split())[:300]
        rule = f"is not a log Inspect can read: {type(exc).__name__}: {detail}"
        raise ImportRefused([Problem(path, "", rule)]) from exc
    return LogFile(path, log)
