"""Server settings: declared once, read once at startup, passed down as a value object."""

from __future__ import annotations

import hmac
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tuneplane.contract.datadir import resolve_data_dir
from tuneplane.contract.limits import INGEST_TOKEN_DAYS_DEFAULT


class Secret:
    """A credential that never prints and compares in constant time."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value.encode()

    def matches(self, candidate: str) -> bool:
        return hmac.compare_digest(self._value, candidate.encode())

    def __repr__(self) -> str:
        return "Secret('********')"

    __str__ = __repr__


@dataclass(frozen=True, slots=True)
class SettingSpec:
    env: str
    default: str
    help: str


#: Every environment variable the server reads, with its default and meaning.
#: ``docs/configuration.md`` documents each one (a test holds us to that).
SETTINGS: Final = (
    SettingSpec(
        "TUNEPLANE_DIR",
        "./tuneplane-data",
        "Data directory: the SQLite database and its lock file live here.",
    ),
    SettingSpec(
        "TRACKIO_DIR",
        "",
        "Read as the data directory when TUNEPLANE_DIR is unset (Arena deployments).",
    ),
    SettingSpec(
        "TUNEPLANE_DATABASE_URL",
        "sqlite:///<data dir>/tuneplane.db",
        "postgresql://user@host/db to store everything in PostgreSQL instead of SQLite.",
    ),
    SettingSpec(
        "TUNEPLANE_INGEST_SECRET",
        "",
        "Shared secret that authorizes POST /ingest only. Unset: ingestion answers 503.",
    ),
    SettingSpec(
        "TRACKIO_INGEST_TOKEN",
        "",
        "Read as the ingest secret when TUNEPLANE_INGEST_SECRET is unset (Arena deployments).",
    ),
    SettingSpec(
        "TUNEPLANE_INGEST_TOKEN_DAYS",
        str(INGEST_TOKEN_DAYS_DEFAULT),
        "Days an ingest token stays valid; must cover the longest training job.",
    ),
    SettingSpec(
        "TUNEPLANE_INGEST_URL",
        "",
        "URL training nodes use to reach this server, when it differs from the CLI's URL.",
    ),
    SettingSpec("TUNEPLANE_HOST", "127.0.0.1", "Address the server listens on."),
    SettingSpec("TUNEPLANE_PORT", "8000", "Port the server listens on."),
)


@dataclass(frozen=True, slots=True)
class Settings:
    data_dir: Path
    database_url: str
    ingest_secret: Secret | None
    host: str = "127.0.0.1"
    port: int = 8000
    ingest_token_days: float = INGEST_TOKEN_DAYS_DEFAULT
    ingest_url: str | None = None

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        data_dir: str | None = None,
        database_url: str | None = None,
        host: str | None = None,
        port: int | None = None,
    ) -> Settings:
        """Settings from the environment; explicit arguments (command-line flags) win."""
        env = os.environ if environ is None else environ
        directory = resolve_data_dir(data_dir, env)
        url = (
            database_url
            or env.get("TUNEPLANE_DATABASE_URL")
            or (f"sqlite:///{directory / 'tuneplane.db'}")
        )
        secret = env.get("TUNEPLANE_INGEST_SECRET") or env.get("TRACKIO_INGEST_TOKEN")
        return cls(
            data_dir=directory,
            database_url=url,
            ingest_secret=Secret(secret) if secret else None,
            host=host or env.get("TUNEPLANE_HOST") or "127.0.0.1",
            port=port or int(env.get("TUNEPLANE_PORT") or 8000),
            ingest_token_days=float(
                env.get("TUNEPLANE_INGEST_TOKEN_DAYS") or INGEST_TOKEN_DAYS_DEFAULT
            ),
            ingest_url=env.get("TUNEPLANE_INGEST_URL") or None,
        )
