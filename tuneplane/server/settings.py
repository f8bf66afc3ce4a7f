"""Server settings: declared once, read once at startup, passed down as a value object."""

from __future__ import annotations

import hmac
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

from tuneplane.contract import settings as rules
from tuneplane.contract.access import Visibility
from tuneplane.contract.datadir import (
    DATA_DIR,
    DATA_DIR_VARIABLES,
    TRACKIO_DIR,
    resolve_data_dir,
)
from tuneplane.contract.limits import (
    BODY_TIMEOUT_SECONDS_DEFAULT,
    BODY_TIMEOUT_SECONDS_MAX,
    INGEST_TOKEN_DAYS_DEFAULT,
    INGEST_TOKEN_DAYS_MAX,
)
from tuneplane.contract.settings import (
    HTTP_URL,
    Reader,
    Setting,
    credential,
    number,
)

T = TypeVar("T")


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


DATABASE_URL: Final = Setting(
    "TUNEPLANE_DATABASE_URL",
    rules.DATABASE_URL,
    None,
    "postgresql://user@host/db to store everything in PostgreSQL instead of SQLite.",
    default_text="sqlite:///<data dir>/tuneplane.db",
)
INGEST_SECRET: Final = Setting(
    "TUNEPLANE_INGEST_SECRET",
    credential("", "a shared secret"),
    None,
    "Shared secret that authorizes POST /ingest only. Unset: ingestion answers 503.",
)
TRACKIO_INGEST_TOKEN: Final = Setting(
    "TRACKIO_INGEST_TOKEN",
    credential("", "a shared secret"),
    None,
    "Read as the ingest secret when TUNEPLANE_INGEST_SECRET is unset (Arena deployments).",
)
INGEST_TOKEN_DAYS: Final = Setting(
    "TUNEPLANE_INGEST_TOKEN_DAYS",
    number("days", INGEST_TOKEN_DAYS_MAX, zero=False),
    float(INGEST_TOKEN_DAYS_DEFAULT),
    "Days an ingest token stays valid; must cover the longest training job.",
    default_text=str(INGEST_TOKEN_DAYS_DEFAULT),
)
INGEST_URL: Final = Setting(
    "TUNEPLANE_INGEST_URL",
    HTTP_URL,
    None,
    "URL training nodes use to reach this server, when it differs from the CLI's URL.",
)
HOST: Final = Setting("TUNEPLANE_HOST", rules.HOST, "127.0.0.1", "Address the server listens on.")
PORT: Final = Setting("TUNEPLANE_PORT", rules.PORT, 8000, "Port the server listens on.")


def _visibility(raw: str) -> Visibility | None:
    return "public" if raw == "public" else "private" if raw == "private" else None


DEFAULT_VISIBILITY: Final[Setting[Visibility]] = Setting(
    "TUNEPLANE_DEFAULT_VISIBILITY",
    rules.Rule("must be public or private", _visibility),
    "private",
    "Visibility of a project created through the API or the SDK (projects created by the "
    "Arena POST /ingest route are always public).",
)
_FRAME_SOURCE: Final = re.compile(r"'self'|'none'|https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?", re.ASCII)


def _frame_ancestors(raw: str) -> str | None:
    sources = raw.split()
    if not sources or not all(_FRAME_SOURCE.fullmatch(source) for source in sources):
        return None
    if "'none'" in sources and len(sources) > 1:
        return None
    return " ".join(sources)


FRAME_ANCESTORS: Final = Setting(
    "TUNEPLANE_FRAME_ANCESTORS",
    rules.Rule(
        "must be 'none', 'self' or origins such as https://huggingface.co, space-separated",
        _frame_ancestors,
    ),
    "'self'",
    "Who may show the dashboard in a frame (Content-Security-Policy frame-ancestors): a "
    "dashboard embedded in another site, as a hosted Space is, lists that site's origin.",
)
BODY_TIMEOUT: Final = Setting(
    "TUNEPLANE_BODY_TIMEOUT",
    number("seconds", BODY_TIMEOUT_SECONDS_MAX, zero=False),
    BODY_TIMEOUT_SECONDS_DEFAULT,
    "Seconds a request body may take to arrive in full; a slower one answers 408.",
    default_text=f"{BODY_TIMEOUT_SECONDS_DEFAULT:g}",
)

#: Every environment variable the server reads: its rule, default and meaning.
#: ``docs/configuration.md`` documents each one (a test holds us to that).
SETTINGS: Final[tuple[Setting[Any], ...]] = (
    DATA_DIR,
    TRACKIO_DIR,
    DATABASE_URL,
    INGEST_SECRET,
    TRACKIO_INGEST_TOKEN,
    INGEST_TOKEN_DAYS,
    INGEST_URL,
    HOST,
    PORT,
    BODY_TIMEOUT,
    DEFAULT_VISIBILITY,
    FRAME_ANCESTORS,
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
    body_timeout: float = BODY_TIMEOUT_SECONDS_DEFAULT
    default_visibility: Visibility = "private"
    frame_ancestors: str = "'self'"

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        data_dir: str | None = None,
        database_url: str | None = None,
        host: str | None = None,
        port: int | str | None = None,
    ) -> Settings:
        """Settings from the environment; explicit arguments (command-line flags) win.
        :class:`SettingError` names every bad value, variable or flag, one line each."""
        reader = Reader(os.environ if environ is None else environ)
        directory = _data_dir(reader, data_dir)
        url = _flag(reader, DATABASE_URL, "--database-url", database_url)
        secret = reader.get(INGEST_SECRET) or reader.get(TRACKIO_INGEST_TOKEN)
        settings = cls(
            data_dir=directory,
            database_url=url or f"sqlite:///{directory / 'tuneplane.db'}",
            ingest_secret=Secret(secret) if secret else None,
            host=_flag(reader, HOST, "--host", host) or "127.0.0.1",
            port=_flag(reader, PORT, "--port", None if port is None else str(port)) or 8000,
            ingest_token_days=reader.read(INGEST_TOKEN_DAYS),
            ingest_url=reader.get(INGEST_URL),
            body_timeout=reader.read(BODY_TIMEOUT),
            default_visibility=reader.read(DEFAULT_VISIBILITY),
            frame_ancestors=reader.read(FRAME_ANCESTORS),
        )
        reader.done()
        return settings


def _flag(reader: Reader, setting: Setting[T], flag: str, value: str | None) -> T | None:
    """A flag's value under its variable's rule when it is given, else the variable's."""
    if value is None or value == "":
        return reader.get(setting)
    return reader.check(setting.rule, flag, value)


def _data_dir(reader: Reader, explicit: str | None) -> Path:
    """The data directory; a file in its place is refused now rather than by a traceback
    when the database is opened."""
    directory = resolve_data_dir(explicit, reader.environ)
    if directory.exists() and not directory.is_dir():
        label, raw = _data_dir_source(reader.environ, explicit, directory)
        reader.problems.append(f"{label}={raw!r}: must be a directory, not a file")
    return directory


def _data_dir_source(
    environ: Mapping[str, str], explicit: str | None, directory: Path
) -> tuple[str, str]:
    """Where the data directory came from: the flag, a variable or the default."""
    if explicit:
        return "--data-dir", explicit
    for name in DATA_DIR_VARIABLES:
        if environ.get(name):
            return name, environ[name]
    return "the data directory", str(directory)
