"""A real OpenID Connect provider process (npm's ``oidc-provider``, ``provider.mjs``) on
loopback, and a browser-less walk through its login form with httpx."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin

import httpx

from tests.serving import free_port

HERE = Path(__file__).parent
CLIENT_ID = "tuneplane-tests"
CLIENT_SECRET = "a-client-secret-for-the-tests-only"
#: Loopback, any port (the provider's client is a native application, RFC 8252).
REDIRECT_URI = "http://127.0.0.1/sign-in/oidc/callback"


@dataclass(frozen=True)
class RunningProvider:
    issuer: str

    def server_env(self, **allow: str) -> dict[str, str]:
        """What ``tuneplane serve`` needs to use this provider, plus the allow-list."""
        return {
            "TUNEPLANE_OIDC_ISSUER": self.issuer,
            "TUNEPLANE_OIDC_CLIENT_ID": CLIENT_ID,
            "TUNEPLANE_OIDC_CLIENT_SECRET": CLIENT_SECRET,
            **{f"TUNEPLANE_OIDC_{name.upper()}": value for name, value in allow.items()},
        }


def _installed() -> None:
    if (HERE / "node_modules" / "oidc-provider").is_dir():
        return
    npm = shutil.which("npm")
    assert npm, "npm is missing: the single sign-on tests run oidc-provider on Node.js"
    subprocess.run(
        [npm, "ci", "--prefix", str(HERE), "--no-audit", "--no-fund", "--loglevel=error"],
        check=True,
        timeout=300,
    )


@contextmanager
def running_provider(
    accounts: dict[str, dict[str, object]], redirect_uris: Sequence[str] = (REDIRECT_URI,)
) -> Iterator[RunningProvider]:
    """The provider, with these accounts (login -> claims), until the block ends; it sends
    browsers back to ``redirect_uris`` only (loopback: on any port)."""
    _installed()
    port = free_port()
    config = {
        "port": port,
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "redirect_uris": list(redirect_uris),
        "accounts": accounts,
    }
    node = shutil.which("node")
    assert node, "node is missing: the single sign-on tests run oidc-provider on Node.js"
    process = subprocess.Popen(
        [node, str(HERE / "provider.mjs"), json.dumps(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + 30
        printed = []
        for line in process.stdout:
            printed.append(line)
            if line.startswith("ready "):
                break
            assert time.monotonic() < deadline, "the provider did not start within 30 s"
        else:
            raise AssertionError("the provider exited:\n" + "".join(printed))
        yield RunningProvider(line.split()[1])
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout:
            process.stdout.close()


class _Form(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.action = ""
        self.fields: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "form" and not self.action:
            self.action = named.get("action") or ""
        if tag == "input" and named.get("name"):
            self.fields[str(named["name"])] = named.get("value") or ""


def login_at_provider(client: httpx.Client, location: str, login: str) -> httpx.Response:
    """Follow the provider's redirects from ``location`` (its authorization URL), fill in
    its login form as ``login``, and answer the first response that leaves the provider
    (the redirect to our callback), unfollowed."""
    response = client.get(location)
    provider = str(response.url.copy_with(path="/", query=None))
    for _ in range(10):
        if response.is_redirect:
            target = urljoin(str(response.url), response.headers["location"])
            if not target.startswith(provider):
                return response
            response = client.get(target)
            continue
        form = _Form()
        form.feed(response.text)
        assert form.action, f"no form at the provider ({response.status_code}): {response.text}"
        values = {**form.fields, "login": login, "password": "any password"}
        response = client.post(urljoin(str(response.url), form.action), data=values)
    raise AssertionError("the provider kept the browser for more than 10 steps")
