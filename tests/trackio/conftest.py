"""Real ``tuneplane serve`` processes on each engine, for the real Trackio client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.client.runs import Server
from tests.serving import running_server


def _serve(tmp_path_factory: pytest.TempPathFactory, *args: str) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("server")
    with running_server("--data-dir", str(data), *args) as base:
        yield Server(base, data)


@pytest.fixture(scope="package")
def sqlite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from _serve(tmp_path_factory)


@pytest.fixture(scope="package")
def postgres_server(
    tmp_path_factory: pytest.TempPathFactory, pg_database_url: str
) -> Iterator[Server]:
    yield from _serve(tmp_path_factory, "--database-url", pg_database_url)


@pytest.fixture(params=["sqlite", "postgresql"])
def server(request: pytest.FixtureRequest) -> Server:
    found: Server = request.getfixturevalue(
        f"{request.param.replace('postgresql', 'postgres')}_server"
    )
    return found
