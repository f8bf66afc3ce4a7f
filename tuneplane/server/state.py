"""What the app holds for its life: settings and the open database."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import HTTPConnection

from tuneplane.server.settings import Settings
from tuneplane.store.arena import ArenaIngest
from tuneplane.store.database import Database


@dataclass(frozen=True, slots=True)
class AppState:
    settings: Settings
    database: Database
    arena: ArenaIngest


def app_state(connection: HTTPConnection) -> AppState:
    state: AppState = connection.app.state.tuneplane
    return state
