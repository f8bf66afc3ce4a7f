"""The real ``tuneplane serve`` processes of the client tests, for the upload tests."""

from tests.client.conftest import postgres_server, server, sqlite_server

__all__ = ["postgres_server", "server", "sqlite_server"]
