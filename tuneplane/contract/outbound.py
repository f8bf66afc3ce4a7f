"""Where the server may call out (webhooks, the diagnosis language model): the outbound
policy's pure part. By default only public addresses: a URL an editor types must not reach
the server's own network (its database port, a cloud metadata service, the server itself).
The operator lists internal targets in ``TUNEPLANE_OUTBOUND_ALLOW``::

    TUNEPLANE_OUTBOUND_ALLOW=10.0.0.0/8,192.168.1.20,hooks.internal

A listed network or address admits the addresses in it; a listed host name is admitted
whatever it resolves to. Everything else is judged by the addresses its name resolves to,
every one of them (server/outbound.py resolves, judges, then connects to the very address it
judged, so a name that resolves differently the second time gets nowhere).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

ALLOW_VARIABLE: Final = "TUNEPLANE_OUTBOUND_ALLOW"
#: The rule a refused target breaks, as its error says it.
RULE: Final = f"outbound calls go to public addresses only unless {ALLOW_VARIABLE} lists it"
ALLOW_RULE: Final = (
    "must be networks such as 10.0.0.0/8, addresses or host names such as hooks.internal, "
    "comma-separated"
)
SPECIAL: Final = "a special-purpose address"

# The IANA special-purpose registries, by what an error calls them. Our own table rather
# than ``ipaddress``'s flags alone, whose answers changed between Python releases; those
# flags are still asked after it (anything they call not global is refused too).
_V4: Final[tuple[tuple[str, str], ...]] = (
    ("0.0.0.0/32", "an unspecified address"),
    ("0.0.0.0/8", "a reserved address"),  # "this network": Linux connects it to itself
    ("127.0.0.0/8", "a loopback address"),
    ("10.0.0.0/8", "a private address"),
    ("172.16.0.0/12", "a private address"),
    ("192.168.0.0/16", "a private address"),
    ("100.64.0.0/10", "a carrier-grade NAT address"),
    ("169.254.0.0/16", "a link-local address"),
    ("224.0.0.0/4", "a multicast address"),
    ("255.255.255.255/32", "a broadcast address"),
    ("240.0.0.0/4", "a reserved address"),
    ("192.0.0.0/24", SPECIAL),
    ("192.0.2.0/24", SPECIAL),
    ("192.88.99.0/24", SPECIAL),
    ("198.18.0.0/15", SPECIAL),
    ("198.51.100.0/24", SPECIAL),
    ("203.0.113.0/24", SPECIAL),
)
_V6: Final[tuple[tuple[str, str], ...]] = (
    ("::/128", "an unspecified address"),
    ("::1/128", "a loopback address"),
    ("fe80::/10", "a link-local address"),
    ("fec0::/10", "a site-local address"),
    ("fc00::/7", "a unique-local address"),
    ("ff00::/8", "a multicast address"),
    ("::/96", "a reserved address"),  # IPv4-compatible, long deprecated
    ("100::/64", SPECIAL),
    ("2001::/23", SPECIAL),  # Teredo and other protocol assignments
    ("2001:db8::/32", SPECIAL),
    ("64:ff9b:1::/48", SPECIAL),
)
_TABLE: Final = tuple((ipaddress.ip_network(network), kind) for network, kind in (*_V4, *_V6))
#: IPv6 forms that carry an IPv4 address the packets end up at: IPv4-mapped, IPv4-translated
#: and NAT64 (the last 32 bits), 6to4 (bits 16-48). Such an address is what its IPv4 is.
_MAPPED: Final = ipaddress.ip_network("::ffff:0:0/96")
_TRANSLATED: Final = ipaddress.ip_network("::ffff:0:0:0/96")
_NAT64: Final = ipaddress.ip_network("64:ff9b::/96")
_SIX_TO_FOUR: Final = ipaddress.ip_network("2002::/16")
_LABEL: Final = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)", re.ASCII)


def embedded_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for (``::ffff:127.0.0.1``: 127.0.0.1)."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address in _MAPPED or address in _TRANSLATED or address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _SIX_TO_FOUR:
        return address.sixtofour
    return None


def plain(address: Address) -> Address:
    """The address itself, or the IPv4 address its IPv6 form carries."""
    return embedded_ipv4(address) or address


def address_kind(address: Address) -> str | None:
    """None for a public address; else what it is (``a loopback address``, …).

    >>> address_kind(ipaddress.ip_address("::ffff:127.0.0.1"))
    'a loopback address'
    """
    address = plain(address)
    for network, kind in _TABLE:
        if address.version == network.version and address in network:
            return kind
    if address.is_multicast:
        return "a multicast address"
    if address.is_reserved:
        return "a reserved address"
    if not address.is_global:
        return SPECIAL
    return None


def normal_host(host: str) -> str:
    """A URL's host as the policy compares it: lower case, no brackets, no trailing dot."""
    return host.strip("[]").rstrip(".").lower()


