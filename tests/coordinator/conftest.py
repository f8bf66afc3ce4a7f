"""Harbor's virtual environment (made once, cached under tests/.venvs/) and the real
``tuneplane serve`` processes of the client tests, for the upload test."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.client.conftest import postgres_server, server, sqlite_server
from tests.coordinator import venv

__all__ = ["harbor_python", "postgres_server", "server", "sqlite_server"]


@pytest.fixture(scope="session")
def harbor_python() -> Path:
    """Python 3.12 with harbor and this checkout of tuneplane installed."""
    return venv.python()
