"""The outbound policy's pure part (contract/outbound.py): what an address is, what the
allow-list admits, and the verdict on a resolved name."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tuneplane.contract.outbound import (
    RULE,
    AllowList,
    address_kind,
    judge,
    parse_allow_list,
)

NOTHING = AllowList()
ipv4 = st.ip_addresses(v=4)
ipv6 = st.ip_addresses(v=6)
REFUSED_V4 = ["0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
              "172.16.0.0/12", "192.168.0.0/16", "224.0.0.0/4", "240.0.0.0/4"]  # fmt: skip
REFUSED_V6 = ["::/128", "::1/128", "fc00::/7", "fe80::/10", "ff00::/8"]


def ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(text)


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "a loopback address"),
        ("127.255.0.9", "a loopback address"),
        ("0.0.0.0", "an unspecified address"),  # noqa: S104
        ("0.1.2.3", "a reserved address"),
        ("10.1.2.3", "a private address"),
        ("172.31.255.255", "a private address"),
        ("192.168.0.1", "a private address"),
        ("100.64.0.1", "a carrier-grade NAT address"),
        ("169.254.169.254", "a link-local address"),  # cloud metadata services
        ("224.0.0.1", "a multicast address"),
        ("255.255.255.255", "a broadcast address"),
        ("240.0.0.1", "a reserved address"),
        ("192.0.2.7", "a special-purpose address"),
        ("::1", "a loopback address"),
        ("::", "an unspecified address"),
        ("fd12:3456::1", "a unique-local address"),
        ("fe80::1", "a link-local address"),
        ("ff02::1", "a multicast address"),
        ("::ffff:127.0.0.1", "a loopback address"),
        ("::ffff:10.0.0.1", "a private address"),
        ("::ffff:0:7f00:1", "a loopback address"),  # IPv4-translated
        ("64:ff9b::a9fe:a9fe", "a link-local address"),  # NAT64 of 169.254.169.254
        ("2002:c0a8:1::1", "a private address"),  # 6to4 of 192.168.0.1
        ("::7f00:1", "a reserved address"),  # IPv4-compatible
        ("2001:db8::1", "a special-purpose address"),
        ("4000::1", "a reserved address"),
        ("8.8.8.8", None),
        ("1.1.1.1", None),
        ("2606:4700:4700::1111", None),
        ("::ffff:8.8.8.8", None),
        ("2002:808:808::1", None),
    ],
)
def test_what_an_address_is(address: str, kind: str | None) -> None:
    assert address_kind(ip(address)) == kind


@given(ipv4)
def test_an_ipv4_address_and_its_ipv6_forms_are_judged_alike(
    address: ipaddress.IPv4Address,
) -> None:
    mapped = ip(f"::ffff:{address}")
    nat64 = ip(f"64:ff9b::{address}")
    assert address_kind(mapped) == address_kind(address)
    assert address_kind(nat64) == address_kind(address)


@given(st.one_of(ipv4, ipv6))
def test_nothing_python_calls_not_global_is_public(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> None:
    if address_kind(address) is None:
        assert address.is_global
        assert not address.is_multicast


@given(st.sampled_from(REFUSED_V4 + REFUSED_V6), st.data())
def test_every_address_of_a_refused_network_is_refused(network: str, data: st.DataObject) -> None:
    net = ipaddress.ip_network(network)
    offset = data.draw(st.integers(0, net.num_addresses - 1))
    assert address_kind(net[offset]) is not None


@given(st.sampled_from(REFUSED_V4), st.data())
def test_a_listed_network_admits_every_address_in_it_and_no_other(
    network: str, data: st.DataObject
) -> None:
    net = ipaddress.ip_network(network)
    allow = parse_allow_list(network)
    assert allow is not None
    inside = net[data.draw(st.integers(0, net.num_addresses - 1))]
    assert judge(str(inside), [inside], allow) is None
    assert judge("h.example", [ip(f"::ffff:{inside}")], allow) is None
    outside = data.draw(ipv4.filter(lambda a: a not in net and address_kind(a) is not None))
    assert judge(str(outside), [outside], allow) is not None


def test_a_name_is_refused_when_any_of_its_addresses_is() -> None:
    verdict = judge("Hooks.Example.", [ip("93.184.215.14"), ip("127.0.0.1")], NOTHING)
    assert verdict == f"hooks.example resolves to a loopback address; {RULE}"
    assert judge("hooks.example", [ip("93.184.215.14"), ip("2606:4700::1")], NOTHING) is None
    assert judge("hooks.example", [], NOTHING) == "hooks.example resolves to no address"


def test_odd_spellings_are_judged_by_what_they_resolve_to() -> None:
    # The resolver turns them into 127.0.0.1; the policy never takes a spelling's word.
    for spelled in ("2130706433", "127.1", "0x7f.1", "017700000001"):
        verdict = judge(spelled, [ip("127.0.0.1")], NOTHING)
        assert verdict == f"{spelled} resolves to a loopback address; {RULE}"
    assert judge("[::ffff:127.0.0.1]", [ip("::ffff:127.0.0.1")], NOTHING) == (
        f"::ffff:127.0.0.1 is a loopback address; {RULE}"
    )
    anywhere = "0.0.0.0"  # noqa: S104 (an address the test calls, not one it binds)
    assert (
        judge(anywhere, [ip(anywhere)], NOTHING) == f"{anywhere} is an unspecified address; {RULE}"
    )


def test_a_listed_host_name_is_admitted_whatever_it_resolves_to() -> None:
    allow = parse_allow_list("hooks.internal, 10.0.0.0/8")
    assert allow == AllowList((ipaddress.ip_network("10.0.0.0/8"),), frozenset({"hooks.internal"}))
    assert judge("HOOKS.internal.", [ip("127.0.0.1")], allow) is None
    assert judge("other.internal", [ip("127.0.0.1")], allow) is not None
    assert judge("other.internal", [ip("10.9.8.7")], allow) is None


@pytest.mark.parametrize(
    ("raw", "networks", "hosts"),
    [
        ("127.0.0.1", ["127.0.0.1/32"], []),
        ("[::1],fd00::/8", ["::1/128", "fd00::/8"], []),
        ("llm, Hooks.Internal.", [], ["llm", "hooks.internal"]),
        ("0.0.0.0/0,::/0", ["0.0.0.0/0", "::/0"], []),
    ],
)
def test_good_allow_lists(raw: str, networks: list[str], hosts: list[str]) -> None:
    parsed = parse_allow_list(raw)
    assert parsed is not None
    assert parsed.networks == tuple(ipaddress.ip_network(n) for n in networks)
    assert parsed.hosts == frozenset(hosts)


@pytest.mark.parametrize(
    "raw",
    ["10.0.0.1/8", "127.1", "2130706433", "0x7f.1", "a b", "x,,y", ",", "-bad.example",
     "bad-.example", "a..b", "*", "10.0.0.0/33", "http://hooks.internal", "x" * 64],
)  # fmt: skip
def test_bad_allow_lists_are_refused(raw: str) -> None:
    assert parse_allow_list(raw) is None
