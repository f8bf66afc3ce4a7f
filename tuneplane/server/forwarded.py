"""Which address a request came from, as the per-address sign-in limit counts it.

A request's address is its connection's, whatever its headers say: anyone can send
``X-Forwarded-For``, so believing it would let one client pose as any number of addresses.
Only when the connection comes from a trusted proxy (``TUNEPLANE_TRUSTED_PROXIES``) does
the header count, and then the client is the right-most address in its chain that is not
itself a trusted proxy: each proxy appends the address it was reached from, so everything
left of the last trusted hop was written by the client and proves nothing.

``tuneplane serve`` has uvicorn apply the same rule before the app sees the request (for
``X-Forwarded-Proto`` too); the app applies it again so that it holds however the app is
served, and once uvicorn has put the client in the connection's place this answers it as is.
"""

from __future__ import annotations

import ipaddress
from typing import Final

from starlette.requests import HTTPConnection

from tuneplane.server.settings import ProxyNetwork

#: Longer than any address: what a proxy forwarded that is no address is cut to this.
_ADDRESS_MAX: Final = 64


def client_address(request: HTTPConnection, trusted: tuple[ProxyNetwork, ...]) -> str:
    """The address a request came from::

    client_address(request, (ip_network("127.0.0.1"),))  # "203.0.113.7" behind nginx
    """
    peer = request.client.host if request.client else "unknown"
    if not _is_trusted(peer, trusted):
        return peer
    chain = [
        hop.strip()
        for value in request.headers.getlist("x-forwarded-for")
        for hop in value.split(",")
        if hop.strip()
    ]
    for hop in reversed(chain):
        if not _is_trusted(hop, trusted):
            return _host(hop)[:_ADDRESS_MAX]
    # Every hop is a proxy of ours: the left-most one is as far back as anyone can tell.
    return _host(chain[0])[:_ADDRESS_MAX] if chain else peer


def _is_trusted(hop: str, trusted: tuple[ProxyNetwork, ...]) -> bool:
    try:
        address = ipaddress.ip_address(_host(hop))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # a dual-stack socket's name for an IPv4 peer
    return any(address in network for network in trusted)


def _host(hop: str) -> str:
    """A hop without the port some proxies add (``1.2.3.4:5678``, ``[2001:db8::1]:443``)."""
    if hop.startswith("["):
        return hop[1:].partition("]")[0]
    if hop.count(":") == 1:
        return hop.partition(":")[0]
    return hop
