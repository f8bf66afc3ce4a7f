"""A real nginx (Debian's package) in front of a real server, for the reverse-proxy tests:
a configuration of its own on loopback, no root privileges, nothing of the system's."""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.serving import free_port

NGINX = "/usr/sbin/nginx"

#: The location block docs/deploy.md shows, with the upstream and prefix filled in.
#: ``strip``: ``proxy_pass http://up/;`` takes the prefix off (the usual way), without the
#: trailing slash nginx forwards the path as it came.
LOCATION = """
        location {prefix}/ {{
            proxy_pass http://{upstream}{slash};
            proxy_http_version 1.1;
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            # Live streams (Server-Sent Events) must reach the browser as they are written.
            proxy_buffering off;
            proxy_read_timeout 1h;
            client_max_body_size 64m;
        }}
"""

CONFIG = """
daemon off;
master_process off;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log {root}/access.log;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    server {{
        listen 127.0.0.1:{port};
{locations}
    }}
}}
"""


@dataclass(frozen=True)
class Proxy:
    """nginx's address (``http://127.0.0.1:PORT``) and its access log."""

    origin: str
    access_log: Path

    def requested(self) -> list[str]:
        """The request lines nginx received, in order (``GET /tp/ HTTP/1.1``)."""
        if not self.access_log.exists():
            return []
        return [line.split('"')[1] for line in self.access_log.read_text().splitlines()]


#: A proxy that holds event streams back whatever the server asks (X-Accel-Buffering):
#: it buffers them and compresses them, so small events wait for more.
BUFFERING = """
            proxy_buffering on;
            proxy_ignore_headers X-Accel-Buffering;
            gzip on;
            gzip_types text/event-stream;
            gzip_min_length 1;
"""


def nginx_config(
    root: Path, port: int, upstream: str, prefix: str, *, strip: bool, buffering: bool = False
) -> str:
    location = LOCATION.format(prefix=prefix, upstream=upstream, slash="/" if strip else "")
    if buffering:
        location = location.replace("            proxy_buffering off;\n", BUFFERING)
    return CONFIG.format(root=root, port=port, locations=location)


@contextmanager
def running_nginx(
    upstream: str, prefix: str, root: Path, *, strip: bool = True, buffering: bool = False
) -> Iterator[Proxy]:
    """nginx on a free loopback port, proxying ``prefix/`` to ``upstream`` (host:port);
    ``buffering``: holding responses back as a misconfigured proxy does."""
    if not Path(NGINX).exists():
        pytest.fail(f"{NGINX} is missing: apt-get install nginx (scripts/test does it)")
    root.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = root / "nginx.conf"
    config.write_text(nginx_config(root, port, upstream, prefix, strip=strip, buffering=buffering))
    shutil.copy("/etc/nginx/mime.types", root / "mime.types")
    process = subprocess.Popen(
        [NGINX, "-c", str(config), "-p", str(root), "-e", str(root / "error.log")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    origin = f"http://127.0.0.1:{port}"
    try:
        _wait_until_answering(process, f"{origin}{prefix}/healthz", root)
        yield Proxy(origin, root / "access.log")
    finally:
        process.send_signal(signal.SIGQUIT)  # nginx's graceful stop
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_until_answering(process: subprocess.Popen[bytes], url: str, root: Path) -> None:
    deadline = time.monotonic() + 15
    while True:
        if process.poll() is not None:
            log = root / "error.log"
            raise AssertionError(f"nginx exited: {log.read_text() if log.exists() else ''}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"nginx did not answer {url} within 15 s")
        time.sleep(0.1)
