"""``tuneplane.register_export()``: record that a run wrote an export (a Hugging Face
directory, a checkpoint file, or a copy at a URI), with a digest, as one ``export`` event
of the run (journaled by the spool like every event). ``GET …/runs/{run}/exports`` lists
them, and matched benchmark evaluations start from them (docs/sdk.md, docs/launch.md).

The digest of a local directory is the SHA-256, over its regular files in the order of
their relative POSIX paths (byte order), of ``<relative path> NUL <SHA-256 of the file's
bytes, hex> LF`` for each (method ``sha256-files-v1``): the same files with the same
bytes give the same digest wherever the directory lies. A single file is digested as a
directory holding only it. Symbolic links are followed to files and never into
directories. A URI (``s3://…``, ``hf://…``) is not read: its digest is the one given
(``given``), or there is none (``none``), and the event says which.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
from pathlib import Path
from typing import Final

from tuneplane.client.reporter import Reporter
from tuneplane.contract.limits import OBSERVATION_STRING_MAX_CHARS
from tuneplane.contract.observations import EXPORT_EVENT, EXPORT_FORMATS

_URI: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
_SHA256: Final = re.compile(r"[0-9a-f]{64}")
_CHUNK: Final = 1 << 20


def directory_digest(root: Path) -> tuple[str, int, int]:
    """``(digest, files, bytes)`` of a directory (or of one file) as the module says.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "config.json").write_text("{}")
    >>> directory_digest(d)[0][:12], directory_digest(d)[1:]
    ('bef6acf233bd', (1, 2))
    """
    files = [(os.fsencode(root.name), root)] if root.is_file() else sorted(_files(root))
    outer = hashlib.sha256()
    size = 0
    for relative, path in files:
        inner = hashlib.sha256()
        with path.open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                inner.update(chunk)
                size += len(chunk)
        outer.update(relative + b"\0" + inner.hexdigest().encode() + b"\n")
    return outer.hexdigest(), len(files), size


def _files(root: Path) -> list[tuple[bytes, Path]]:
    found = []
    for directory, _subdirectories, names in os.walk(root):
        for name in names:
            path = Path(directory, name)
            if path.is_file():  # a link to a file counts; to a directory, a socket: not
                relative = path.relative_to(root).as_posix()
                found.append((os.fsencode(relative), path))
    return found


def export_fields(
    path_or_uri: str | os.PathLike[str], format: str, digest: str | None
) -> dict[str, object]:
    """The ``export`` event's fields; :class:`ValueError` says why there are none."""
    if format not in EXPORT_FORMATS:
        raise ValueError(f"format must be one of {', '.join(EXPORT_FORMATS)}, not {format!r}")
    if digest is not None and not _SHA256.fullmatch(digest):
        raise ValueError("digest must be a lowercase hex SHA-256 (64 characters)")
    given = os.fspath(path_or_uri)
    fields: dict[str, object] = {"format": format}
    if _URI.fullmatch(given) and not given.startswith("file://"):
        fields["uri"] = given
    else:
        path = Path(given.removeprefix("file://")).resolve()
        if not path.exists():
            raise ValueError(f"{path} does not exist (a URI needs its scheme, s3://…)")
        fields["uri"] = str(path)
        if digest is None:
            digest, files, size = directory_digest(path)
            fields.update({"digest": digest, "digest_method": "sha256-files-v1"})
            fields.update({"files": files, "bytes": size})
    if len(str(fields["uri"])) > OBSERVATION_STRING_MAX_CHARS:
        raise ValueError(f"the path or URI is longer than {OBSERVATION_STRING_MAX_CHARS}")
    if "digest" not in fields:
        fields["digest_method"] = "none" if digest is None else "given"
        if digest is not None:
            fields["digest"] = digest
    return fields


def register_export(
    reporter: Reporter,
    path_or_uri: str | os.PathLike[str],
    step: int | None = None,
    format: str = "hf",
    digest: str | None = None,
) -> bool:
    """Queue an ``export`` event: the run wrote ``path_or_uri`` at ``step`` in ``format``
    (``hf``: a Hugging Face model directory). A local directory or file is digested here
    (every byte read, so a large export takes its time); a URI keeps ``digest`` as given,
    or none. True when queued; False, with one line on stderr, when the path does not
    exist or an argument breaks its rule. Never raises.

    >>> tuneplane.register_export("/scratch/out/checkpoint-500", step=500)
    True
    """
    try:
        fields = export_fields(path_or_uri, format, digest)
    except (ValueError, OSError) as exc:
        with contextlib.suppress(OSError, ValueError):
            print(f"tuneplane: export not registered: {exc}", file=sys.stderr, flush=True)
        return False
    return reporter.event(EXPORT_EVENT, fields, step=step)
