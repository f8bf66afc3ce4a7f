"""Object storage for trajectory bodies: a directory, or an S3-compatible store. No SQL:
``store/`` writes a body's index row only after a store here has the body."""

from tuneplane.blobs.base import BlobMissing, BlobStore, BlobStoreUnavailable, open_blob_store

__all__ = ["BlobMissing", "BlobStore", "BlobStoreUnavailable", "open_blob_store"]
