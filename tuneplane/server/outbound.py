"""Outbound calls by policy (docs/configuration.md#outbound-calls): the HTTP client that
webhooks and the diagnosis language model are called with. What may be called is decided
in contract/outbound.py; here names are resolved and connections made.

The check sits where the connection is made, in httpcore's network backend: the name is
resolved once, every address it resolves to is judged, and the socket goes to an address
that was judged, never to a second resolution (which a name with a short TTL could point
elsewhere: DNS rebinding). The Host header and TLS's server name stay the URL's name, as
httpcore takes them from the URL, not from the socket. Redirects are never followed, and
proxies from the environment are not used (the policy could not see the target).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from typing import Final

import anyio
import httpcore
import httpx
from starlette.concurrency import run_in_threadpool

from tuneplane.contract.outbound import Address, AllowList, judge, literal, normal_host

#: The world's name resolution: (host, port) to the addresses it resolves to. Tests stand
#: in for the world's DNS with their own; the server asks the system's.
Resolve = Callable[[str, int], list[str]]
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


class Refused(Exception):
    """A call the outbound policy does not allow; the message says which rule."""


def system_resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to, as the system resolver answers (which also
    reads odd spellings of addresses, ``127.1`` or ``2130706433``, as the address)."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in found))


class OutboundPolicy:
    """Who the server may call: public addresses, and what ``allow`` lists."""

    def __init__(self, allow: AllowList, resolve: Resolve = system_resolve) -> None:
        self.allow = allow
        self.resolve = resolve

    async def addresses(self, host: str, port: int) -> list[Address] | None:
        """The judged addresses to connect to, or None for a host name the allow-list
        names (connect to it by name). :class:`Refused` when the policy says no;
        ``OSError`` when the name does not resolve."""
        if self.allow.allows_host(host):
            return None
        written = literal(host)
        if written is not None:
            found: Iterable[str] = [str(written)]
        else:
            found = await run_in_threadpool(self.resolve, normal_host(host), port)
        addresses = list(dict.fromkeys(ipaddress.ip_address(a) for a in found))
        why = judge(host, addresses, self.allow)
        if why is not None:
            raise Refused(why)
        return addresses

    async def problem_with(self, url: str) -> str | None:
        """Why a call to ``url`` would be refused now (None: it would go), checked when
        the URL is given, so the person who gives it hears at once."""
        try:
            parsed = httpx.URL(url)
            host = parsed.raw_host.decode("ascii")
            port = parsed.port or _DEFAULT_PORTS[parsed.scheme]
        except (httpx.InvalidURL, KeyError, UnicodeDecodeError):
            return "must be an http:// or https:// URL the server can call"
        try:
            await self.addresses(host, port)
        except Refused as exc:
            return str(exc)
        except (OSError, ValueError):
            return f"{normal_host(host)} does not resolve"
        return None

    def client(self, timeout: float) -> httpx.AsyncClient:
        """An HTTP client whose every connection obeys the policy; redirects are answers."""
        transport = httpx.AsyncHTTPTransport()
        # httpx's transport takes no network backend of its own; the httpcore pool it
        # sends through does, so the pool is made here with ours.
        transport._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            network_backend=_PolicyBackend(self),
        )
        return httpx.AsyncClient(
            transport=transport, timeout=timeout, follow_redirects=False, trust_env=False
        )


class _PolicyBackend(httpcore.AsyncNetworkBackend):
    """httpcore's own backend, connecting only to addresses the policy judged."""

    def __init__(self, policy: OutboundPolicy) -> None:
        self._policy = policy
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            with anyio.fail_after(timeout):
                addresses = await self._policy.addresses(host, port)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"{host} did not resolve in time") from exc
        except (OSError, ValueError) as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        if addresses is None:  # a host name the operator listed
            return await self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None  # judge() refuses a name with no address
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("outbound calls go over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


__all__ = ["OutboundPolicy", "Refused", "Resolve", "system_resolve"]
