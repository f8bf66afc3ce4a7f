"""Server-side alert rules and webhooks: their wire format, rules and limits (docs/alerts.md).

A rule watches the runs of a project (or one run, ``run``). Its ``kind`` says what it
watches, with the fields of that kind::

    {"kind": "nan", "metric": "*loss*"}                              a NaN or infinite value
    {"kind": "threshold", "metric": "reward", "op": "below", "value": 0.1}
    {"kind": "change", "metric": "loss", "percent": 50, "window": 100, "direction": "up"}
    {"kind": "stall", "metric": "loss", "seconds": 600}              no point for that long
    {"kind": "heartbeat", "seconds": 30}                             the heartbeat went stale
    {"kind": "eval_drop", "points": 5, "baseline": {"run": "r0", "round_id": "val"}}

``metric`` is a glob pattern (``*``, ``?``, ``[...]``) matched against whole series names.
Every rule also has ``name``, ``level`` (``info``, ``warn``, ``error``) and ``enabled``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, get_args
from urllib.parse import urlsplit

from tuneplane.contract.arena import ALERT_LEVELS, AlertLevel
from tuneplane.contract.errors import InvalidInput, MalformedRequest, Violation
from tuneplane.contract.ids import id_problem, metric_name_problem
from tuneplane.contract.limits import (
    HEARTBEAT_INTERVAL_SECONDS,
    HEARTBEAT_STALE_INTERVALS,
    STEP_MAX,
)

RuleKind = Literal["nan", "threshold", "change", "stall", "heartbeat", "eval_drop"]
RULE_KINDS: Final[tuple[RuleKind, ...]] = get_args(RuleKind)
#: Kinds judged as points arrive, and the kinds a periodic check judges.
POINT_KINDS: Final = frozenset({"nan", "threshold", "change"})
TIMED_KINDS: Final = frozenset({"stall", "heartbeat"})
Op = Literal["above", "below"]
Direction = Literal["up", "down", "either"]
WebhookFormat = Literal["json", "slack"]
WEBHOOK_FORMATS: Final[tuple[WebhookFormat, ...]] = get_args(WebhookFormat)

#: Rules one project may hold (its runs' rules included), and webhooks.
RULES_PER_PROJECT_MAX: Final = 100
WEBHOOKS_PER_PROJECT_MAX: Final = 10
RULE_NAME_MAX_CHARS: Final = 128
WEBHOOK_URL_MAX_CHARS: Final = 2048
#: Longest stall or heartbeat duration, and widest change window.
DURATION_MAX_SECONDS: Final = 30 * 86400.0
WINDOW_MAX_STEPS: Final = 10**12
#: The stale-heartbeat default: the SDK's health is unknown after this long.
HEARTBEAT_STALE_SECONDS: Final = HEARTBEAT_INTERVAL_SECONDS * HEARTBEAT_STALE_INTERVALS
#: Webhook delivery: attempts in all, seconds one may take, longest wait between two.
WEBHOOK_ATTEMPTS: Final = 5
WEBHOOK_TIMEOUT_SECONDS: Final = 10.0
WEBHOOK_BACKOFF_MAX_SECONDS: Final = 300.0
#: The signature header: ``sha256=<hex HMAC-SHA256 of the body with the webhook's secret>``.
SIGNATURE_HEADER: Final = "X-Tuneplane-Signature"
WEBHOOK_SECRET_PREFIX: Final = "whsec_"  # noqa: S105 - a prefix, not a secret

_FIELDS: Final = {
    "nan": ("metric",),
    "threshold": ("metric", "op", "value"),
    "change": ("metric", "percent", "window", "direction"),
    "stall": ("metric", "seconds"),
    "heartbeat": ("seconds",),
    "eval_drop": ("points", "baseline", "round_id"),
}
_COMMON: Final = frozenset({"name", "kind", "level", "enabled", "run"})
_ALL_FIELDS: Final = _COMMON | {name for names in _FIELDS.values() for name in names}


@dataclass(frozen=True, slots=True)
class Baseline:
    """The evaluation round an ``eval_drop`` rule compares with."""

    run: str
    round_id: str
    #: Its execution attempt; None: the latest that reported outcomes.
    attempt: int | None = None


@dataclass(frozen=True, slots=True)
class RuleSpec:
    kind: RuleKind
    name: str
    level: AlertLevel
    enabled: bool = True
    run: str | None = None
    metric: str | None = None
    op: Op | None = None
    value: float | None = None
    percent: float | None = None
    window: int | None = None
    direction: Direction | None = None
    seconds: float | None = None
    points: float | None = None
    baseline: Baseline | None = None
    #: eval_drop: judge only rounds with this ID (None: every round).
    round_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": self.kind,
            "name": self.name,
            "level": self.level,
            "enabled": self.enabled,
            "run": self.run,
        }
        for name in _FIELDS[self.kind]:
            value = getattr(self, name)
            if isinstance(value, Baseline):
                value = {"run": value.run, "round_id": value.round_id, "attempt": value.attempt}
            body[name] = value
        return body


def _default_name(body: Mapping[str, Any], kind: str) -> str:
    subject = body.get("metric") if isinstance(body.get("metric"), str) else None
    return f"{kind} {subject}" if subject else kind


@dataclass(slots=True)
class _Reader:
    """Reads a rule's fields, noting each broken rule with its field."""

    body: Mapping[str, Any]
    kind: str
    violations: list[Violation] = field(default_factory=list)

    def bad(self, name: str, rule: str) -> None:
        self.violations.append(Violation(name, f"{rule} (a {self.kind} rule)"))

    def number(self, name: str, low: float, high: float, *, default: float | None = None) -> Any:
        value = self.body.get(name, default)
        if value is None:
            self.bad(name, "required")
            return None
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or not low < value <= high:
            self.bad(name, f"must be a finite number greater than {low:g} and at most {high:g}")
            return None
        return float(value)

    def choice(self, name: str, choices: tuple[str, ...], default: str | None = None) -> Any:
        value = self.body.get(name, default)
        if value not in choices:
            self.bad(name, "must be " + " or ".join(choices))
            return None
        return value


