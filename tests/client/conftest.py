"""Real ``tuneplane serve`` processes shared by the client tests (each test uses its own
runs, so they never see each other's data)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.client.runs import Server
from tests.conftest import scratch_postgres
from tests.serving import running_server


def _serve(tmp_path_factory: pytest.TempPathFactory, *args: str) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("server")
    with running_server("--data-dir", str(data), *args) as base:
        yield Server(base, data)


@pytest.fixture(scope="package")
def sqlite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from _serve(tmp_path_factory)


@pytest.fixture(scope="package")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # A database of its own: the store tests' fixture empties the shared one between tests,
    # which would take this server's admin key with it.
    with scratch_postgres() as url:
        yield from _serve(tmp_path_factory, "--database-url", url)


@pytest.fixture(params=["sqlite", "postgresql"])
def server(request: pytest.FixtureRequest) -> Server:
    """The real server on each engine."""
    found: Server = request.getfixturevalue(
        f"{request.param.replace('postgresql', 'postgres')}_server"
    )
    return found
