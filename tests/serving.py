"""Start real ``tuneplane serve`` processes for tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

#: Seconds a server process has to answer /healthz: generous, as a loaded machine (a
#: parallel suite, a browser) can take tens of seconds to import and migrate.
START_TIMEOUT = 90.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def serve_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "tuneplane.cli", "serve", *args]


@contextmanager
def running_server(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    output: Path | None = None,
) -> Iterator[str]:
    """A real server process; yields its base URL and stops it afterwards. ``output``: a
    file that receives what the server prints (its log), to read once it has stopped."""
    port = free_port()
    log = output.open("w") if output is not None else None
    process = subprocess.Popen(
        serve_command("--port", str(port), *args),
        env={**os.environ, **(env or {})},
        cwd=cwd,
        stdout=log or subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                printed = process.stdout.read() if process.stdout else ""
                if output is not None:
                    printed = output.read_text()
                raise AssertionError(f"server exited with {process.returncode}:\n{printed}")
            try:
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"server did not start within {START_TIMEOUT:.0f} s")
            time.sleep(0.1)
        yield base
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout:
            process.stdout.close()
        if log is not None:
            log.close()
