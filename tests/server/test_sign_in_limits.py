"""The sign-in limit under parallel tries, and which address it counts, against real
``tuneplane serve`` processes on each engine (docs/access.md, "Signing in"; docs/
configuration.md, ``TUNEPLANE_TRUSTED_PROXIES``)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx

from tests.serving import running_server
from tuneplane.contract.limits import SIGN_IN_FAILURES_MAX
from tuneplane.store import accounts
from tuneplane.store.database import Database

PASSWORD = "a long passphrase"
WRONG = "not the passphrase"
PARALLEL = 40
#: Requests straight from loopback, as every test's are: the proxy nginx would be.
TRUSTING = {"TUNEPLANE_TRUSTED_PROXIES": "127.0.0.1"}
NOT_TRUSTING = {"TUNEPLANE_TRUSTED_PROXIES": ""}


@contextmanager
def servers(
    database_url: str, tmp_path: Path, env: dict[str, str], logins: tuple[str, ...] = ()
) -> Iterator[list[str]]:
    """Servers on ``database_url`` holding accounts ``logins``: one on SQLite, two on
    PostgreSQL (whose processes share the limit through the database)."""
    data = tmp_path / "data"
    database = Database(database_url)
    database.migrate()
    digest = accounts.hash_password(PASSWORD)
    for login in logins:
        database.run_write(lambda c, login=login: accounts.add_user(c, login, password_hash=digest))
    database.close()
    count = 1 if database_url.startswith("sqlite") else 2
    args = ("--data-dir", str(data), "--database-url", database_url)
    with ExitStack() as stack:
        yield [stack.enter_context(running_server(*args, env=env)) for _ in range(count)]


def sign_in(
    base: str, login: str, password: str = WRONG, forwarded: str | None = None
) -> httpx.Response:
    headers = {} if forwarded is None else {"X-Forwarded-For": forwarded}
    return httpx.post(
        f"{base}/api/v1/session",
        json={"login": login, "password": password},
        headers=headers,
        timeout=60,
    )


def in_parallel(tries: list[tuple[str, str, str | None]]) -> list[int]:
    """Each ``(base, login, forwarded)`` wrong-password try at once; their statuses."""
    with ThreadPoolExecutor(len(tries)) as pool:
        answers = list(pool.map(lambda t: sign_in(t[0], t[1], forwarded=t[2]), tries))
    return sorted(answer.status_code for answer in answers)


def refused_for(answer: httpx.Response, what: str) -> bool:
    message: str = answer.json()["error"]["message"]
    return answer.status_code == 429 and f"too many failed attempts for this {what}" in message


def test_parallel_wrong_passwords_for_one_account_check_no_more_than_the_limit(
    database_url: str, tmp_path: Path
) -> None:
    with servers(database_url, tmp_path, TRUSTING, ("viewer",)) as bases:
        # Each try from an address of its own, so only the account's limit holds them back.
        tries = [(bases[i % len(bases)], "viewer", f"10.0.0.{i}") for i in range(PARALLEL)]
        statuses = in_parallel(tries)
        assert statuses.count(401) == SIGN_IN_FAILURES_MAX, statuses
        assert statuses.count(429) == PARALLEL - SIGN_IN_FAILURES_MAX, statuses
        for base in bases:
            right = sign_in(base, "viewer", PASSWORD, forwarded="10.0.1.1")
            assert refused_for(right, "account"), right.text


def test_parallel_tries_from_one_address_check_no_more_than_the_limit(
    database_url: str, tmp_path: Path
) -> None:
    with servers(database_url, tmp_path, TRUSTING, ("viewer",)) as bases:
        # Each try for an account of its own (most do not exist: they cost the same).
        tries = [(bases[i % len(bases)], f"user{i}", "203.0.113.9") for i in range(PARALLEL)]
        statuses = in_parallel(tries)
        assert statuses.count(401) == SIGN_IN_FAILURES_MAX, statuses
        assert statuses.count(429) == PARALLEL - SIGN_IN_FAILURES_MAX, statuses
        right = sign_in(bases[0], "viewer", PASSWORD, forwarded="203.0.113.9")
        assert refused_for(right, "address"), right.text
        assert sign_in(bases[-1], "viewer", PASSWORD, forwarded="203.0.113.10").status_code == 200


def test_forwarded_for_counts_for_nothing_without_trusted_proxies(
    database_url: str, tmp_path: Path
) -> None:
    with servers(database_url, tmp_path, NOT_TRUSTING, ("viewer",)) as (base, *_):
        # Nor is a made-up scheme believed: the cookie of a plain-http request is not Secure.
        assert "secure" not in _session_cookie(base, "https")
        for i in range(SIGN_IN_FAILURES_MAX):
            answer = sign_in(base, f"user{i}", forwarded=f"198.51.100.{i}")
            assert answer.status_code == 401, answer.text
        # Another made-up address changes nothing: the tries are all the peer's.
        assert refused_for(sign_in(base, "user-next", forwarded="1.2.3.4"), "address")
        assert refused_for(sign_in(base, "user-next"), "address")


def test_a_trusted_proxy_forwards_the_client_address(database_url: str, tmp_path: Path) -> None:
    with servers(database_url, tmp_path, TRUSTING, ("viewer",)) as (base, *_):
        # Successes count for nothing, whatever their number.
        for _ in range(SIGN_IN_FAILURES_MAX + 2):
            right = sign_in(base, "viewer", PASSWORD, forwarded="1.2.3.4")
            assert right.status_code == 200, right.text
        for i in range(SIGN_IN_FAILURES_MAX):
            assert sign_in(base, f"user{i}", forwarded="1.2.3.4").status_code == 401
        # The client is the right-most address that is no trusted proxy: what it wrote
        # itself, left of that, changes nothing, and trusted hops are passed over.
        for chain in ("1.2.3.4", "5.6.7.8, 1.2.3.4", "1.2.3.4, 127.0.0.1"):
            assert refused_for(sign_in(base, "user-next", forwarded=chain), "address"), chain
        assert sign_in(base, "user-next", forwarded="5.6.7.8").status_code == 401
        assert sign_in(base, "user-next").status_code == 401  # the proxy's own address
        assert "secure" in _session_cookie(base, "https")


def _session_cookie(base: str, proto: str) -> str:
    """The session cookie a sign-in through a proxy that says ``X-Forwarded-Proto: proto``
    sets (``secure`` in it when the request is believed to have come over HTTPS)."""
    answer = httpx.post(
        f"{base}/api/v1/session",
        json={"login": "viewer", "password": PASSWORD},
        headers={"X-Forwarded-Proto": proto, "X-Forwarded-For": "192.0.2.77"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    return answer.headers["set-cookie"].lower()
