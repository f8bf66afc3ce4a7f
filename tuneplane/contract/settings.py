"""Settings read from the environment: one declaration each, checked at start.

A :class:`Setting` names its variable, its default, its help text and the :class:`Rule` its
value follows. The server, the runner and the SDK read every variable through one, so a bad
value is refused the same way everywhere: one line naming the variable, the value and what
is allowed, before anything runs::

    TUNEPLANE_INGEST_TOKEN_DAYS='nan': must be a finite number of days greater than 0 and
    at most 3650

An empty variable counts as unset. Secrets never print: their line says ``(value hidden)``,
and a URL's password is masked.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Generic, TypeVar
from urllib.parse import urlsplit

from tuneplane.contract.ids import ID_RULE, id_problem

T = TypeVar("T")

#: ASCII digits only: ``int()`` would also take ``1_000``, ``٣`` and surrounding spaces.
_INTEGER: Final = re.compile(r"[+-]?[0-9]+", re.ASCII)
#: Printable ASCII without spaces: what survives an HTTP header or a URL unchanged.
_VISIBLE_ASCII: Final = re.compile(r"[!-~]+", re.ASCII)
_URL_PASSWORD: Final = re.compile(r"(//[^/@:]*:)[^/@]*@")
#: Host names, IPv4 and IPv6 addresses (as uvicorn takes them, without brackets).
_HOST: Final = re.compile(r"[A-Za-z0-9._:%-]{1,253}", re.ASCII)
_DATABASE_URL: Final = re.compile(r"(sqlite:///|postgresql(\+psycopg)?://)\S+", re.ASCII)


class SettingError(ValueError):
    """One or more settings break their rule; each problem is one line, ready to print."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True, slots=True)
class Rule(Generic[T]):
    """What a value may be. ``parse`` answers the value, or None when it breaks the rule;
    ``allowed`` says what is allowed (``must be …``)."""

    allowed: str
    parse: Callable[[str], T | None]
    #: Never print the value (credentials).
    secret: bool = False

    def check(self, label: str, raw: str) -> T:
        """``raw`` read under ``label`` (a variable or a flag); :class:`SettingError`
        with one line naming both when it breaks the rule."""
        value = self.parse(raw)
        if value is None:
            raise SettingError([f"{label}{self.show(raw)}: {self.allowed}"])
        return value

    def show(self, raw: str) -> str:
        if self.secret:
            return " (value hidden)"
        return "=" + repr(_URL_PASSWORD.sub(r"\1***@", raw))


@dataclass(frozen=True, slots=True)
class Setting(Generic[T]):
    """One environment variable: its name, rule, default (None: unset means none) and
    help. ``default_text`` is the default as the documentation shows it."""

    name: str
    rule: Rule[T]
    default: T | None
    help: str
    default_text: str = ""

    def get(self, environ: Mapping[str, str]) -> T | None:
        """The value in ``environ``, or the default when it is unset or empty."""
        raw = environ.get(self.name, "")
        return self.default if raw == "" else self.rule.check(self.name, raw)

    def read(self, environ: Mapping[str, str]) -> T:
        """As :meth:`get`, for a setting that has a default."""
        value = self.get(environ)
        if value is None:
            raise TypeError(f"{self.name} has no default")
        return value

    @property
    def shown_default(self) -> str:
        if self.default_text:
            return self.default_text
        return "unset" if self.default is None else str(self.default)


class Reader:
    """Reads several settings and reports every bad one at once::

    reader = Reader(os.environ)
    port = reader.read(PORT)
    reader.done()  # SettingError listing each bad value, one line each
    """

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.problems: list[str] = []

    def get(self, setting: Setting[T]) -> T | None:
        try:
            return setting.get(self.environ)
        except SettingError as exc:
            self.problems.extend(exc.problems)
            return setting.default

    def read(self, setting: Setting[T]) -> T:
        value = self.get(setting)
        if value is None:
            raise TypeError(f"{setting.name} has no default")
        return value

    def check(self, rule: Rule[T], label: str, raw: str) -> T | None:
        """A command-line flag's value under the same rule as its variable."""
        try:
            return rule.check(label, raw)
        except SettingError as exc:
            self.problems.extend(exc.problems)
            return None

    def done(self) -> None:
        if self.problems:
            # A setting read twice (the runner checks its command's settings, then reads
            # some of them itself) is said once.
            raise SettingError(dict.fromkeys(self.problems))


# -- rules -----------------------------------------------------------------------------------


def integer(low: int, high: int, unit: str = "") -> Rule[int]:
    """A whole number from ``low`` to ``high``."""
    what = f"a whole number of {unit}" if unit else "a whole number"

    def parse(raw: str) -> int | None:
        if _INTEGER.fullmatch(raw) is None:
            return None
        value = int(raw)
        return value if low <= value <= high else None

    return Rule(f"must be {what} from {low} to {high}", parse)


def number(unit: str, high: float, *, zero: bool) -> Rule[float]:
    """A finite number of ``unit`` at most ``high``; from 0 when ``zero`` is allowed,
    greater than 0 otherwise."""
    lowest = "from 0 to" if zero else "greater than 0 and at most"

    def parse(raw: str) -> float | None:
        try:
            value = float(raw)
        except ValueError:
            return None
        if not math.isfinite(value) or value > high or value < 0 or (value == 0 and not zero):
            return None
        return value

    return Rule(f"must be a finite number of {unit} {lowest} {high:g}", parse)


def _visible(raw: str) -> str | None:
    return raw if _VISIBLE_ASCII.fullmatch(raw) else None


def text(allowed: str = "must be printable ASCII without spaces") -> Rule[str]:
    """Printable ASCII without spaces (a path may hold anything, see :data:`PATH`)."""
    return Rule(allowed, _visible)


def credential(prefix: str, what: str) -> Rule[str]:
    """A secret, never printed; it starts with ``prefix`` when one is given."""

    def parse(raw: str) -> str | None:
        return raw if _visible(raw) and raw.startswith(prefix) else None

    if prefix:
        return Rule(f"must be {what} ({prefix}…, printable ASCII)", parse, secret=True)
    return Rule(f"must be {what} (printable ASCII without spaces)", parse, secret=True)


def _http_url(raw: str) -> str | None:
    if _visible(raw) is None:
        return None
    try:
        parts = urlsplit(raw)
        parts.port  # noqa: B018 (raises ValueError when the port is not a number)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    if parts.query or parts.fragment:
        return None
    return raw


#: A server's base URL.
HTTP_URL: Final = Rule("must be an http:// or https:// URL such as http://host:8000", _http_url)

#: A listen address.
HOST: Final = Rule(
    "must be a host name or an IP address such as 0.0.0.0",
    lambda raw: raw if _HOST.fullmatch(raw) else None,
)

#: A TCP port to listen on.
PORT: Final = integer(1, 65535)

#: Where the server stores everything.
DATABASE_URL: Final = Rule(
    "must be sqlite:///PATH or postgresql://user@host/db",
    lambda raw: raw if _DATABASE_URL.fullmatch(raw) else None,
)

#: A file system path: anything the environment can hold (checked where it is used).
PATH: Final = Rule("must be a path", lambda raw: raw)


def _run_id(raw: str) -> str | None:
    project, slash, run = raw.partition("/")
    if not slash or id_problem(project) is not None or id_problem(run) is not None:
        return None
    return raw


#: ``project/run``.
RUN_ID: Final = Rule(
    f"must be 'project/run', each part {ID_RULE.removeprefix('must be ')}",
    _run_id,
)