def _metric(reader: _Reader) -> str | None:
    value = reader.body.get("metric")
    if not isinstance(value, str) or metric_name_problem(value):
        reader.bad("metric", "must be a glob pattern of 1-128 printable characters")
        return None
    return value


def _baseline(reader: _Reader) -> Baseline | None:
    value = reader.body.get("baseline")
    if not isinstance(value, dict):
        reader.bad("baseline", "must be an object with run, round_id and optionally attempt")
        return None
    found = []
    for key in ("run", "round_id"):
        problem = id_problem(value.get(key))
        if problem:
            reader.bad(f"baseline.{key}", "required" if value.get(key) is None else problem)
        found.append(value.get(key))
    attempt = value.get("attempt")
    if attempt is not None and (type(attempt) is not int or not 1 <= attempt <= 2**31 - 1):
        reader.bad("baseline.attempt", "must be an execution attempt (an integer from 1) or null")
    if reader.violations:
        return None
    return Baseline(str(found[0]), str(found[1]), attempt)


def _kind_fields(reader: _Reader) -> dict[str, Any]:
    kind, body = reader.kind, reader.body
    found: dict[str, Any] = {}
    if kind in ("nan", "threshold", "change", "stall"):
        found["metric"] = _metric(reader)
    if kind == "threshold":
        found["op"] = reader.choice("op", ("above", "below"))
        value = body.get("value")
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            reader.bad("value", "required: a finite number")
        else:
            found["value"] = float(value)
    elif kind == "change":
        found["percent"] = reader.number("percent", 0, 1e9)
        window = body.get("window")
        if type(window) is not int or not 1 <= window <= WINDOW_MAX_STEPS:
            reader.bad("window", f"must be a whole number of steps from 1 to {WINDOW_MAX_STEPS:,}")
        else:
            found["window"] = window
        found["direction"] = reader.choice("direction", ("up", "down", "either"), "either")
    elif kind == "stall":
        found["seconds"] = reader.number("seconds", 0, DURATION_MAX_SECONDS)
    elif kind == "heartbeat":
        default = HEARTBEAT_STALE_SECONDS
        found["seconds"] = reader.number("seconds", 0, DURATION_MAX_SECONDS, default=default)
    elif kind == "eval_drop":
        found["points"] = reader.number("points", 0, 100)
        found["baseline"] = _baseline(reader)
        if body.get("round_id") is not None:
            problem = id_problem(body.get("round_id"))
            if problem:
                reader.bad("round_id", problem + " or null (every round)")
            found["round_id"] = body.get("round_id")
    return found


