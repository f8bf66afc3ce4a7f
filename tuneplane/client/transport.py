"""HTTP to the tuneplane server: one keep-alive ``httpx.Client``, JSON bodies, bounded
retries with exponential backoff.

A request ends in one of three ways, told apart by :class:`Outcome`: delivered (2xx),
rejected (a 4xx other than 408/425/429: retrying cannot help), or failed (transport errors
and 5xx, after every retry). The credential is sent as ``Authorization: Bearer`` and never
appears in a message, a repr or a log line.
"""

from __future__ import annotations

import contextlib
import random
import ssl
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import httpx
import orjson

from tuneplane.contract.version import __version__

#: Statuses worth retrying besides 5xx: the request was fine, the server was busy.
_RETRYABLE: Final = frozenset({408, 425, 429})
_JSON_HEADERS: Final = {"Content-Type": "application/json"}
#: The server's code for a token whose execution attempt a newer one has superseded: it
#: will never write again, so nothing more is sent with it.
SUPERSEDED: Final = "attempt_superseded"

#: Seconds the first attempt may take even when the deadline is closer than that.
_FIRST_ATTEMPT_MIN_TIMEOUT: Final = 1.0
#: Why something was not sent when time ran out before its first attempt.
OUT_OF_TIME: Final = "not sent in time"
#: Why something was not sent when the server could not be reached.
UNREACHABLE: Final = "server unreachable"

#: A callable answering the monotonic time after which no more attempts are made.
DeadlineFn = Callable[[], float | None]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``attempts`` tries in all; the pause after failure n is ``first_delay * 2**(n-1)``,
    at most ``max_delay``, with up to 25 % random jitter so workers do not retry in step."""

    attempts: int = 6
    first_delay: float = 0.25
    max_delay: float = 8.0

    def delay(self, failures: int) -> float:
        base: float = min(self.max_delay, self.first_delay * 2.0 ** (failures - 1))
        return base * (1.0 + 0.25 * random.random())  # noqa: S311 - jitter, not security


#: One try and no pause: heartbeats, and quick probes.
NO_RETRY: Final = RetryPolicy(attempts=1)


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a request ended. ``reason`` is a short phrase for summaries ("server
    unreachable", "rejected by server (422 invalid)"); ``detail`` says more for a log."""

    delivered: bool
    status: int | None = None
    body: Any = None
    reason: str = ""
    detail: str = ""

    @property
    def rejected(self) -> bool:
        """The server refused the request itself: retrying cannot help."""
        return not self.delivered and self.status is not None and _final_refusal(self.status)


def _final_refusal(status: int) -> bool:
    return 400 <= status < 500 and status not in _RETRYABLE


def _json(response: httpx.Response) -> Any:
    """The answer's JSON (a refusal says what it refused), or None."""
    try:
        return response.json()
    except ValueError:
        return None


def _error_summary(response: httpx.Response) -> tuple[str, str]:
    """``(code, message)`` from the server's one JSON error shape, tolerating others."""
    try:
        error = response.json().get("error", {})
        return str(error.get("code", "")), str(error.get("message", ""))
    except (ValueError, AttributeError):
        return "", response.text[:200]