def literal(host: str) -> Address | None:
    """The address a host is written as, in its one canonical spelling only (``127.1`` and
    ``2130706433`` are names to this, which the resolver then turns into addresses)."""
    try:
        return ipaddress.ip_address(normal_host(host))
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class AllowList:
    """The operator's internal targets: networks (single addresses as /32 or /128) and
    host names. Empty: public addresses only."""

    networks: tuple[Network, ...] = ()
    hosts: frozenset[str] = frozenset()

    def allows_host(self, host: str) -> bool:
        return normal_host(host) in self.hosts

    def allows(self, address: Address) -> bool:
        forms = {address, plain(address)}
        return any(
            form.version == network.version and form in network
            for form in forms
            for network in self.networks
        )


#: The default: no internal target, public addresses only.
PUBLIC_ONLY: Final = AllowList()


def _entry(raw: str) -> Network | str | None:
    text = raw.strip()
    try:
        return ipaddress.ip_network(text.strip("[]") if "/" not in text else text)
    except ValueError:
        pass
    name = text.rstrip(".").lower()
    labels = name.split(".")
    # A last label of digits (or 0x…) is how ``127.1`` and ``0x7f.1`` look: resolvers read
    # those as addresses, so they are refused here rather than listed as names.
    if (
        len(name) > 253
        or not all(_LABEL.fullmatch(label) for label in labels)
        or labels[-1].isdigit()
        or re.fullmatch(r"0x[0-9a-f]*", labels[-1])
    ):
        return None
    return name


def parse_allow_list(raw: str) -> AllowList | None:
    """``10.0.0.0/8,hooks.internal`` as an :class:`AllowList`; None when an entry is
    neither a network (host bits clear), an address nor a host name."""
    entries = [_entry(part) for part in raw.split(",")]
    if not entries or any(entry is None for entry in entries):
        return None
    networks = tuple(entry for entry in entries if isinstance(entry, Network))
    hosts = frozenset(entry for entry in entries if isinstance(entry, str))
    return AllowList(networks, hosts)


def judge(host: str, addresses: Iterable[Address], allow: AllowList) -> str | None:
    """None when a call to ``host``, resolved to ``addresses``, may go; else why not, as
    an error says it (``127.1 resolves to a loopback address; outbound calls go to …``).
    Every address must pass: a name that also resolves to one refused address is refused.
    """
    if allow.allows_host(host):
        return None
    found = list(addresses)
    shown = normal_host(host)
    if not found:
        return f"{shown} resolves to no address"
    verb = "is" if literal(host) is not None else "resolves to"
    for address in found:
        kind = address_kind(address)
        if kind is not None and not allow.allows(address):
            return f"{shown} {verb} {kind}; {RULE}"
    return None


__all__ = [
    "ALLOW_RULE",
    "PUBLIC_ONLY",
    "RULE",
    "Address",
    "AllowList",
    "address_kind",
    "embedded_ipv4",
    "judge",
    "literal",
    "normal_host",
    "parse_allow_list",
    "plain",
]
