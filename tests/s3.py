"""A real S3-compatible server process for tests: moto's standalone server on loopback."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from tests.serving import free_port

#: What boto3 reads to reach it (moto accepts any credentials).
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "tuneplane-test",
    "AWS_SECRET_ACCESS_KEY": "tuneplane-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@contextmanager
def s3_server() -> Iterator[str]:
    """Start the server; yield its endpoint URL; stop it."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(endpoint + "/moto-api/", timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the S3 test server did not start") from None
                time.sleep(0.1)
        yield endpoint
    finally:
        process.terminate()
        process.wait(timeout=10)
