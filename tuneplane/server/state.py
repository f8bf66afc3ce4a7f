"""What the app holds for its life: settings and the open database."""

from __future__ import annotations

import asyncio
import hmac
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import HTTPConnection

from tuneplane.blobs import BlobStore
from tuneplane.launch.engines.base import Engine
from tuneplane.launch.engines.local import LocalEngine
from tuneplane.launch.recipes import Recipe
from tuneplane.server.alerting import AlertEngine
from tuneplane.server.live import LiveHub
from tuneplane.server.outbound import OutboundPolicy
from tuneplane.server.settings import Settings
from tuneplane.store.arena import ArenaIngest
from tuneplane.store.credentials import TokenScope
from tuneplane.store.database import Database


class FirstAdmin:
    """The one-time token for creating the first administrator while no account exists
    (``tuneplane serve`` prints it in a link, as a notebook server prints its token)."""

    def __init__(self, token: str | None = None) -> None:
        self._token = token

    @property
    def pending(self) -> bool:
        return self._token is not None

    @property
    def token(self) -> str | None:
        return self._token

    def matches(self, candidate: str) -> bool:
        token = self._token
        return token is not None and hmac.compare_digest(token.encode(), candidate.encode())

    def spend(self) -> None:
        self._token = None

    def share(self, token: str) -> None:
        """Hold the token the other processes of this server hold instead of this one's own
        (``tuneplane serve --workers``): any of them may answer the printed link."""
        if self._token is not None:
            self._token = token


@dataclass(frozen=True, slots=True)
class AppState:
    settings: Settings
    database: Database
    arena: ArenaIngest
    #: Where trajectory bodies go.
    blobs: BlobStore
    #: Server-side alert rules (server/alerting.py).
    alerts: AlertEngine
    #: Where webhooks and the diagnosis language model may be called (server/outbound.py).
    outbound: OutboundPolicy
    live: LiveHub = field(default_factory=LiveHub)
    #: What ingest tokens already seen resolve to, by hash (whether one may still write
    #: is checked by each write itself).
    known_tokens: dict[str, TokenScope] = field(default_factory=dict)
    first_admin: FirstAdmin = field(default_factory=FirstAdmin)
    #: Work started by a request that outlives it (diagnoses): held so it is not collected.
    background: set[asyncio.Task[Any]] = field(default_factory=set)
    #: Set by a deletion of a run or project: the purger (server/purger.py) starts at once.
    purge_wanted: asyncio.Event = field(default_factory=asyncio.Event)
    #: Launch recipes by name, read from TUNEPLANE_RECIPES_DIR at start.
    recipes: dict[str, Recipe] = field(default_factory=dict)
    #: The engines launched jobs run on, by name (server/launch.py): local, and those the
    #: settings configure.
    engines: dict[str, Engine] = field(default_factory=lambda: {"local": LocalEngine()})


def app_state(connection: HTTPConnection) -> AppState:
    state: AppState = connection.app.state.tuneplane
    return state
