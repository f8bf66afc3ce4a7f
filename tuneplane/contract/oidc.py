"""Single sign-on's rules: who the allow-list admits, what login a new account gets, where
the browser may be sent afterwards. Pure functions over an ID token's claims.

An account at the provider is admitted when its verified e-mail's domain is on the domain
list, or one of its organisations (the configured claim) is on the organisation list; a
list of exactly ``*`` admits everyone the provider signs in::

    >>> policy = AllowList(domains=frozenset({"example.com"}), orgs=frozenset())
    >>> admits(policy, {"email": "ada@example.com", "email_verified": True}, "groups")
    True
    >>> admits(policy, {"email": "ada@example.com"}, "groups")  # not said to be verified
    False
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

#: Seconds a sign-in may take at the provider before its flow cookie is void.
FLOW_SECONDS: Final = 600
#: The list that admits everyone the provider signs in.
EVERYONE: Final = "*"
#: What a login made from a claim keeps (a login is also a path segment: no ``/``).
LOGIN_MAX: Final = 128
_LOGIN_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._@+-]+", re.ASCII)
_DOMAIN: Final = re.compile(
    r"(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}", re.ASCII
)
_ORG: Final = re.compile(r"[!-+\--~]{1,255}", re.ASCII)  # printable ASCII without space or comma
_LOOPBACK: Final = frozenset({"localhost", "127.0.0.1", "::1"})


@dataclass(frozen=True, slots=True)
class AllowList:
    """E-mail domains and organisations whose accounts may sign in (``*``: any)."""

    domains: frozenset[str]
    orgs: frozenset[str]

    @property
    def empty(self) -> bool:
        return not self.domains and not self.orgs


def _items(raw: str, pattern: re.Pattern[str], lower: bool) -> frozenset[str] | None:
    items = [item.strip() for item in raw.split(",")]
    if items == [EVERYONE]:
        return frozenset(items)
    if lower:
        items = [item.lower() for item in items]
    if EVERYONE in items or not all(pattern.fullmatch(item) for item in items):
        return None
    return frozenset(items)


def parse_domains(raw: str) -> frozenset[str] | None:
    """``example.com, lab.example.org`` (or ``*``); None when an item is not a domain."""
    return _items(raw, _DOMAIN, lower=True)


def parse_orgs(raw: str) -> frozenset[str] | None:
    """``research,/platform`` (or ``*``); None when an item is empty or holds a space."""
    return _items(raw, _ORG, lower=False)


def parse_issuer(raw: str) -> str | None:
    """An https URL, or http on a loopback address (a provider on this machine); without
    query, fragment or trailing slash (the issuer is compared exactly)."""
    try:
        parts = urlsplit(raw)
        parts.port  # noqa: B018 (raises ValueError when the port is not a number)
    except ValueError:
        return None
    if not parts.hostname or parts.query or parts.fragment or parts.username:
        return None
    if parts.scheme == "http" and parts.hostname in _LOOPBACK:
        return raw.rstrip("/")
    return raw.rstrip("/") if parts.scheme == "https" else None


def verified_email(claims: Mapping[str, object]) -> str | None:
    """The e-mail, when the provider says it verified it (``email_verified`` true)."""
    email = claims.get("email")
    if not isinstance(email, str) or "@" not in email or claims.get("email_verified") is not True:
        return None
    return email


def organisations(claims: Mapping[str, object], claim: str) -> frozenset[str]:
    """The names in ``claim``: strings (Keycloak's ``groups``), or objects naming one by
    ``preferred_username`` or ``sub`` (Hugging Face's ``orgs``)."""
    value = claims.get(claim)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return frozenset()
    names: set[str] = set()
    for item in value:
        if isinstance(item, str):
            names.add(item)
        elif isinstance(item, dict):
            names.update(
                v for k in ("preferred_username", "sub") if isinstance(v := item.get(k), str)
            )
    return frozenset(names)


def admits(policy: AllowList, claims: Mapping[str, object], org_claim: str) -> bool:
    """Whether the allow-list admits the account these claims describe."""
    if EVERYONE in policy.domains or EVERYONE in policy.orgs:
        return True
    email = verified_email(claims)
    if email is not None and email.rpartition("@")[2].lower() in policy.domains:
        return True
    return not policy.orgs.isdisjoint(organisations(claims, org_claim))


def login_candidates(claims: Mapping[str, object]) -> Iterator[str]:
    """Logins for a new account, best first: the verified e-mail, else the provider's user
    name, else one made from the subject; then the same with ``-2``, ``-3``… (a login is
    unique; the account is found again by issuer and subject, never by login)."""
    base = ""
    for candidate in (verified_email(claims), claims.get("preferred_username")):
        if isinstance(candidate, str):
            base = _LOGIN_UNSAFE.sub("-", candidate).strip("-.")[:LOGIN_MAX]
            if base:
                break
    if not base:
        digest = hashlib.sha256(str(claims.get("sub", "")).encode()).hexdigest()[:12]
        base = f"sso-{digest}"
    yield base
    for number in range(2, 100):
        yield f"{base[: LOGIN_MAX - 4]}-{number}"


def safe_next(raw: str | None) -> str:
    """Where to go after signing in: a path on this server, never another site (``//host``
    and ``/\\host`` are other sites to a browser)."""
    if not raw or not raw.startswith("/") or raw[1:2] in ("/", "\\"):
        return "/"
    if any(ord(char) < 0x21 or ord(char) == 0x7F for char in raw):
        return "/"
    return raw
