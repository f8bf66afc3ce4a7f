"""Serving under a path prefix (``tuneplane serve --root-path /tuneplane``), as a reverse
proxy that publishes the server at ``https://host/tuneplane/`` does.

Proxies differ in what they forward: nginx's ``proxy_pass http://app/;`` strips the prefix,
``proxy_pass http://app;`` keeps it. :class:`RootPath` takes both, and a request that comes
straight to the server (a health check, a training node on the cluster's network) too: the
ASGI scope then always says ``root_path=/tuneplane`` and a path that starts with it, so
routing sees the server's own paths and everything that builds an address (cookies, redirects,
the dashboard's shell) adds the prefix from one place, :func:`root_of`.

A prefix whose first segment is one of the server's own (``/api``, ``/static``) would make a
stripped and a kept request look alike; the setting's rule refuses it
(:data:`tuneplane.server.settings.ROOT_PATH`).
"""

from __future__ import annotations

from starlette.requests import HTTPConnection
from starlette.responses import RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send


class RootPath:
    """Puts ``prefix`` in every request's ``root_path`` and in front of its ``path`` when
    the proxy took it off; ``/prefix`` itself redirects to ``/prefix/``."""

    def __init__(self, app: ASGIApp, prefix: str) -> None:
        self.app = app
        self.prefix = prefix
        self.raw_prefix = prefix.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        scope = dict(scope)
        path: str = scope["path"]
        if path == self.prefix:
            query = scope.get("query_string", b"").decode("latin-1")
            location = f"{self.prefix}/" + (f"?{query}" if query else "")
            await RedirectResponse(location, status_code=308)(scope, receive, send)
            return
        if not path.startswith(self.prefix + "/"):
            scope["path"] = self.prefix + path
            raw = scope.get("raw_path")
            if raw is not None:
                scope["raw_path"] = self.raw_prefix + raw
        scope["root_path"] = self.prefix
        await self.app(scope, receive, send)


def route_path(scope: Scope) -> str:
    """The path the server's routes see: the request's without the prefix."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root + "/") else path


def root_of(connection: HTTPConnection) -> str:
    """The prefix the server is published under (``""`` at a host's root)."""
    root: str = connection.scope.get("root_path", "")
    return root.rstrip("/")


def cookie_path(connection: HTTPConnection, path: str = "/") -> str:
    """A cookie's ``Path`` under the prefix: ``/`` becomes ``/prefix`` (which also matches
    ``/prefix/…``, and not ``/prefixes``)."""
    root = root_of(connection)
    if path == "/":
        return root or "/"
    return root + path


def local_address(connection: HTTPConnection, path: str) -> str:
    """A server path (``/sign-in?next=…``) as the browser must ask for it."""
    return root_of(connection) + path
