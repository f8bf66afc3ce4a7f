"""Server settings: declared once, read once at startup, passed down as a value object."""

from __future__ import annotations

import hmac
import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar
from urllib.parse import urlsplit

from tuneplane.contract import oidc, outbound
from tuneplane.contract import settings as rules
from tuneplane.contract.access import Visibility
from tuneplane.contract.datadir import (
    DATA_DIR,
    DATA_DIR_VARIABLES,
    TRACKIO_DIR,
    resolve_data_dir,
)
from tuneplane.contract.launch import (
    GPUS_MAX,
    LAUNCH_MAX_GPUS_DEFAULT,
    LAUNCH_MAX_JOBS_DEFAULT,
)
from tuneplane.contract.limits import (
    BODY_TIMEOUT_SECONDS_DEFAULT,
    BODY_TIMEOUT_SECONDS_MAX,
    INGEST_TOKEN_DAYS_DEFAULT,
    INGEST_TOKEN_DAYS_MAX,
    LOST_HEARTBEAT_SECONDS_DEFAULT,
    SWEEP_INTERVAL_SECONDS_DEFAULT,
    TRAJECTORY_DAYS_DEFAULT,
)
from tuneplane.contract.settings import (
    HTTP_URL,
    Reader,
    Setting,
    credential,
    integer,
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

    def reveal(self) -> str:
        """The value itself, for the one library call that must send it."""
        return self._value.decode()

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

#: A reverse proxy's address, or a network of them.
ProxyNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def _trusted_proxies(raw: str) -> tuple[ProxyNetwork, ...] | None:
    try:
        # strict: 10.0.0.1/8 is refused rather than guessed to mean 10.0.0.0/8.
        return tuple(ipaddress.ip_network(item.strip()) for item in raw.split(","))
    except ValueError:
        return None


TRUSTED_PROXIES: Final[Setting[tuple[ProxyNetwork, ...]]] = Setting(
    "TUNEPLANE_TRUSTED_PROXIES",
    rules.Rule(
        "must be IP addresses or networks such as 127.0.0.1 or 10.0.0.0/8, comma-separated",
        _trusted_proxies,
    ),
    None,
    "The reverse proxies whose X-Forwarded-For and X-Forwarded-Proto headers are believed, "
    "when a request comes straight from one: IP addresses or networks, comma-separated. "
    "Unset: none, so a request's address is its connection's whatever it says.",
)


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


def _blob_url(raw: str) -> str | None:
    if raw.startswith("s3://"):
        bucket = raw.removeprefix("s3://").partition("/")[0]
        return raw if _S3_BUCKET.fullmatch(bucket) else None
    return raw if raw.startswith(("/", "file:///")) else None


_S3_BUCKET: Final = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", re.ASCII)
BLOB_URL: Final = Setting(
    "TUNEPLANE_BLOB_URL",
    rules.Rule("must be s3://bucket/prefix or an absolute directory path", _blob_url),
    None,
    "Where trajectory bodies go: s3://bucket/prefix for an S3-compatible store (endpoint, "
    "region and credentials from AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID and "
    "AWS_SECRET_ACCESS_KEY), or a directory; unset: <data dir>/blobs.",
)
TRAJECTORY_DAYS: Final = Setting(
    "TUNEPLANE_TRAJECTORY_DAYS",
    number("days", 3650, zero=False),
    float(TRAJECTORY_DAYS_DEFAULT),
    "Days a trajectory body is kept after upload; then the sweeper deletes it (its "
    "result counts and metadata stay).",
    default_text=str(TRAJECTORY_DAYS_DEFAULT),
)
SWEEP_INTERVAL: Final = Setting(
    "TUNEPLANE_SWEEP_INTERVAL",
    number("seconds", 86400, zero=False),
    SWEEP_INTERVAL_SECONDS_DEFAULT,
    "Seconds between two sweeps that physically delete expired and deleted trajectory bodies.",
    default_text=f"{SWEEP_INTERVAL_SECONDS_DEFAULT:g}",
)


ALERT_CHECK_INTERVAL: Final = Setting(
    "TUNEPLANE_ALERT_CHECK_INTERVAL",
    number("seconds", 3600, zero=False),
    10.0,
    "Seconds between two checks of the time-based alert rules (a series that stopped "
    "arriving, a stale heartbeat); the other rules are judged as points arrive.",
    default_text="10",
)
WEBHOOK_RETRY: Final = Setting(
    "TUNEPLANE_WEBHOOK_RETRY_SECONDS",
    number("seconds", 300, zero=False),
    10.0,
    "Seconds before a failed webhook delivery is tried again, doubled after each failure "
    "(at most 300 s between two tries, 5 tries in all).",
    default_text="10",
)


def _on_off(raw: str) -> bool | None:
    return True if raw == "on" else False if raw == "off" else None


#: The first segments of the server's own paths (its routes and ``/static``; a test holds
#: this to the app's routes): a prefix starting with one would be ambiguous (prefix.py).
SERVER_SEGMENTS: Final = frozenset(
    {"account", "api", "compare", "docs", "healthz", "ingest", "livez", "matched",
     "openapi.json", "projects", "reports", "shared", "sign-in", "static", "version",
     "welcome"}
)  # fmt: skip
_PATH_SEGMENT: Final = re.compile(r"[A-Za-z0-9_~-][A-Za-z0-9._~-]*", re.ASCII)


def _root_path(raw: str) -> str | None:
    """``/a/b`` (one trailing slash is dropped; ``/`` alone is the host's root)."""
    if not raw.startswith("/") or len(raw) > 200:
        return None
    segments = raw.removesuffix("/").split("/")[1:]
    if not all(_PATH_SEGMENT.fullmatch(segment) for segment in segments):
        return None
    if segments and segments[0] in SERVER_SEGMENTS:
        return None
    return "".join(f"/{segment}" for segment in segments)


ROOT_PATH: Final = Setting(
    "TUNEPLANE_ROOT_PATH",
    rules.Rule(
        "must be a path such as /tuneplane (letters, digits, - _ . ~ between slashes) that "
        "does not start with one of the server's own (/api, /static, /projects, …)",
        _root_path,
    ),
    "",
    "The path prefix a reverse proxy publishes the server under (https://host/tuneplane/ "
    "is /tuneplane), whether the proxy strips it or not: every page, asset, API call, "
    "stream, cookie and redirect then carries it. Requests without it are still answered.",
    default_text="unset",
)
OUTBOUND_ALLOW: Final[Setting[outbound.AllowList]] = Setting(
    "TUNEPLANE_OUTBOUND_ALLOW",
    rules.Rule(outbound.ALLOW_RULE, outbound.parse_allow_list),
    None,
    "Internal targets webhooks and TUNEPLANE_DIAGNOSIS_URL may call: networks, addresses "
    "and host names, comma-separated (a listed name is called whatever it resolves to). "
    "Unset: public addresses only.",
    default_text="unset",
)

TRACKIO_IMPORT: Final = Setting(
    "TUNEPLANE_TRACKIO_IMPORT",
    rules.Rule("must be on or off", _on_off),
    True,
    "on: when the data directory holds Trackio project databases (<project>.db, as with "
    "TRACKIO_DIR=/data/trackio), the server imports them in the background on every start; "
    "what is stored already is skipped. off: it never reads them.",
    default_text="on",
)

DIAGNOSIS_URL: Final = Setting(
    "TUNEPLANE_DIAGNOSIS_URL",
    HTTP_URL,
    None,
    "An OpenAI-compatible API (its base URL, e.g. http://llm:8000/v1) that writes an "
    "explanation beside the rule findings of each diagnosis; unset: rule findings only.",
)
DIAGNOSIS_MODEL: Final = Setting(
    "TUNEPLANE_DIAGNOSIS_MODEL",
    rules.text("must be a model name: printable ASCII without spaces"),
    None,
    "The model TUNEPLANE_DIAGNOSIS_URL is asked for (required with it).",
)
DIAGNOSIS_KEY: Final = Setting(
    "TUNEPLANE_DIAGNOSIS_KEY",
    credential("", "an API key"),
    None,
    "The bearer key of TUNEPLANE_DIAGNOSIS_URL, when it wants one (never printed).",
)
LOST_HEARTBEAT: Final = Setting(
    "TUNEPLANE_LOST_HEARTBEAT_SECONDS",
    number("seconds", 86400, zero=False),
    LOST_HEARTBEAT_SECONDS_DEFAULT,
    "Seconds without a heartbeat after which a running attempt is diagnosed as lost (its "
    "status stays what it was: unknown health is not a failure).",
    default_text=f"{LOST_HEARTBEAT_SECONDS_DEFAULT:g}",
)


def _directory(raw: str) -> Path | None:
    path = Path(raw)
    return path.resolve() if path.is_absolute() and path.is_dir() else None


RECIPES_DIR: Final = Setting(
    "TUNEPLANE_RECIPES_DIR",
    rules.Rule("must be the absolute path of an existing directory", _directory),
    None,
    "The directory of launch recipes (*.toml or *.json, docs/launch.md), read at start: a "
    "recipe with a problem stops the server with one line per problem. Unset: no recipes, "
    "nothing can be launched.",
)
LAUNCH_MAX_JOBS: Final = Setting(
    "TUNEPLANE_LAUNCH_MAX_JOBS",
    integer(1, 100_000, "jobs"),
    LAUNCH_MAX_JOBS_DEFAULT,
    "Jobs launched through the server that may be pending or running in one project at "
    "once; a submission beyond it is refused (429).",
)
RAY_ADDRESS: Final = Setting(
    "TUNEPLANE_RAY_ADDRESS",
    HTTP_URL,
    None,
    "The Ray cluster's dashboard address, such as http://ray-head:8265, where its job "
    'submission API is: recipes with engine = "ray" run there. Unset: no Ray engine.',
)
LAUNCH_MAX_GPUS: Final = Setting(
    "TUNEPLANE_LAUNCH_MAX_GPUS",
    integer(0, GPUS_MAX, "GPUs"),
    LAUNCH_MAX_GPUS_DEFAULT,
    "GPUs the pending and running launched jobs of one project may ask for together; a "
    "submission beyond it is refused (429).",
)


def _slurm_conf(raw: str) -> str | None:
    if raw == "default":
        return raw
    path = Path(raw)
    return str(path.resolve()) if path.is_absolute() and path.is_file() else None


SLURM_CONF: Final = Setting(
    "TUNEPLANE_SLURM_CONF",
    rules.Rule("must be default or the absolute path of an existing slurm.conf", _slurm_conf),
    None,
    'The Slurm cluster recipes with engine = "slurm" run on: its slurm.conf (given to '
    "sbatch, squeue, scontrol, sacct, scancel and sinfo as SLURM_CONF), or default for the "
    "commands' own. Unset: no Slurm engine.",
)
SLURM_PARTITION: Final = Setting(
    "TUNEPLANE_SLURM_PARTITION",
    rules.text("must be a partition name: printable ASCII without spaces"),
    None,
    "The partition Slurm jobs are submitted to and fleet fit reads (with "
    "TUNEPLANE_SLURM_CONF). Unset: the cluster's default partition.",
)


OIDC_ISSUER: Final = Setting(
    "TUNEPLANE_OIDC_ISSUER",
    rules.Rule(
        "must be an https:// URL (http:// only on a loopback address) without query or "
        "fragment, such as https://accounts.google.com",
        oidc.parse_issuer,
    ),
    None,
    "OpenID Connect issuer for single sign-on; its discovery document is read from "
    "<issuer>/.well-known/openid-configuration. Unset: local accounts only.",
)
OIDC_CLIENT_ID: Final = Setting(
    "TUNEPLANE_OIDC_CLIENT_ID",
    rules.text(),
    None,
    "The client ID this server has at the OpenID Connect provider.",
)
OIDC_CLIENT_SECRET: Final = Setting(
    "TUNEPLANE_OIDC_CLIENT_SECRET",
    credential("", "a client secret"),
    None,
    "The client secret that goes with TUNEPLANE_OIDC_CLIENT_ID (never printed).",
)
OIDC_ALLOWED_DOMAINS: Final = Setting(
    "TUNEPLANE_OIDC_ALLOWED_DOMAINS",
    rules.Rule(
        "must be e-mail domains such as example.com, comma-separated, or *",
        oidc.parse_domains,
    ),
    None,
    "Accounts whose verified e-mail is at one of these domains may sign in (* admits "
    "everyone the provider signs in).",
)
OIDC_ALLOWED_ORGS: Final = Setting(
    "TUNEPLANE_OIDC_ALLOWED_ORGS",
    rules.Rule(
        "must be organisation or group names without spaces, comma-separated, or *",
        oidc.parse_orgs,
    ),
    None,
    "Accounts in one of these organisations or groups (the TUNEPLANE_OIDC_ORG_CLAIM claim) "
    "may sign in (* admits everyone the provider signs in).",
)
OIDC_ORG_CLAIM: Final = Setting(
    "TUNEPLANE_OIDC_ORG_CLAIM",
    rules.Rule(
        "must be a claim name of letters, digits, _ : . or -",
        lambda raw: raw if re.fullmatch(r"[A-Za-z0-9_:.-]{1,64}", raw, re.ASCII) else None,
    ),
    "groups",
    "The claim that lists an account's organisations or groups (orgs at Hugging Face).",
)
OIDC_NAME: Final = Setting(
    "TUNEPLANE_OIDC_NAME",
    rules.Rule(
        "must be 1-40 printable characters",
        lambda raw: raw if len(raw) <= 40 and raw.isprintable() and raw.strip() else None,
    ),
    None,
    'The provider\'s name on the sign-in button ("Sign in with <name>"); unset: the '
    "issuer's host name.",
)
_OIDC_SETTINGS: Final = (
    OIDC_ISSUER,
    OIDC_CLIENT_ID,
    OIDC_CLIENT_SECRET,
    OIDC_ALLOWED_DOMAINS,
    OIDC_ALLOWED_ORGS,
    OIDC_ORG_CLAIM,
    OIDC_NAME,
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
    TRUSTED_PROXIES,
    ROOT_PATH,
    BODY_TIMEOUT,
    DEFAULT_VISIBILITY,
    FRAME_ANCESTORS,
    BLOB_URL,
    TRAJECTORY_DAYS,
    SWEEP_INTERVAL,
    ALERT_CHECK_INTERVAL,
    WEBHOOK_RETRY,
    OUTBOUND_ALLOW,
    TRACKIO_IMPORT,
    DIAGNOSIS_URL,
    DIAGNOSIS_MODEL,
    DIAGNOSIS_KEY,
    LOST_HEARTBEAT,
    SLURM_CONF,
    SLURM_PARTITION,
    RECIPES_DIR,
    LAUNCH_MAX_JOBS,
    LAUNCH_MAX_GPUS,
    RAY_ADDRESS,
    *_OIDC_SETTINGS,
)


@dataclass(frozen=True, slots=True)
class OidcSettings:
    """Single sign-on with one OpenID Connect provider."""

    issuer: str
    client_id: str
    client_secret: Secret
    allow: oidc.AllowList
    org_claim: str = "groups"
    name: str = ""


@dataclass(frozen=True, slots=True)
class SlurmSettings:
    """The Slurm cluster launched jobs may run on."""

    #: Its slurm.conf; None: the commands' own default.
    conf: Path | None
    partition: str | None = None


@dataclass(frozen=True, slots=True)
class DiagnosisSettings:
    """The optional language model that explains a diagnosis."""

    url: str
    model: str
    key: Secret | None = None


@dataclass(frozen=True, slots=True)
class Settings:
    data_dir: Path
    database_url: str
    ingest_secret: Secret | None
    host: str = "127.0.0.1"
    port: int = 8000
    root_path: str = ""
    ingest_token_days: float = INGEST_TOKEN_DAYS_DEFAULT
    ingest_url: str | None = None
    body_timeout: float = BODY_TIMEOUT_SECONDS_DEFAULT
    default_visibility: Visibility = "private"
    frame_ancestors: str = "'self'"
    oidc: OidcSettings | None = None
    blob_url: str | None = None
    trajectory_days: float = TRAJECTORY_DAYS_DEFAULT
    sweep_interval: float = SWEEP_INTERVAL_SECONDS_DEFAULT
    alert_check_interval: float = 10.0
    webhook_retry: float = 10.0
    #: Internal targets outbound calls may reach (contract/outbound.py).
    outbound_allow: outbound.AllowList = outbound.PUBLIC_ONLY
    trackio_import: bool = True
    diagnosis: DiagnosisSettings | None = None
    lost_heartbeat: float = LOST_HEARTBEAT_SECONDS_DEFAULT
    trusted_proxies: tuple[ProxyNetwork, ...] = ()
    slurm: SlurmSettings | None = None
    #: Launch recipes (launch/recipes.py) and the admission policy of launched jobs.
    recipes_dir: Path | None = None
    launch_max_jobs: int = LAUNCH_MAX_JOBS_DEFAULT
    launch_max_gpus: int = LAUNCH_MAX_GPUS_DEFAULT
    ray_address: str | None = None

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        data_dir: str | None = None,
        database_url: str | None = None,
        host: str | None = None,
        port: int | str | None = None,
        root_path: str | None = None,
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
            root_path=_flag(reader, ROOT_PATH, "--root-path", root_path) or "",
            ingest_token_days=reader.read(INGEST_TOKEN_DAYS),
            ingest_url=reader.get(INGEST_URL),
            body_timeout=reader.read(BODY_TIMEOUT),
            default_visibility=reader.read(DEFAULT_VISIBILITY),
            frame_ancestors=reader.read(FRAME_ANCESTORS),
            oidc=_oidc(reader),
            blob_url=reader.get(BLOB_URL),
            trajectory_days=reader.read(TRAJECTORY_DAYS),
            sweep_interval=reader.read(SWEEP_INTERVAL),
            alert_check_interval=reader.read(ALERT_CHECK_INTERVAL),
            webhook_retry=reader.read(WEBHOOK_RETRY),
            outbound_allow=reader.get(OUTBOUND_ALLOW) or outbound.PUBLIC_ONLY,
            trackio_import=reader.read(TRACKIO_IMPORT),
            diagnosis=_diagnosis(reader),
            lost_heartbeat=reader.read(LOST_HEARTBEAT),
            trusted_proxies=reader.get(TRUSTED_PROXIES) or (),
            slurm=_slurm(reader),
            recipes_dir=reader.get(RECIPES_DIR),
            launch_max_jobs=reader.read(LAUNCH_MAX_JOBS),
            launch_max_gpus=reader.read(LAUNCH_MAX_GPUS),
            ray_address=reader.get(RAY_ADDRESS),
        )
        reader.done()
        return settings


