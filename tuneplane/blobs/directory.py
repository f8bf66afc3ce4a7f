"""Bodies as files under one directory (the default: ``<data dir>/blobs``)."""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

from tuneplane.blobs.base import BlobMissing, BlobStoreUnavailable


class DirectoryStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.location = str(root)
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BlobStoreUnavailable(self.location, exc.strerror or str(exc)) from exc

    def _path(self, key: str) -> Path:
        # Keys are made by store/ from IDs and digests: never absolute, never "..".
        assert not key.startswith("/"), key
        assert ".." not in key.split("/"), key
        return self.root / key

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(temporary, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            # Whole or absent: a reader never sees half a body.
            os.replace(temporary, path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                temporary.unlink()
            raise BlobStoreUnavailable(self.location, exc.strerror or str(exc)) from exc

    def get(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError as exc:
            raise BlobMissing(key) from exc
        except OSError as exc:
            raise BlobStoreUnavailable(self.location, exc.strerror or str(exc)) from exc

    def delete(self, key: str) -> None:
        try:
            self._path(key).unlink(missing_ok=True)
        except OSError as exc:
            raise BlobStoreUnavailable(self.location, exc.strerror or str(exc)) from exc

    def ping(self) -> None:
        """Write and remove a probe file: permission bits alone say nothing of a full,
        read-only or vanished volume, nor of a superuser's writes."""
        probe = self.root / f".probe-{uuid.uuid4().hex}"
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            why = exc.strerror or str(exc)
            raise BlobStoreUnavailable(
                self.location, f"the directory is not writable ({why})"
            ) from exc
