"""Bodies in an S3-compatible store, through boto3. ``s3://bucket/prefix``; boto3 reads
the endpoint (``AWS_ENDPOINT_URL``), region and credentials from the usual variables."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from tuneplane.blobs.base import BlobMissing, BlobStoreUnavailable

#: A dead endpoint must answer 503 within seconds, not hang a request for minutes.
_CONFIG = Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 3})


def _reason(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code', 'error')}: {error.get('Message', '')}".rstrip(": ")
    return type(exc).__name__


class S3Store:
    def __init__(self, url: str) -> None:
        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        if not bucket:
            raise ValueError(f"{url!r}: an S3 blob URL is s3://bucket or s3://bucket/prefix")
        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.location = url
        self._client: Any = boto3.client("s3", config=_CONFIG)

    def put(self, key: str, data: bytes) -> None:
        try:
            self._client.put_object(Bucket=self.bucket, Key=self.prefix + key, Body=data)
        except (BotoCoreError, ClientError) as exc:
            raise BlobStoreUnavailable(self.location, _reason(exc)) from exc

    def get(self, key: str) -> bytes:
        try:
            answer = self._client.get_object(Bucket=self.bucket, Key=self.prefix + key)
            body: bytes = answer["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise BlobMissing(key) from exc
            raise BlobStoreUnavailable(self.location, _reason(exc)) from exc
        except BotoCoreError as exc:
            raise BlobStoreUnavailable(self.location, _reason(exc)) from exc
        return body

    def delete(self, key: str) -> None:
        try:
            self._client.delete_object(Bucket=self.bucket, Key=self.prefix + key)
        except (BotoCoreError, ClientError) as exc:
            raise BlobStoreUnavailable(self.location, _reason(exc)) from exc

    def ping(self) -> None:
        try:
            self._client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            # HEAD answers have no body: a missing bucket is only its status, 404.
            code = exc.response.get("Error", {}).get("Code")
            why = (
                f"the bucket {self.bucket!r} does not exist"
                if code in ("404", "NoSuchBucket")
                else _reason(exc)
            )
            raise BlobStoreUnavailable(self.location, why) from exc
        except BotoCoreError as exc:
            raise BlobStoreUnavailable(self.location, _reason(exc)) from exc
