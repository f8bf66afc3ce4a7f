"""The HTTP protocol of a self-hosted Trackio server, as its clients 0.40.0 to 0.43.0 speak
it (0.43.0 sends the same calls and payloads as 0.40.0).

A Trackio client given ``server_url`` (or ``TRACKIO_SERVER_URL``) asks ``GET /version`` for
``{"api_version": 1}``, then calls ``POST /api/<name>`` with ``{"args": [...], "kwargs":
{...}}`` and reads ``{"data": ...}`` back; every request carries the write token in
``x-trackio-write-token``. A failed call is kept on the client's disk and sent again later
with the same ``log_id`` and ``alert_id`` values, so the store's keys make it exactly once.

What the payloads become here:

* ``bulk_log`` entries are Arena log events (``log_id`` within the run): their numeric
  metrics are points at the entry's step; nested objects of numbers are flattened with
  ``/`` (``{"train": {"loss": 1}}`` is ``train/loss``).
* ``bulk_log_system`` entries are Arena log events of ``system/<name>`` series, at the step
  the run had reached when they arrived (Trackio sends them with a time and no step).
* ``bulk_alert`` entries are Arena alerts (``alert_id`` within the run).
* A value that is no finite number (media, tables, histograms, text, ``"NaN"``) is not a
  point: it is left out, and the answer names it, because refusing the batch would make
  the client resend every other point of it forever.

A payload that breaks the protocol itself (no project, a run name tuneplane cannot hold, a
missing step) is refused with the field and rule, as everywhere else.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast

import orjson

from tuneplane.contract.arena import ALERT_LEVELS, AlertLevel, ArenaAlert, ArenaLog
from tuneplane.contract.errors import InvalidInput, Violation
from tuneplane.contract.ids import (
    display_name_problem,
    id_for_name,
    metric_name_problem,
)
from tuneplane.contract.json_body import key_path, malformed
from tuneplane.contract.limits import (
    ALERT_TEXT_MAX_CHARS,
    ALERT_TITLE_MAX_CHARS,
    RUN_CONFIG_MAX_BYTES,
)
from tuneplane.contract.protocol import InvalidKind, InvalidPoints, ScalarBatch
from tuneplane.contract.run_meta import as_group
from tuneplane.contract.validation import (
    NUL_RULE,
    STEP_RULE,
    FieldCheck,
    finite_float,
    is_step,
    json_problem,
    number_rule,
)

#: ``GET /version``: the HTTP API version a Trackio client requires (anything else and it
#: falls back to Gradio, keeping the data on local disk), and the newest release we speak.
TRACKIO_API_VERSION: Final = 1
TRACKIO_RELEASE: Final = "0.43.0"
#: The header every Trackio request carries its write token in.
WRITE_TOKEN_HEADER: Final = "x-trackio-write-token"  # noqa: S105 (a header's name)
#: One ``POST /api/<name>`` body. Generous: after an outage the client sends everything it
#: kept on disk in one call, and a refused body is sent again, unchanged, forever.
TRACKIO_BODY_MAX_BYTES: Final = 32 * 1024 * 1024
#: Log events stored in one transaction (a larger call is stored in several).
TRACKIO_WRITE_CHUNK: Final = 1_000
#: A response names at most this many left-out values.
MAX_REPORTED_DROPS: Final = 20
#: System metrics live beside the training metrics, under this prefix.
SYSTEM_PREFIX: Final = "system/"
#: How a Trackio client writes NaN and infinities in JSON (its serialize_values), and the
#: kind of invalid point each is.
NON_FINITE: Final[dict[str, InvalidKind]] = {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}
MEDIA_RULE: Final = (
    "tuneplane does not store Trackio media (images, audio, video, files of tables) yet; "
    "metrics, system metrics, alerts and configs are stored"
)

JSONObject = dict[str, Any]


def call_arguments(body: object, names: Sequence[str]) -> JSONObject:
    """The arguments of a ``POST /api/<name>`` call: positional ``args`` take ``names`` in
    order, ``kwargs`` by name (what Trackio's own server does); unknown ones are ignored.

    >>> call_arguments({"args": ["p"], "kwargs": {"run": "r"}}, ("project", "run"))
    {'project': 'p', 'run': 'r'}
    """
    if not isinstance(body, dict):
        raise malformed('must be a JSON object: {"args": [...], "kwargs": {...}}')
    args = body.get("args") or []
    kwargs = body.get("kwargs") or {}
    if not isinstance(args, list):
        raise InvalidInput((Violation("args", "must be a list"),))
    if not isinstance(kwargs, dict):
        raise InvalidInput((Violation("kwargs", "must be an object"),))
    found = dict(zip(names, args, strict=False))
    found.update((name, kwargs[name]) for name in names if name in kwargs)
    return found


def entries_of(arguments: JSONObject, name: str) -> list[JSONObject]:
    """The list argument ``name`` (``logs``, ``alerts``), each item an object."""
    value = arguments.get(name)
    if not isinstance(value, list):
        raise InvalidInput((Violation(name, "required" if value is None else "must be a list"),))
    wrong = [Violation(f"{name}[{i}]", "must be an object") for i, v in enumerate(value)]
    wrong = [v for v, item in zip(wrong, value, strict=True) if not isinstance(item, dict)]
    if wrong:
        raise InvalidInput(tuple(wrong[:MAX_REPORTED_DROPS]))
    return value


def name_argument(arguments: JSONObject, name: str, *, required: bool = True) -> str | None:
    """The ID of a project or run named by argument ``name`` (any name people give, mapped
    as contract.ids.id_for_name maps it everywhere)."""
    value = arguments.get(name)
    if value is None and not required:
        return None
    problem = display_name_problem(value)
    if problem is not None:
        raise InvalidInput((Violation(name, "required" if value is None else problem),))
    assert isinstance(value, str)
    return id_for_name(value, fallback="project" if name == "project" else "run")


@dataclass(slots=True)
class RunWrite:
    """What a call writes into one run: its config (only a new run takes it), log events
    and alerts."""

    project: str
    run: str
    #: The run's name as the client gave it, where it is not its ID.
    display_name: str | None = None
    #: The project's name as the client gave it, where it is not its ID.
    project_display_name: str | None = None
    config: JSONObject | None = None
    logs: list[ArenaLog] = field(default_factory=list)
    #: (step, metric, kind) of each NaN or infinity the client sent.
    invalid: list[tuple[int, str, InvalidKind]] = field(default_factory=list)
    alerts: list[ArenaAlert] = field(default_factory=list)
    #: Where the config was first given, for the note when it is not taken.
    config_path: str = ""

    def invalid_batch(self) -> ScalarBatch | None:
        """The run's NaN and infinities as the SDK sends them, or None without any."""
        if not self.invalid:
            return None
        series: dict[str, InvalidPoints] = {}
        for step, name, kind in self.invalid:
            points = series.setdefault(name, InvalidPoints(name, [], []))
            points.steps.append(step)
            points.kinds.append(kind)
        return ScalarBatch(series=[], invalid=list(series.values()))

    def add(
        self, log_id: str, step: int, metrics: dict[str, float], invalid: Mapping[str, InvalidKind]
    ) -> None:
        """One entry's metrics at ``step``."""
        if metrics:
            self.logs.append(ArenaLog(log_id=log_id, step=step, metrics=metrics))
        self.invalid.extend((step, name, kind) for name, kind in invalid.items())


@dataclass(slots=True)
class ParsedCall:
    """The runs a call writes into, in order, and the values left out of them."""

    runs: dict[tuple[str, str], RunWrite] = field(default_factory=dict)
    dropped: list[Violation] = field(default_factory=list)

    def run_of(self, check: _Checker, path: str, item: JSONObject) -> RunWrite | None:
        given_project = item.get("project")
        project = check.name(f"{path}.project", given_project, "project")
        given = item.get("run")
        run = check.name(f"{path}.run", given, "run")
        if project is None or run is None:
            return None
        found = self.runs.get((project, run))
        if found is None:
            shown = given if given != run and isinstance(given, str) else None
            found = self.runs[project, run] = RunWrite(project, run, shown)
            if given_project != project and isinstance(given_project, str):
                found.project_display_name = given_project
        return found

    def drop(self, path: str, rule: str) -> None:
        self.dropped.append(Violation(path, rule))

    def dropped_json(self) -> list[dict[str, str]]:
        return [{"field": v.field, "rule": v.rule} for v in self.dropped[:MAX_REPORTED_DROPS]]


class _Checker(FieldCheck):
    """Collects the violations that refuse the call."""

    def name(self, path: str, value: object, fallback: str) -> str | None:
        """The ID of a project or run name people gave (contract.ids.id_for_name)."""
        problem = display_name_problem(value)
        if problem is not None:
            self.add(path, "required" if value is None else problem)
            return None
        assert isinstance(value, str)
        return id_for_name(value, fallback=fallback)

    def step(self, path: str, value: object) -> int | None:
        if not is_step(value):
            self.add(path, "required" if value is None else STEP_RULE)
            return None
        assert isinstance(value, int)
        return value

    def raise_if_any(self) -> None:
        if self.violations:
            raise InvalidInput(tuple(self.violations[:MAX_REPORTED_DROPS]))


def _event_id(path: str, item: JSONObject, key: str, check: _Checker) -> str:
    """The entry's own ID (0.40.0 sends one on every entry), else one derived from its
    content, so a resent entry is still the same event."""
    value = item.get(key)
    if value is None:
        digest = hashlib.sha256(orjson.dumps(item, option=orjson.OPT_SORT_KEYS)).hexdigest()
        return f"trackio-{digest[:32]}"
    return check.id_at(f"{path}.{key}", value) or ""


def flatten_metrics(
    path: str, prefix: str, metrics: JSONObject
) -> Iterator[tuple[str, str, object]]:
    """(field path, metric name, value) of every leaf; objects of Trackio's own kinds
    (``{"_type": "trackio.image", ...}``) are leaves, to be left out. The importer of
    Trackio's files names series with this too, so both ways in agree."""
    stack = [(path, prefix, metrics)]
    while stack:
        where, name_prefix, node = stack.pop()
        for key, value in node.items():
            here = key_path(where, key)
            if isinstance(value, dict) and value and "_type" not in value:
                stack.append((here, f"{name_prefix}{key}/", value))
            else:
                yield here, f"{name_prefix}{key}", value


def _metrics(
    call: ParsedCall, path: str, raw: object, prefix: str, invalid: dict[str, InvalidKind]
) -> dict[str, float] | None:
    """The entry's finite metrics; its NaN and infinities go into ``invalid`` (name -> kind),
    to be stored as the SDK's are: invalid points, marked and judged by alert rules."""
    if not isinstance(raw, dict):
        return None
    found: dict[str, float] = {}
    for where, name, value in flatten_metrics(path, prefix, raw):
        problem = metric_name_problem(name)
        number = finite_float(value)
        if problem is not None:
            call.drop(where, f"metric name {problem}")
        elif number is not None:
            found[name] = number
        elif isinstance(value, str) and value in NON_FINITE:
            invalid[name] = NON_FINITE[value]
        else:
            kind = value.get("_type") if isinstance(value, dict) else None
            call.drop(where, f"{kind}: not stored" if isinstance(kind, str) else _rule(value))
    return found


def _rule(value: object) -> str:
    if isinstance(value, bool | str | list):
        return f"{'a boolean' if isinstance(value, bool) else type(value).__name__}, not a number"
    return number_rule(value)


#: Where Trackio's ``init(group=)`` keeps a run's group: a key of the config it sends.
GROUP_KEY: Final = "_Group"


def config_group(config: Mapping[str, Any] | None) -> str | None:
    """The group a Trackio run was given (see ``run_meta.as_group``), or None."""
    return None if config is None else as_group(config.get(GROUP_KEY))


def config_problem(raw: object, path: str) -> Violation | None:
    """Why a Trackio run config cannot be a run's config, or None when it can."""
    if not isinstance(raw, dict):
        return Violation(path, "must be an object; not stored")
    if (problem := json_problem(raw, path)) is not None:
        return Violation(problem.field, f"{problem.rule}; the config is not stored")
    if len(orjson.dumps(raw)) > RUN_CONFIG_MAX_BYTES:
        return Violation(
            path, f"larger than {RUN_CONFIG_MAX_BYTES // 1024} KiB as JSON; not stored"
        )
    return None


def _config(call: ParsedCall, run: RunWrite, path: str, raw: object) -> None:
    if raw is None or run.config is not None:
        return
    if (problem := config_problem(raw, path)) is not None:
        call.drop(problem.field, problem.rule)
    elif raw:
        assert isinstance(raw, dict)
        run.config, run.config_path = raw, path


def parse_bulk_log(entries: list[JSONObject]) -> ParsedCall:
    """``bulk_log``'s entries: ``{project, run, run_id, step, metrics, config, log_id}``."""
    call, check = ParsedCall(), _Checker()
    for index, item in enumerate(entries):
        path = f"logs[{index}]"
        run = call.run_of(check, path, item)
        log_id = _event_id(path, item, "log_id", check)
        step = check.step(f"{path}.step", item.get("step"))
        invalid: dict[str, InvalidKind] = {}
        metrics = _metrics(call, f"{path}.metrics", item.get("metrics"), "", invalid)
        if metrics is None:
            check.add(f"{path}.metrics", "must be an object")
        if run is None or step is None or metrics is None or not log_id:
            continue
        _config(call, run, f"{path}.config", item.get("config"))
        run.add(log_id, step, metrics, invalid)
    check.raise_if_any()
    return call


def run_key(item: JSONObject) -> tuple[str, str] | None:
    """The (project, run) IDs an entry names, or None where a name breaks its rule."""
    project, run = item.get("project"), item.get("run")
    if not isinstance(project, str) or not isinstance(run, str):
        return None
    if display_name_problem(project) or display_name_problem(run):
        return None
    return id_for_name(project, fallback="project"), id_for_name(run)


def parse_bulk_log_system(
    entries: list[JSONObject], steps: dict[tuple[str, str], int]
) -> ParsedCall:
    """``bulk_log_system``'s entries: ``{project, run, run_id, metrics, timestamp,
    log_id}``; each run's samples go at ``steps[project, run]`` (0 when absent)."""
    call, check = ParsedCall(), _Checker()
    for index, item in enumerate(entries):
        path = f"logs[{index}]"
        run = call.run_of(check, path, item)
        log_id = _event_id(path, item, "log_id", check)
        invalid: dict[str, InvalidKind] = {}
        metrics = _metrics(call, f"{path}.metrics", item.get("metrics"), SYSTEM_PREFIX, invalid)
        if metrics is None:
            check.add(f"{path}.metrics", "must be an object")
        if run is None or metrics is None or not log_id:
            continue
        run.add(log_id, steps.get((run.project, run.run), 0), metrics, invalid)
    check.raise_if_any()
    return call


def _text(call: ParsedCall, check: _Checker, path: str, value: object, limit: int) -> str | None:
    """Alert text as tuneplane holds it: cut to ``limit`` characters (and said so), never
    refused for its length, since a refused alert would come back forever."""
    if value is None:
        return None
    if not isinstance(value, str):
        check.add(path, "must be a string")
        return None
    if "\x00" in value:
        check.add(path, NUL_RULE)
        return None
    if len(value) > limit:
        call.drop(path, f"cut to its first {limit} characters")
        return value[:limit]
    return value


def parse_bulk_alert(entries: list[JSONObject]) -> ParsedCall:
    """``bulk_alert``'s entries: ``{project, run, run_id, title, text, level, step,
    timestamp, alert_id}``."""
    call, check = ParsedCall(), _Checker()
    for index, item in enumerate(entries):
        path = f"alerts[{index}]"
        run = call.run_of(check, path, item)
        alert_id = _event_id(path, item, "alert_id", check)
        before = len(check.violations)
        title = _text(call, check, f"{path}.title", item.get("title"), ALERT_TITLE_MAX_CHARS)
        if not title and len(check.violations) == before:
            check.add(f"{path}.title", "must be a non-empty string")
        text = _text(call, check, f"{path}.text", item.get("text"), ALERT_TEXT_MAX_CHARS)
        level = item.get("level")
        if level not in ALERT_LEVELS:
            check.add(f"{path}.level", "must be one of info, warn, error")
        step = item.get("step")
        if step is not None and not is_step(step):
            check.add(f"{path}.step", f"{STEP_RULE}, or null")
        if run is None or not title or not alert_id or level not in ALERT_LEVELS:
            continue
        run.alerts.append(ArenaAlert(alert_id, title, text, cast(AlertLevel, level), step))
    check.raise_if_any()
    return call


def chunked(run: RunWrite) -> Iterator[tuple[list[ArenaLog], list[ArenaAlert]]]:
    """The run's writes in transactions of at most ``TRACKIO_WRITE_CHUNK`` log events."""
    for start in range(0, max(len(run.logs), 1), TRACKIO_WRITE_CHUNK):
        logs = run.logs[start : start + TRACKIO_WRITE_CHUNK]
        alerts = run.alerts if start == 0 else []
        if logs or alerts:
            yield logs, alerts