def parse_rule(body: object) -> RuleSpec:
    """A rule from its JSON; :class:`InvalidInput` names every broken field.

    >>> parse_rule({"kind": "threshold", "metric": "reward", "op": "below", "value": 0}).name
    'threshold reward'
    """
    if not isinstance(body, dict):
        raise MalformedRequest("body: must be a JSON object describing an alert rule")
    kind = body.get("kind")
    if kind not in RULE_KINDS:
        raise InvalidInput((Violation("kind", "must be " + ", ".join(RULE_KINDS)),))
    reader = _Reader(body, kind)
    allowed = _COMMON | set(_FIELDS[kind])
    for name in sorted(set(body) - allowed):
        known = name in _ALL_FIELDS
        reader.bad(name, "does not apply" if known else "unknown field")
    name = body.get("name", _default_name(body, kind))
    if not isinstance(name, str) or not 1 <= len(name) <= RULE_NAME_MAX_CHARS:
        reader.bad("name", f"must be 1-{RULE_NAME_MAX_CHARS} characters")
    elif not name.isprintable():
        reader.bad("name", "must be printable characters")
    default_level = "error" if kind in ("nan", "heartbeat") else "warn"
    level = reader.choice("level", ALERT_LEVELS, default_level)
    enabled = body.get("enabled", True)
    if not isinstance(enabled, bool):
        reader.bad("enabled", "must be true or false")
    run = body.get("run")
    if run is not None and id_problem(run):
        reader.bad("run", f"{id_problem(run)}, or null for every run of the project")
    found = _kind_fields(reader)
    if reader.violations:
        raise InvalidInput(tuple(reader.violations))
    return RuleSpec(kind=kind, name=name, level=level, enabled=enabled, run=run, **found)


def merge_rule(stored: Mapping[str, Any], change: object) -> RuleSpec:
    """A rule changed by a PATCH body (its fields replace the stored ones; ``kind`` stays)."""
    if not isinstance(change, dict):
        raise MalformedRequest("body: must be a JSON object with the fields to change")
    if "kind" in change and change["kind"] != stored["kind"]:
        raise InvalidInput((Violation("kind", "cannot change: make a new rule"),))
    merged = {key: value for key, value in stored.items() if value is not None}
    merged.update(change)
    return parse_rule({key: value for key, value in merged.items() if value is not None})


#: Every new project starts with these (docs/alerts.md): a NaN or infinite loss, and a
#: heartbeat gone stale.
DEFAULT_RULES: Final = (
    RuleSpec(kind="nan", name="loss is NaN or infinite", level="error", metric="*loss*"),
    RuleSpec(
        kind="heartbeat",
        name="heartbeat stale",
        level="error",
        seconds=HEARTBEAT_STALE_SECONDS,
    ),
)


@dataclass(frozen=True, slots=True)
class WebhookSpec:
    url: str
    format: WebhookFormat
    name: str


def parse_webhook(body: object) -> WebhookSpec:
    """A webhook from its JSON: ``{"url": "https://…", "format": "json"|"slack", "name"}``."""
    if not isinstance(body, dict):
        raise MalformedRequest("body: must be a JSON object with url, format and name")
    violations = [
        Violation(name, "unknown field") for name in sorted(set(body) - {"url", "format", "name"})
    ]
    url = body.get("url")
    parts = urlsplit(url) if isinstance(url, str) else None
    if (
        parts is None
        or len(url) > WEBHOOK_URL_MAX_CHARS  # type: ignore[arg-type]
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or not url.isprintable()  # type: ignore[union-attr]
        or " " in url  # type: ignore[operator]
    ):
        violations.append(
            Violation(
                "url",
                f"must be an http:// or https:// URL of at most {WEBHOOK_URL_MAX_CHARS} characters",
            )
        )
    kind = body.get("format", "json")
    if kind not in WEBHOOK_FORMATS:
        violations.append(Violation("format", 'must be json or slack (a {"text": …} body)'))
    name = body.get("name", "webhook")
    if (
        not isinstance(name, str)
        or not 1 <= len(name) <= RULE_NAME_MAX_CHARS
        or not name.isprintable()
    ):
        violations.append(
            Violation("name", f"must be 1-{RULE_NAME_MAX_CHARS} printable characters")
        )
    if violations:
        raise InvalidInput(tuple(violations))
    return WebhookSpec(url=url, format=kind, name=name)  # type: ignore[arg-type]


__all__ = [
    "DEFAULT_RULES",
    "RULE_KINDS",
    "STEP_MAX",
    "Baseline",
    "RuleSpec",
    "WebhookSpec",
    "merge_rule",
    "parse_rule",
    "parse_webhook",
]


@dataclass(frozen=True, slots=True)
class Rule:
    """A stored rule: its id, what it says, and the one run it is limited to (if any)."""

    id: int
    spec: RuleSpec
    run_id: int | None = None

    def applies_to(self, run_id: int) -> bool:
        return self.run_id is None or self.run_id == run_id


@dataclass(frozen=True, slots=True)
class Transition:
    """An episode of ``rule_id`` on ``subject`` opens (``opens``) or resolves."""

    rule_id: int
    subject: str
    opens: bool
    title: str
    text: str
    step: int | None = None
