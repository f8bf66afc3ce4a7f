"""Real ``tuneplane serve`` processes on each engine, for the real Trackio client: the same
fixtures as the client tests'."""

from tests.client.conftest import postgres_server, server, sqlite_server

__all__ = ["postgres_server", "server", "sqlite_server"]
