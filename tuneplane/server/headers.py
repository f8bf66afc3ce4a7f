"""Headers every response carries.

``X-Content-Type-Options: nosniff`` on every answer (JSON, static files, ``/openapi.json``,
errors): a browser then never runs a JSON body or a text file as script or style because it
"looks like" one. Pure ASGI, so the hot ``/ingest`` route pays one list copy per response,
not a Starlette middleware's extra task and body re-streaming.
"""

from __future__ import annotations

from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

NOSNIFF: Final = (b"x-content-type-options", b"nosniff")


class ResponseHeaders:
    """Adds :data:`NOSNIFF` to every HTTP response that does not set it itself."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                if not any(name.lower() == NOSNIFF[0] for name, _ in headers):
                    headers.append(NOSNIFF)
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)