class Transport:
    """POSTs JSON to one server as one credential. Thread-safe: the sender thread and the
    caller of a strict method may use it at once.

    ``transport`` is handed to ``httpx.Client``: pass ``httpx.MockTransport`` or a
    transport of your own to route requests elsewhere (tests, proxies).
    """

    def __init__(
        self,
        base_url: str,
        credential: str,
        *,
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._timeout = timeout
        self._superseded: Outcome | None = None
        self._superseded_lock = threading.Lock()
        self._credential = credential
        self._custom = transport
        # Built on first use, on the thread that sends: an httpx.Client costs 30-60 ms (its
        # SSL context), which the first report() on the training thread must not pay.
        self._client: httpx.Client | None = None
        self._client_lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return f"Transport({self.base_url!r})"

    def _http(self) -> httpx.Client:
        client = self._client
        if client is not None:
            return client
        with self._client_lock:
            if self._closed:
                raise RuntimeError(f"{self!r} is closed")
            if self._client is None:
                self._client = httpx.Client(
                    verify=_tls_context(self.base_url),
                    base_url=self.base_url,
                    headers={
                        "Authorization": f"Bearer {self._credential}",
                        "User-Agent": f"tuneplane-sdk/{__version__}",
                    },
                    timeout=httpx.Timeout(self._timeout, connect=min(self._timeout, 5.0)),
                    transport=self._custom,
                    limits=httpx.Limits(max_connections=4, max_keepalive_connections=4),
                )
            return self._client

    def warm(self) -> None:
        """Build the HTTP client now (the sender thread does, as it starts)."""
        self._http()

    def close(self) -> None:
        with self._client_lock:
            self._closed = True
            if self._client is not None:
                self._client.close()

    @property
    def superseded(self) -> bool:
        """A newer execution attempt has started: this credential sends nothing more."""
        return self._superseded is not None

    def post(
        self,
        path: str,
        body: object,
        *,
        retry: RetryPolicy,
        deadline: DeadlineFn | None = None,
        interrupt: threading.Event | None = None,
        on_failed_attempt: Callable[[], None] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Outcome:
        """POST ``body`` as JSON until it is delivered, rejected, or ``retry`` runs out.

        ``on_failed_attempt`` is called for every attempt that did not deliver.
        ``deadline()`` is read before every retry and pause, so a deadline set while this
        call waits (``close()``) still applies; the first attempt is made in any case.
        ``interrupt`` cuts a pause short so that the deadline is read at once.
        ``headers`` are sent with every attempt (an ``Idempotency-Key``, say).
        """
        # orjson, not json: the standard encoder holds the GIL for ~2.4 ms on a 2,048-point
        # batch (float repr), long enough to stall the training thread; orjson takes 0.1 ms.
        if self._superseded is not None:
            return self._superseded
        content = orjson.dumps(body)
        failures = 0
        last: Outcome | None = None
        while True:
            timeout = self._timeout
            limit = deadline() if deadline is not None else None
            if limit is not None:
                remaining = limit - time.monotonic()
                if remaining <= 0 and last is not None:
                    return last
                # The first attempt is always made, with a short timeout at least.
                timeout = min(timeout, max(remaining, _FIRST_ATTEMPT_MIN_TIMEOUT))
            outcome = last = self._attempt(path, content, timeout, headers)
            if outcome.delivered:
                return outcome
            if on_failed_attempt is not None:
                on_failed_attempt()
            if outcome.rejected:
                return outcome
            failures += 1
            if failures >= retry.attempts:
                return outcome
            self._pause(retry.delay(failures), deadline, interrupt)

    def get(self, path: str, *, retry: RetryPolicy) -> Outcome:
        """GET ``path`` (a JSON answer) until it is delivered, rejected, or ``retry`` runs out."""
        failures = 0
        while True:
            outcome = self._attempt(path, None, self._timeout, None)
            if outcome.delivered or outcome.rejected:
                return outcome
            failures += 1
            if failures >= retry.attempts:
                return outcome
            time.sleep(retry.delay(failures))

    def _attempt(
        self, path: str, content: bytes | None, timeout: float, headers: Mapping[str, str] | None
    ) -> Outcome:
        """One request: a POST of ``content``, or a GET when it is None."""
        try:
            if content is None:
                response = self._http().get(path, timeout=timeout)
            else:
                response = self._http().post(
                    path,
                    content=content,
                    headers=_JSON_HEADERS if headers is None else {**_JSON_HEADERS, **headers},
                    timeout=timeout,
                )
        except httpx.TransportError as exc:
            return Outcome(False, reason=UNREACHABLE, detail=_describe(exc))
        status = response.status_code
        if 200 <= status < 300:
            try:
                answer = response.json() if response.content else None
            except ValueError:
                answer = None
            return Outcome(True, status, answer)
        code, message = _error_summary(response)
        if _final_refusal(status):
            label = f"{status} {code}".strip()
            outcome = Outcome(
                False, status, _json(response), reason=f"rejected by server ({label})",
                detail=message,
            )  # fmt: skip
            if status == 409 and code == SUPERSEDED:
                self._stop_sending(outcome)
            return outcome
        return Outcome(False, status, reason=f"server error ({status})", detail=message)

    def _stop_sending(self, outcome: Outcome) -> None:
        """Say once, on stderr, why nothing more is sent; every later request is refused
        here at once instead of being retried against the server."""
        with self._superseded_lock:
            if self._superseded is not None:
                return
            self._superseded = outcome
        with contextlib.suppress(OSError, ValueError):
            print(
                f"tuneplane: stopped sending to {self.base_url}: {outcome.detail}",
                file=sys.stderr,
                flush=True,
            )

    @staticmethod
    def _pause(
        seconds: float, deadline: DeadlineFn | None, interrupt: threading.Event | None
    ) -> None:
        end = time.monotonic() + seconds
        if interrupt is None:
            time.sleep(seconds)
            return
        if interrupt.wait(seconds):
            # Interrupted: a deadline has just been set; sleep no longer than it allows.
            limit = deadline() if deadline is not None else None
            if limit is not None:
                end = min(end, limit)
            time.sleep(max(0.0, end - time.monotonic()))


def _tls_context(base_url: str) -> ssl.SSLContext | bool:
    """Loading the CA bundle holds the GIL for 30-90 ms, stalling the training thread even
    when the sender thread does it. A plain ``http://`` server needs none: its client gets
    a context that trusts nothing, so a TLS connection it might still be sent to (a proxy)
    fails closed instead of going unverified."""
    if base_url.startswith("http://"):
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return True


def _describe(exc: httpx.TransportError) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"
