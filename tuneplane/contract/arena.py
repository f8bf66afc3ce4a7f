"""The Arena worker-ingestion contract: ``POST /ingest`` bodies, validated into typed batches.

A body is a JSON object with ``logs`` and/or ``alerts`` lists describing one run::

    {"logs": [{"project": "p", "run": "r", "step": 1, "log_id": "e1",
               "metrics": {"reward": 0.75}, "config": {"submission_id": "s"}}]}

``parse_arena_batch`` checks every rule and reports each violation with its field path, so a
worker learns exactly what to fix; nothing of a rejected batch is stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

from tuneplane.contract.errors import Conflict, InvalidInput, Violation
from tuneplane.contract.ids import metric_name_problem
from tuneplane.contract.json_body import key_path, malformed
from tuneplane.contract.limits import (
    ALERT_TEXT_MAX_CHARS,
    ALERT_TITLE_MAX_CHARS,
    ARENA_BATCH_MAX_ITEMS,
    ARENA_EVENT_MAX_METRICS,
    OBSERVATION_BATCH_MAX,
)
from tuneplane.contract.validation import (
    NUL_RULE,
    STEP_RULE,
    FieldCheck,
    finite_float,
    is_step,
    number_rule,
)

AlertLevel = Literal["info", "warn", "error"]
ALERT_LEVELS: Final[tuple[AlertLevel, ...]] = ("info", "warn", "error")

#: The run config keys a worker may send, and their kinds.
CONFIG_STRING_KEYS: Final = (
    "participant",
    "submission_id",
    "run_id",
    "model",
    "model_revision",
    "recipe",
)
CONFIG_NUMBER_KEYS: Final = ("num_updates", "train_tasks")

#: A response names at most this many violations; the first is the message.
MAX_REPORTED_VIOLATIONS: Final = 20

Config = dict[str, str | int | float]


@dataclass(frozen=True, slots=True)
class ArenaLog:
    log_id: str
    step: int
    metrics: dict[str, float]


@dataclass(frozen=True, slots=True)
class ArenaAlert:
    alert_id: str
    title: str
    text: str | None
    level: AlertLevel
    step: int | None


@dataclass(frozen=True, slots=True)
class ArenaBatch:
    project: str
    run: str
    config: Config | None
    logs: tuple[ArenaLog, ...]
    alerts: tuple[ArenaAlert, ...]


class _Checker(FieldCheck):
    """Collects violations while the batch is walked once."""

    def config(self, path: str, value: object) -> Config | None:
        if value is None:
            return None
        if not isinstance(value, dict):
            self.add(path, "must be an object")
            return None
        config: Config = {}
        for key, item in value.items():
            if key in CONFIG_STRING_KEYS:
                if isinstance(item, str):
                    config[key] = item
                else:
                    self.add(key_path(path, key), "must be a string")
            elif key in CONFIG_NUMBER_KEYS:
                number = finite_float(item)
                if number is None or number < 0:
                    self.add(key_path(path, key), "must be a nonnegative finite number")
                else:
                    config[key] = item
            else:
                allowed = ", ".join(CONFIG_STRING_KEYS + CONFIG_NUMBER_KEYS)
                self.add(key_path(path, key), f"unknown config key (allowed: {allowed})")
        # An empty config says nothing about the run, so it is the same as none.
        return config or None


def _check_identity(check: _Checker, path: str, item: dict[str, Any], identity: list[str]) -> None:
    """Every item names the same project and run; ``identity`` holds the first seen."""
    for position, key in enumerate(("project", "run")):
        value = item.get(key)
        if check.id_at(f"{path}.{key}", value) is None:
            continue
        assert isinstance(value, str)
        if not identity[position]:
            identity[position] = value
        elif value != identity[position]:
            check.add(
                f"{path}.{key}",
                f"must equal {identity[position]!r}: a batch describes one {key}",
            )
    run_id = item.get("run_id")
    if run_id is not None and run_id != item.get("run"):
        check.add(f"{path}.run_id", "must equal run when present")


def _parse_log(check: _Checker, path: str, item: dict[str, Any]) -> ArenaLog | None:
    before = len(check.violations)
    log_id = item.get("log_id")
    check.id_at(f"{path}.log_id", log_id)
    step = item.get("step")
    if not is_step(step):
        check.add(f"{path}.step", "required" if step is None else STEP_RULE)
    raw_metrics = item.get("metrics")
    metrics: dict[str, float] = {}
    metrics_path = f"{path}.metrics"
    if not isinstance(raw_metrics, dict):
        check.add(metrics_path, "required" if raw_metrics is None else "must be an object")
    elif not 1 <= len(raw_metrics) <= ARENA_EVENT_MAX_METRICS:
        check.add(metrics_path, f"must hold 1-{ARENA_EVENT_MAX_METRICS} metrics")
    else:
        for name, value in raw_metrics.items():
            name_problem = metric_name_problem(name)
            if name_problem is not None:
                check.add(key_path(metrics_path, name), f"metric name {name_problem}")
                continue
            number = finite_float(value)
            if number is None:
                check.add(key_path(metrics_path, name), number_rule(value))
            else:
                metrics[name] = number
    if len(check.violations) != before:
        return None
    return ArenaLog(log_id=log_id, step=step, metrics=metrics)  # type: ignore[arg-type]


def _parse_alert(check: _Checker, path: str, item: dict[str, Any]) -> ArenaAlert | None:
    before = len(check.violations)
    alert_id = item.get("alert_id")
    check.id_at(f"{path}.alert_id", alert_id)
    title = item.get("title")
    if not isinstance(title, str) or not 1 <= len(title) <= ALERT_TITLE_MAX_CHARS:
        check.add(
            f"{path}.title",
            "required"
            if title is None
            else f"must be a string of 1-{ALERT_TITLE_MAX_CHARS} characters",
        )
    elif "\x00" in title:
        check.add(f"{path}.title", NUL_RULE)
    text = item.get("text")
    if text is not None and (not isinstance(text, str) or len(text) > ALERT_TEXT_MAX_CHARS):
        check.add(f"{path}.text", f"must be a string of at most {ALERT_TEXT_MAX_CHARS} characters")
    elif text is not None and "\x00" in text:
        check.add(f"{path}.text", NUL_RULE)
    level = item.get("level")
    if level not in ALERT_LEVELS:
        check.add(f"{path}.level", "must be one of info, warn, error")
    step = item.get("step")
    if step is not None and not is_step(step):
        check.add(f"{path}.step", f"{STEP_RULE}, or null")
    if len(check.violations) != before:
        return None
    return ArenaAlert(
        alert_id=alert_id,  # type: ignore[arg-type]
        title=title,  # type: ignore[arg-type]
        text=text,
        level=level,  # type: ignore[arg-type]
        step=step,
    )


def parse_alerts(body: object) -> tuple[ArenaAlert, ...]:
    """Validate ``POST /api/v1/ingest/alerts``: ``{"alerts": [...]}``, 1-32 alerts of the
    Arena's shape without ``project`` and ``run`` (the ingest token names the run). The SDK
    checks each alert with it before queueing. Raises like :func:`parse_arena_batch`."""
    if not isinstance(body, dict):
        raise malformed("must be a JSON object with 'alerts'")
    items = body.get("alerts")
    if not isinstance(items, list) or not 1 <= len(items) <= OBSERVATION_BATCH_MAX:
        raise InvalidInput(
            (Violation("alerts", f"must be a list of 1-{OBSERVATION_BATCH_MAX} alerts"),)
        )
    check = _Checker()
    alerts: list[ArenaAlert] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            check.add(f"alerts[{index}]", "must be an object")
        elif (alert := _parse_alert(check, f"alerts[{index}]", item)) is not None:
            alerts.append(alert)
    if check.violations:
        raise InvalidInput(tuple(check.violations[:MAX_REPORTED_VIOLATIONS]))
    return tuple(alerts)


def parse_arena_batch(body: object) -> ArenaBatch:
    """Validate a decoded ``POST /ingest`` body.

    Raises ``MalformedRequest`` (400) when the body is not an object, ``InvalidInput`` (422)
    naming every broken rule, and ``Conflict`` (409) when its items disagree on the config.
    """
    if not isinstance(body, dict):
        raise malformed("must be a JSON object with 'logs' and/or 'alerts'")
    check = _Checker()
    lists: dict[str, list[Any]] = {}
    for key in ("logs", "alerts"):
        value = body.get(key)
        if value is None:
            continue
        if isinstance(value, list):
            lists[key] = value
        else:
            check.add(key, "must be a list")
    total = sum(len(items) for items in lists.values())
    if not check.violations and not 1 <= total <= ARENA_BATCH_MAX_ITEMS:
        field = "logs" if "logs" in lists or not lists else "alerts"
        check.add(
            field if lists else "body",
            f"a batch holds 1-{ARENA_BATCH_MAX_ITEMS} logs and alerts in all (got {total})",
        )
    if check.violations:
        raise InvalidInput(tuple(check.violations))

    identity: list[str] = ["", ""]
    configs: list[tuple[str, Config]] = []
    logs: list[ArenaLog] = []
    alerts: list[ArenaAlert] = []
    for key, items in lists.items():
        for index, item in enumerate(items):
            path = f"{key}[{index}]"
            if not isinstance(item, dict):
                check.add(path, "must be an object")
                continue
            _check_identity(check, path, item, identity)
            config = check.config(f"{path}.config", item.get("config"))
            if config is not None:
                configs.append((path, config))
            if key == "logs":
                log = _parse_log(check, path, item)
                if log is not None:
                    logs.append(log)
            else:
                alert = _parse_alert(check, path, item)
                if alert is not None:
                    alerts.append(alert)
            if len(check.violations) >= MAX_REPORTED_VIOLATIONS:
                break
    if check.violations:
        raise InvalidInput(tuple(check.violations[:MAX_REPORTED_VIOLATIONS]))

    config = configs[0][1] if configs else None
    for path, other in configs[1:]:
        if other != config:
            raise Conflict(
                f"{path}.config: differs from {configs[0][0]}.config; a run's config is set "
                "once and cannot change"
            )
    return ArenaBatch(
        project=identity[0],
        run=identity[1],
        config=config,
        logs=tuple(logs),
        alerts=tuple(alerts),
    )
