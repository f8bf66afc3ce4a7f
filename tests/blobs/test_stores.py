"""The blob stores directly: a directory, and S3 through the real S3-compatible test
server (moto's standalone server process), each held to the one interface the rest of the
code uses (put, get, delete, ping)."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from tuneplane.blobs.base import BlobMissing, BlobStore, BlobStoreUnavailable, open_blob_store
from tuneplane.blobs.directory import DirectoryStore
from tuneplane.blobs.s3 import S3Store


@pytest.fixture(params=["directory", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BlobStore]:
    if request.param == "directory":
        yield open_blob_store(None, tmp_path)
    else:
        bucket = request.getfixturevalue("s3_bucket")
        yield open_blob_store(f"s3://{bucket}/bodies", tmp_path)


def test_a_body_is_read_back_replaced_and_deleted(store: BlobStore) -> None:
    key = "runs/7/trajectories/ab/abcdef"
    store.put(key, b'{"messages": []}')
    assert store.get(key) == b'{"messages": []}'
    store.put(key, b"\x00\xff second")
    assert store.get(key) == b"\x00\xff second"
    store.delete(key)
    with pytest.raises(BlobMissing):
        store.get(key)
    store.delete(key)  # a key that holds nothing is no error
    store.ping()


def test_a_key_never_written_is_missing_not_unavailable(store: BlobStore) -> None:
    with pytest.raises(BlobMissing):
        store.get("runs/1/never")


def test_the_url_chooses_the_store(tmp_path: Path, s3_bucket: str) -> None:
    default = open_blob_store(None, tmp_path)
    assert isinstance(default, DirectoryStore)
    assert default.location == str(tmp_path / "blobs")
    assert isinstance(open_blob_store(f"file://{tmp_path}/x", tmp_path), DirectoryStore)
    assert open_blob_store(str(tmp_path / "y"), tmp_path).location == str(tmp_path / "y")
    s3 = open_blob_store(f"s3://{s3_bucket}", tmp_path)
    assert isinstance(s3, S3Store)
    assert s3.location == f"s3://{s3_bucket}"
    with pytest.raises(ValueError, match="s3://bucket"):
        S3Store("s3:///prefix")


def test_a_directory_body_is_written_whole(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "blobs")
    store.put("a/b/c", b"x" * 100_000)
    assert (tmp_path / "blobs" / "a" / "b" / "c").read_bytes() == b"x" * 100_000
    # No temporary file is left beside it, nor a probe after a ping.
    store.ping()
    assert sorted(os.listdir(tmp_path / "blobs" / "a" / "b")) == ["c"]
    assert os.listdir(tmp_path / "blobs") == ["a"]


def test_a_directory_that_cannot_hold_bodies_is_unavailable(tmp_path: Path) -> None:
    occupied = tmp_path / "a-file"
    occupied.write_text("")
    with pytest.raises(BlobStoreUnavailable) as refused:
        DirectoryStore(occupied)
    assert refused.value.status == 503
    assert refused.value.where == str(occupied)
    store = DirectoryStore(tmp_path / "gone")
    shutil.rmtree(tmp_path / "gone")
    with pytest.raises(BlobStoreUnavailable, match="not writable"):
        store.ping()


def test_s3_prefixes_keep_stores_apart(s3_bucket: str) -> None:
    first, second = S3Store(f"s3://{s3_bucket}/one/"), S3Store(f"s3://{s3_bucket}/two")
    first.put("k", b"first")
    second.put("k", b"second")
    assert (first.get("k"), second.get("k")) == (b"first", b"second")
    keys = boto3.client("s3").list_objects_v2(Bucket=s3_bucket)["Contents"]
    assert sorted(item["Key"] for item in keys) == ["one/k", "two/k"]


def test_s3_without_its_bucket_is_unavailable_and_says_so(s3_bucket: str) -> None:
    missing = S3Store(f"s3://tp-missing-{uuid.uuid4().hex[:12]}")
    with pytest.raises(BlobStoreUnavailable, match="does not exist"):
        missing.ping()
    with pytest.raises(BlobStoreUnavailable) as refused:
        missing.put("k", b"body")
    assert refused.value.code == "blob_store_unavailable"
    with pytest.raises(BlobStoreUnavailable):
        missing.get("k")


def test_s3_that_does_not_answer_is_unavailable(
    s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.serving import free_port

    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    dead = S3Store(f"s3://{s3_bucket}")
    for call in (dead.ping, lambda: dead.put("k", b"x"), lambda: dead.get("k")):
        with pytest.raises(BlobStoreUnavailable):
            call()
