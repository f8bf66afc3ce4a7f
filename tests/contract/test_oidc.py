"""Single sign-on's rules: the allow-list, logins made from claims, where to go next."""

from __future__ import annotations

import pytest

from tuneplane.contract.oidc import (
    AllowList,
    admits,
    login_candidates,
    parse_domains,
    parse_issuer,
    parse_orgs,
    safe_next,
)

DOMAINS = AllowList(domains=frozenset({"example.com"}), orgs=frozenset())
ORGS = AllowList(domains=frozenset(), orgs=frozenset({"research"}))


def test_a_domain_admits_only_a_verified_email_at_exactly_that_domain() -> None:
    def admitted(email: str, verified: object = True) -> bool:
        return admits(DOMAINS, {"email": email, "email_verified": verified}, "groups")

    assert admitted("ada@example.com")
    assert admitted("ada@EXAMPLE.com")
    assert not admitted("ada@example.com", verified=False)
    assert not admitted("ada@example.com", verified="true")  # a string is not a yes
    assert not admits(DOMAINS, {"email": "ada@example.com"}, "groups")
    assert not admitted("ada@lab.example.com")
    assert not admitted("ada@example.com.evil.org")
    assert not admitted("example.com")


def test_organisations_are_names_or_objects_naming_them() -> None:
    assert admits(ORGS, {"groups": ["research", "other"]}, "groups")
    assert admits(ORGS, {"groups": "research"}, "groups")
    hugging_face = {
        "orgs": [{"sub": "6f1", "name": "Research Lab", "preferred_username": "research"}]
    }
    assert admits(ORGS, hugging_face, "orgs")
    assert not admits(ORGS, hugging_face, "groups")  # another claim
    assert not admits(ORGS, {"orgs": [{"name": "research"}]}, "orgs")  # a display name
    assert not admits(ORGS, {"groups": ["Research"]}, "groups")
    assert not admits(ORGS, {"groups": {"research": True}}, "groups")


def test_a_star_admits_everyone() -> None:
    everyone = AllowList(domains=frozenset({"*"}), orgs=frozenset())
    assert admits(everyone, {"sub": "x"}, "groups")


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ("example.com", {"example.com"}),
        (" Example.com , lab.example.org", {"example.com", "lab.example.org"}),
        ("*", {"*"}),
        ("example", None),
        ("*.example.com", None),
        ("*,example.com", None),
        ("example.com,", None),
    ],
)
def test_domain_lists(raw: str, parsed: set[str] | None) -> None:
    assert parse_domains(raw) == (None if parsed is None else frozenset(parsed))


def test_organisation_lists() -> None:
    assert parse_orgs("research,/platform/ml") == frozenset({"research", "/platform/ml"})
    assert parse_orgs("two words") is None
    assert parse_orgs("a,,b") is None


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ("https://accounts.google.com", "https://accounts.google.com"),
        ("https://sso.example.com/realms/lab/", "https://sso.example.com/realms/lab"),
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("http://localhost:8080", "http://localhost:8080"),
        ("http://sso.example.com", None),
        ("https://sso.example.com/?a=1", None),
        ("https://user@sso.example.com", None),
        ("https://sso.example.com:x", None),
        ("ftp://sso.example.com", None),
    ],
)
def test_issuers(raw: str, parsed: str | None) -> None:
    assert parse_issuer(raw) == parsed


def test_logins_come_from_the_verified_email_then_the_user_name_then_the_subject() -> None:
    first = next(login_candidates({"email": "ada@example.com", "email_verified": True}))
    assert first == "ada@example.com"
    unverified = {"email": "ada@example.com", "preferred_username": "ada/l ovelace", "sub": "1"}
    assert next(login_candidates(unverified)) == "ada-l-ovelace"
    assert next(login_candidates({"sub": "1"})).startswith("sso-")
    assert list(login_candidates({"preferred_username": "ada"}))[1:3] == ["ada-2", "ada-3"]


@pytest.mark.parametrize(
    ("raw", "safe"),
    [
        ("/projects/p", "/projects/p"),
        ("/projects/p?x=1#y", "/projects/p?x=1#y"),
        (None, "/"),
        ("", "/"),
        ("//evil.example", "/"),
        ("/\\evil.example", "/"),
        ("https://evil.example", "/"),
        ("/ok\nSet-Cookie: x", "/"),
    ],
)
def test_next_is_a_path_of_this_server(raw: str | None, safe: str) -> None:
    assert safe_next(raw) == safe
