"""One request in flight while the next batch is built, on the sender's own thread.

The sender builds a columnar batch in Python while, between two requests, the server parses
and stores the previous one. With httpx a request is sent and answered in one call, so the
two take turns. Here the request is written first (``begin``), the next batch is built, and
only then is the answer read (``finish``): the server's work and the builder's overlap.

Only for plain ``http://`` servers reached directly (no proxy from the environment, no
custom httpx transport); everything else goes through :class:`~.transport.Transport`. A
request whose answer does not come back cleanly is handed back to the caller, which sends
it again through the retrying transport: the server takes a batch sent twice as the same
points.
"""

from __future__ import annotations

import http.client
import urllib.request
from typing import Final
from urllib.parse import urlsplit

import orjson

from tuneplane.contract.version import __version__

_STATUS_OK: Final = range(200, 300)


class Pipeline:
    """A keep-alive HTTP/1.1 connection with at most one request awaiting its answer."""

    def __init__(self, host: str, port: int, credential: str, timeout: float) -> None:
        self._host, self._port, self._timeout = host, port, timeout
        self._headers = {
            "Authorization": f"Bearer {credential}",
            "User-Agent": f"tuneplane-sdk/{__version__}",
            "Content-Type": "application/json",
        }
        self._connection: http.client.HTTPConnection | None = None
        self._waiting = False

    def __repr__(self) -> str:
        return f"Pipeline({self._host}:{self._port})"

    @classmethod
    def for_server(cls, base_url: str, credential: str, timeout: float) -> Pipeline | None:
        """A pipeline to ``base_url``, or None where it cannot be used."""
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname or parts.path.strip("/"):
            return None
        if urllib.request.getproxies_environment() and not urllib.request.proxy_bypass(
            parts.hostname
        ):
            return None
        return cls(parts.hostname, parts.port or 80, credential, timeout)

    def begin(self, path: str, body: object) -> bool:
        """Write a POST of ``body`` as JSON; False (and nothing pending) when it failed."""
        assert not self._waiting, "finish() the request in flight first"
        try:
            if self._connection is None:
                self._connection = http.client.HTTPConnection(
                    self._host, self._port, timeout=self._timeout
                )
            self._connection.request("POST", path, orjson.dumps(body), self._headers)
        except (OSError, http.client.HTTPException):
            self.close()
            return False
        self._waiting = True
        return True

    def finish(self) -> bool:
        """Read the answer of the request in flight; True when it was a 2xx."""
        assert self._waiting, "no request in flight"
        self._waiting = False
        assert self._connection is not None
        try:
            response = self._connection.getresponse()
            response.read()
        except (OSError, http.client.HTTPException):
            self.close()
            return False
        if response.will_close:
            self.close()
        return response.status in _STATUS_OK

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        self._waiting = False
