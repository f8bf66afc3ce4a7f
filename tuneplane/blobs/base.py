"""What every blob store does, and choosing one from its URL."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Protocol

from tuneplane.contract.errors import Unavailable


class BlobStoreUnavailable(Unavailable):
    """The blob store did not answer or refused: a 503 that names it, never a 500."""

    code = "blob_store_unavailable"
    retry_after: ClassVar[int] = 5

    def __init__(self, where: str, detail: str) -> None:
        super().__init__(f"blob store unavailable ({where}): {detail}; retry later")
        self.where = where
        self.detail = detail


class BlobMissing(LookupError):
    """No body under that key (deleted, or never written)."""


class BlobStore(Protocol):
    #: Where bodies go, as people read it (``s3://bucket/prefix``, a directory).
    location: str

    def put(self, key: str, data: bytes) -> None: ...

    def get(self, key: str) -> bytes: ...

    def delete(self, key: str) -> None:
        """Remove the body; a key that holds none is not an error."""
        ...

    def ping(self) -> None:
        """Raise :class:`BlobStoreUnavailable` unless the store would take a body now."""
        ...


def open_blob_store(url: str | None, data_dir: Path) -> BlobStore:
    """``s3://bucket/prefix`` (endpoint and credentials from the usual ``AWS_*`` variables),
    else a directory: ``url`` as a path, by default ``<data dir>/blobs``."""
    if url is not None and url.startswith("s3://"):
        from tuneplane.blobs.s3 import S3Store  # boto3 is needed only here

        return S3Store(url)
    from tuneplane.blobs.directory import DirectoryStore

    root = Path(url.removeprefix("file://")) if url else data_dir / "blobs"
    return DirectoryStore(root)
