"""Single sign-on through real HTTP: a real ``tuneplane serve`` process and a real OpenID
Connect provider (npm's ``oidc-provider``) on loopback, both started once for the module;
the provider's login form is filled in with httpx."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

from tests.oidc.provider import RunningProvider, login_at_provider, running_provider
from tests.serving import free_port, running_server

ACCOUNTS: dict[str, dict[str, object]] = {
    "alice": {"email": "alice@example.com", "email_verified": True, "name": "Alice Aldous"},
    "bob": {"email": "bob@other.org", "email_verified": True, "groups": ["marketing"]},
    "carol": {"email": "carol@other.org", "email_verified": True, "groups": ["research"]},
    "dave": {"email": "dave@example.com", "email_verified": False},
    "erin": {"email": "erin@example.com", "email_verified": True},
    "fay": {"email": "fay@example.com", "email_verified": True},
}


@dataclass(frozen=True)
class Server:
    base: str
    data: Path
    log: Path

    def users(self) -> list[str]:
        listed = subprocess.run(
            [sys.executable, "-m", "tuneplane.cli", "user", "list", "--data-dir", str(self.data)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return listed.stdout.splitlines()


@pytest.fixture(scope="module")
def provider() -> Iterator[RunningProvider]:
    with running_provider(ACCOUNTS) as running:
        yield running


@pytest.fixture(scope="module")
def server(provider: RunningProvider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("sso")
    log = data / "server.log"
    env = provider.server_env(allowed_domains="example.com", allowed_orgs="research")
    with running_server("--data-dir", str(data), env=env, output=log) as base:
        yield Server(base, data, log)


Browsers = Callable[..., httpx.Client]


@pytest.fixture
def browsers() -> Iterator[Browsers]:
    """Fresh clients (each a browser's cookie jar), closed after the test."""
    opened: list[httpx.Client] = []

    def new(**options: object) -> httpx.Client:
        opened.append(httpx.Client(**options))  # type: ignore[arg-type]
        return opened[-1]

    yield new
    for client in opened:
        client.close()


def start(client: httpx.Client, base: str, next_: str | None = None) -> str:
    """Begin signing in; answers the provider's authorization URL."""
    query = f"?{urlencode({'next': next_})}" if next_ is not None else ""
    response = client.get(f"{base}/sign-in/oidc{query}")
    assert response.status_code == 302, response.text
    assert "tuneplane_oidc" in response.cookies
    return response.headers["location"]


def sign_in(
    browsers: Browsers, base: str, login: str, next_: str | None = None
) -> tuple[httpx.Client, str]:
    """The whole flow in a fresh client; answers it and where the server sent it at last."""
    client = browsers()
    back = login_at_provider(client, start(client, base, next_), login)
    done = client.get(back.headers["location"])
    assert done.status_code == 303, done.text
    return client, done.headers["location"]


def session(client: httpx.Client, base: str) -> dict[str, object]:
    answer: dict[str, object] = client.get(f"{base}/api/v1/session").json()
    return answer


def refusal(location: str) -> dict[str, list[str]]:
    parts = urlsplit(location)
    assert parts.path == "/sign-in", location
    return parse_qs(parts.query)


def test_an_allowed_account_signs_in_and_keeps_its_account(
    browsers: Browsers, server: Server
) -> None:
    client, location = sign_in(browsers, server.base, "alice")
    assert location == "/"
    me = session(client, server.base)
    assert me["signed_in"] is True
    assert me["login"] == "alice@example.com"
    assert me["single_sign_on"] == "127.0.0.1"
    assert "alice@example.com\tuser\tactive" in server.users()
    # A second sign-in finds the same account, whatever the provider's session.
    again, _ = sign_in(browsers, server.base, "alice")
    assert session(again, server.base)["login"] == "alice@example.com"
    assert [line for line in server.users() if line.startswith("alice")] == [
        "alice@example.com\tuser\tactive"
    ]
    # Each sign-in is a session of its own: signing one out leaves the other.
    token = session(client, server.base)["csrf_token"]
    headers = {"Origin": server.base, "X-CSRF-Token": str(token)}
    assert client.delete(f"{server.base}/api/v1/session", headers=headers).status_code == 200
    assert session(client, server.base)["signed_in"] is False
    assert session(again, server.base)["signed_in"] is True


def test_an_organisation_on_the_list_admits_an_account_of_another_domain(
    browsers: Browsers, server: Server
) -> None:
    client, _ = sign_in(browsers, server.base, "carol")
    assert session(client, server.base)["login"] == "carol@other.org"


@pytest.mark.parametrize("login", ["bob", "dave"])
def test_an_account_off_the_list_is_refused_and_gets_no_account(
    browsers: Browsers, server: Server, login: str
) -> None:
    # bob: another domain, another group; dave: the right domain, but not verified.
    client, location = sign_in(browsers, server.base, login, next_="/projects/p")
    assert refusal(location) == {"sso": ["not-allowed"], "next": ["/projects/p"]}
    assert session(client, server.base)["signed_in"] is False
    assert not [line for line in server.users() if line.startswith(login)]
    # The server's output says whom it refused, so an administrator knows whom to add.
    email = ACCOUNTS[login]["email"]
    assert f"single sign-on refused {email!r}: not on the allow-list" in server.log.read_text()


def test_a_disabled_account_is_refused(browsers: Browsers, server: Server) -> None:
    client, _ = sign_in(browsers, server.base, "erin")
    assert session(client, server.base)["signed_in"] is True
    subprocess.run(
        [
            *(sys.executable, "-m", "tuneplane.cli", "user", "disable", "erin@example.com"),
            *("--data-dir", str(server.data)),
        ],
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert session(client, server.base)["signed_in"] is False
    again, location = sign_in(browsers, server.base, "erin")
    assert refusal(location) == {"sso": ["disabled"]}
    assert session(again, server.base)["signed_in"] is False


def test_next_is_kept_and_only_ever_a_path_of_this_server(
    browsers: Browsers, server: Server
) -> None:
    _, location = sign_in(browsers, server.base, "fay", next_="/projects/p/runs/r?x=1")
    assert location == "/projects/p/runs/r?x=1"
    for elsewhere in ("//evil.example/", "/\\evil.example", "https://evil.example/"):
        _, location = sign_in(browsers, server.base, "fay", next_=elsewhere)
        assert location == "/"


def test_a_tampered_state_is_refused(browsers: Browsers, server: Server) -> None:
    client = browsers()
    back = login_at_provider(client, start(client, server.base), "fay")
    callback = urlsplit(back.headers["location"])
    query = parse_qs(callback.query)
    query["state"] = [query["state"][0][:-2] + "xx"]
    done = client.get(callback._replace(query=urlencode(query, doseq=True)).geturl())
    assert refusal(done.headers["location"]) == {"sso": ["state"]}
    assert session(client, server.base)["signed_in"] is False


def test_a_flow_cookie_edited_or_missing_is_refused(browsers: Browsers, server: Server) -> None:
    client = browsers()
    back = login_at_provider(client, start(client, server.base), "fay")
    sealed = client.cookies["tuneplane_oidc"]
    body, _, signature = sealed.partition(".")
    client.cookies.set("tuneplane_oidc", f"{body}A.{signature}", path="/sign-in/oidc")
    done = client.get(back.headers["location"])
    assert refusal(done.headers["location"]) == {"sso": ["expired"]}
    # The same answer in a browser that never started a sign-in (login CSRF).
    stranger = browsers()
    done = stranger.get(back.headers["location"])
    assert refusal(done.headers["location"]) == {"sso": ["expired"]}
    assert session(stranger, server.base)["signed_in"] is False


def test_a_code_used_twice_is_refused_by_the_provider(browsers: Browsers, server: Server) -> None:
    client = browsers()
    back = login_at_provider(client, start(client, server.base), "fay")
    sealed = client.cookies["tuneplane_oidc"]
    assert client.get(back.headers["location"]).headers["location"] == "/"
    replay = browsers(cookies={"tuneplane_oidc": sealed})
    done = replay.get(back.headers["location"])
    assert refusal(done.headers["location"]) == {"sso": ["token"]}
    assert session(replay, server.base)["signed_in"] is False


def test_the_providers_own_error_is_shown_by_its_code(browsers: Browsers, server: Server) -> None:
    client = browsers()
    state = parse_qs(urlsplit(start(client, server.base)).query)["state"][0]
    callback = f"{server.base}/sign-in/oidc/callback"
    denied = {"state": state, "error": "access_denied", "error_description": "<b>no</b>"}
    done = client.get(callback, params=denied)
    assert refusal(done.headers["location"]) == {
        "sso": ["provider"],
        "sso_error": ["access_denied"],
    }
    # Only a plain OAuth error code travels to the page, never text of the provider's.
    state = parse_qs(urlsplit(start(client, server.base)).query)["state"][0]
    done = client.get(callback, params={"state": state, "error": "<script>"})
    assert refusal(done.headers["location"]) == {"sso": ["provider"]}


def test_a_provider_that_is_down_answers_503_naming_it(tmp_path: Path) -> None:
    issuer = f"http://127.0.0.1:{free_port()}"
    env = {
        "TUNEPLANE_OIDC_ISSUER": issuer,
        "TUNEPLANE_OIDC_CLIENT_ID": "c",
        "TUNEPLANE_OIDC_CLIENT_SECRET": "s",
        "TUNEPLANE_OIDC_ALLOWED_DOMAINS": "*",
        "TUNEPLANE_OIDC_NAME": "Example SSO",
    }
    with running_server("--data-dir", str(tmp_path), env=env) as base:
        assert httpx.get(f"{base}/api/v1/session").json()["single_sign_on"] == "Example SSO"
        answer = httpx.get(f"{base}/sign-in/oidc")
        assert answer.status_code == 503
        error = answer.json()["error"]
        assert error["code"] == "unavailable"
        assert issuer in error["message"]


def test_without_an_issuer_there_is_no_single_sign_on(tmp_path: Path) -> None:
    with running_server("--data-dir", str(tmp_path)) as base:
        assert httpx.get(f"{base}/api/v1/session").json()["single_sign_on"] is None
        for path in ("/sign-in/oidc", "/sign-in/oidc/callback?state=x&code=y"):
            answer = httpx.get(base + path)
            assert answer.status_code == 404
            assert "not configured" in answer.json()["error"]["message"]