def _slurm(reader: Reader) -> SlurmSettings | None:
    conf, partition = reader.get(SLURM_CONF), reader.get(SLURM_PARTITION)
    if conf is None:
        if partition is not None:
            reader.problems.append("TUNEPLANE_SLURM_PARTITION: set without TUNEPLANE_SLURM_CONF")
        return None
    return SlurmSettings(None if conf == "default" else Path(conf), partition)


def _diagnosis(reader: Reader) -> DiagnosisSettings | None:
    url, model, key = (reader.get(DIAGNOSIS_URL), reader.get(DIAGNOSIS_MODEL),
                       reader.get(DIAGNOSIS_KEY))  # fmt: skip
    if url is None:
        # Bad values are on the list already: only good ones lack their URL.
        given = [s.name for s, v in ((DIAGNOSIS_MODEL, model), (DIAGNOSIS_KEY, key)) if v]
        if given and not reader.environ.get(DIAGNOSIS_URL.name):
            reader.problems.append(f"{', '.join(given)}: set without TUNEPLANE_DIAGNOSIS_URL")
        return None
    if model is None:
        if not reader.environ.get(DIAGNOSIS_MODEL.name):
            reader.problems.append(
                "TUNEPLANE_DIAGNOSIS_URL is set: TUNEPLANE_DIAGNOSIS_MODEL must be too"
            )
        return None
    return DiagnosisSettings(url.rstrip("/"), model, Secret(key) if key else None)


