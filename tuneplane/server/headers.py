"""Headers every response carries.

``X-Content-Type-Options: nosniff`` on every answer (JSON, static files, ``/openapi.json``,
errors): a browser then never runs a JSON body or a text file as script or style because it
"looks like" one. And a policy saying who may frame the answer
(``Content-Security-Policy: frame-ancestors …``, from ``TUNEPLANE_FRAME_ANCESTORS``): a
second policy beside a page's own is enforced as well, so the pages' policy leaves it out.
Pure ASGI, so the hot ``/ingest`` route pays one list copy per response, not a Starlette
middleware's extra task and body re-streaming.
"""

from __future__ import annotations

from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

NOSNIFF: Final = (b"x-content-type-options", b"nosniff")


class ResponseHeaders:
    """Adds :data:`NOSNIFF` to every HTTP response that does not set it itself, and the
    ``frame-ancestors`` policy."""

    def __init__(self, app: ASGIApp, frame_ancestors: str = "'self'") -> None:
        self.app = app
        self.framing = (b"content-security-policy", f"frame-ancestors {frame_ancestors}".encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                if not any(name.lower() == NOSNIFF[0] for name, _ in headers):
                    headers.append(NOSNIFF)
                headers.append(self.framing)
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)
