"""What the app holds for its life: settings and the open database."""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.requests import HTTPConnection

from tuneplane.server.live import LiveHub
from tuneplane.server.settings import Settings
from tuneplane.store.arena import ArenaIngest
from tuneplane.store.credentials import TokenScope
from tuneplane.store.database import Database


@dataclass(frozen=True, slots=True)
class AppState:
    settings: Settings
    database: Database
    arena: ArenaIngest
    live: LiveHub = field(default_factory=LiveHub)
    #: What ingest tokens already seen resolve to, by hash (whether one may still write
    #: is checked by each write itself).
    known_tokens: dict[str, TokenScope] = field(default_factory=dict)


def app_state(connection: HTTPConnection) -> AppState:
    state: AppState = connection.app.state.tuneplane
    return state