def _oidc(reader: Reader) -> OidcSettings | None:
    """Single sign-on's settings, or None when no issuer is set. Half a configuration is
    refused, and so is an issuer with no allow-list: it would let in anyone the provider
    knows (a Google account, say) unless the operator says ``*``."""
    issuer, client_id, secret = (
        reader.get(OIDC_ISSUER),
        reader.get(OIDC_CLIENT_ID),
        reader.get(OIDC_CLIENT_SECRET),
    )
    domains, orgs = reader.get(OIDC_ALLOWED_DOMAINS), reader.get(OIDC_ALLOWED_ORGS)
    claim, name = reader.read(OIDC_ORG_CLAIM), reader.get(OIDC_NAME)
    if issuer is None:
        given = [s.name for s in _OIDC_SETTINGS[1:] if reader.environ.get(s.name)]
        if given and not reader.environ.get(OIDC_ISSUER.name):
            reader.problems.append(f"{', '.join(given)}: set without TUNEPLANE_OIDC_ISSUER")
        return None
    unset = [s.name for s in _OIDC_SETTINGS[1:3] if not reader.environ.get(s.name)]
    if unset:
        reader.problems.append(f"TUNEPLANE_OIDC_ISSUER is set: {' and '.join(unset)} must be too")
    lists = _OIDC_SETTINGS[3:5]
    if not unset and not any(reader.environ.get(s.name) for s in lists):
        reader.problems.append(
            f"TUNEPLANE_OIDC_ISSUER is set: {' or '.join(s.name for s in lists)} must say who "
            "may sign in (* for anyone the provider signs in)"
        )
    if client_id is None or secret is None or (domains is None and orgs is None):
        return None  # a problem is on the list already
    allow = oidc.AllowList(domains or frozenset(), orgs or frozenset())
    host = urlsplit(issuer).hostname or issuer
    return OidcSettings(issuer, client_id, Secret(secret), allow, claim, name or host)


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
