"""Wire formats of the run protocol (docs/sdk-protocol.md): run creation, SDK scalars, live
log lines, lifecycle status and transport heartbeats. Each ``parse_*`` validates a decoded
JSON body and raises ``InvalidInput`` naming every broken rule."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import orjson

from tuneplane.contract.errors import InvalidInput, Violation
from tuneplane.contract.ids import display_name_problem, id_problem, metric_name_problem
from tuneplane.contract.json_body import malformed
from tuneplane.contract.limits import (
    CLIENT_TIME_MAX_AHEAD_SECONDS,
    LOG_BATCH_MAX_LINES,
    LOG_LINE_MAX_CHARS,
    RUN_CONFIG_MAX_BYTES,
    SCALAR_BATCH_MAX_POINTS,
)
from tuneplane.contract.run_meta import RunMeta, parse_meta
from tuneplane.contract.validation import (
    STEP_RULE,
    are_steps,
    finite_float,
    finite_floats,
    is_count,
    is_step,
    json_problem,
)

RunStatus = Literal["running", "succeeded", "failed", "cancelled"]
RUN_STATUSES: Final[tuple[RunStatus, ...]] = ("running", "succeeded", "failed", "cancelled")
TERMINAL_STATUSES: Final = frozenset({"succeeded", "failed", "cancelled"})
#: The status the server gives a run whose sender reports none and never says when the run
#: ends (a Trackio client: its protocol has no call for it), so that it neither reads as
#: running forever nor claims an end nobody reported. A status an SDK attempt reports wins.
END_UNKNOWN_STATUS: Final = "unknown"
InvalidKind = Literal["nan", "inf", "-inf"]
INVALID_KINDS: Final[tuple[InvalidKind, ...]] = ("nan", "inf", "-inf")
LogStream = Literal["stdout", "stderr"]
HEALTH_COUNTERS: Final = ("queued", "sent", "dropped", "failed_sends", "queue_size")
#: The observation queue's counters: optional, because senders older than observation
#: events do not send them.
EVENT_HEALTH_COUNTERS: Final = (
    "events_queued",
    "events_sent",
    "events_dropped",
    "events_queue_size",
    "events_queue_capacity",
)
#: The trajectory queue's counters, optional in the same way; ``not_uploaded`` counts the
#: documents the retention caps left out on purpose.
TRAJECTORY_HEALTH_COUNTERS: Final = (
    "trajectories_queued",
    "trajectories_sent",
    "trajectories_dropped",
    "trajectories_queue_size",
    "trajectories_queue_capacity",
    "trajectories_not_uploaded",
)


def _object(body: object) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise malformed("must be a JSON object")
    return body


def _raise_if(violations: list[Violation]) -> None:
    if violations:
        raise InvalidInput(tuple(violations[:20]))


_NO_META: Final = RunMeta()


@dataclass(frozen=True, slots=True)
class RunCreate:
    run: str
    config: dict[str, Any] | None
    #: Display name, group, tags and note, stored when the run is created.
    meta: RunMeta = _NO_META
    #: The name the project was given (its ID is in the path), kept when this creates it.
    project_display_name: str | None = None


def parse_run_create(body: object) -> RunCreate:
    item = _object(body)
    violations: list[Violation] = []
    run = item.get("run")
    problem = id_problem(run)
    if problem:
        violations.append(Violation("run", "required" if run is None else problem))
    config = item.get("config")
    if config is not None and (problem_of_config := _config_violation(config)) is not None:
        violations.append(problem_of_config)
    try:
        meta = parse_meta(item)
    except InvalidInput as exc:
        violations.extend(exc.violations)
    shown = item.get("project_display_name")
    if shown is not None and (problem := display_name_problem(shown)) is not None:
        violations.append(Violation("project_display_name", problem))
    _raise_if(violations)
    assert isinstance(run, str)
    return RunCreate(run, config or None, meta, shown if isinstance(shown, str) else None)


def _config_violation(config: object) -> Violation | None:
    if not isinstance(config, dict):
        return Violation("config", "must be an object")
    if (unstorable := json_problem(config, "config")) is not None:
        return unstorable
    if len(orjson.dumps(config)) > RUN_CONFIG_MAX_BYTES:
        return Violation("config", f"must be at most {RUN_CONFIG_MAX_BYTES // 1024} KiB as JSON")
    return None


def parse_attempt_start(body: object) -> dict[str, Any] | None:
    """``POST …/attempts``: an empty body, or ``{"config": {...}}``, the attempt's own
    config (the rules of a run's); returns it, or None."""
    if body is None:
        return None
    item = _object(body)
    config = item.get("config")
    if config is None:
        return None
    if (problem := _config_violation(config)) is not None:
        raise InvalidInput((problem,))
    assert isinstance(config, dict)
    return config or None


@dataclass(frozen=True, slots=True)
class AttemptConfig:
    """``POST /api/v1/ingest/config``: the config the attempt's training code declared once
    it started, or (``add``) keys it added later (``run.config.update()``)."""

    config: dict[str, Any]
    add: bool = False


def parse_attempt_config(body: object) -> AttemptConfig:
    """``{"config": {...}}`` (the rules of a run's config; not empty), with ``"add": true``
    for keys added to what the attempt declared."""
    item = _object(body)
    config = item.get("config")
    if config is None:
        raise InvalidInput((Violation("config", "required"),))
    if (problem := _config_violation(config)) is not None:
        raise InvalidInput((problem,))
    assert isinstance(config, dict)
    if not config:
        raise InvalidInput((Violation("config", "must hold at least one key"),))
    add = item.get("add", False)
    if not isinstance(add, bool):
        raise InvalidInput((Violation("add", "must be true or false"),))
    return AttemptConfig(config, add)


@dataclass(frozen=True, slots=True)
class SeriesPoints:
    name: str
    steps: list[int]
    values: list[float]


@dataclass(frozen=True, slots=True)
class InvalidPoints:
    name: str
    steps: list[int]
    kinds: list[InvalidKind]


@dataclass(frozen=True, slots=True)
class ScalarBatch:
    series: list[SeriesPoints]
    invalid: list[InvalidPoints]
    #: When the client reported each step (UNIX seconds of its clock), so that points sent
    #: late (after an outage, replayed by ``tuneplane sync``) keep their time; a step not
    #: here takes the time the server received it.
    reported_at: dict[int, float] = field(default_factory=dict)

    @property
    def names(self) -> set[str]:
        return {s.name for s in self.series} | {s.name for s in self.invalid}


def _entries(
    body: dict[str, Any], key: str, violations: list[Violation]
) -> list[tuple[str, dict[str, Any]]]:
    value = body.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        violations.append(Violation(key, "must be a list"))
        return []
    entries = []
    for index, entry in enumerate(value):
        path = f"{key}[{index}]"
        if not isinstance(entry, dict):
            violations.append(Violation(path, "must be an object"))
            continue
        name = entry.get("name")
        if not isinstance(name, str):
            violations.append(Violation(f"{path}.name", "must be a string"))
            continue
        problem = metric_name_problem(name)
        if problem:
            violations.append(Violation(f"{path}.name", problem))
            continue
        entries.append((path, entry))
    return entries


def _steps(path: str, entry: dict[str, Any], violations: list[Violation]) -> list[int] | None:
    steps = entry.get("steps")
    if not isinstance(steps, list) or not steps:
        violations.append(Violation(f"{path}.steps", "must be a nonempty list"))
        return None
    if not are_steps(steps):
        index = next(index for index, step in enumerate(steps) if not is_step(step))
        violations.append(Violation(f"{path}.steps[{index}]", STEP_RULE))
        return None
    if len(set(steps)) != len(steps):
        violations.append(Violation(f"{path}.steps", "must not repeat a step"))
        return None
    return steps


def _reported_at(
    item: dict[str, Any], now: float | None, violations: list[Violation]
) -> dict[int, float]:
    """``{"steps": [...], "times": [...]}``: the client's time of each step, finite UNIX
    seconds no further than a day past ``now`` (the server's clock; None: not checked)."""
    value = item.get("reported_at")
    if value is None:
        return {}
    if not isinstance(value, dict):
        violations.append(Violation("reported_at", "must be an object of steps and times"))
        return {}
    steps = _steps("reported_at", value, violations)
    times = value.get("times")
    if steps is None:
        return {}
    if len(steps) > SCALAR_BATCH_MAX_POINTS:
        violations.append(Violation("reported_at.steps", f"at most {SCALAR_BATCH_MAX_POINTS}"))
        return {}
    if not isinstance(times, list) or len(times) != len(steps):
        violations.append(Violation("reported_at.times", "must be a list as long as steps"))
        return {}
    moments = finite_floats(times)
    for index, moment in enumerate(moments):
        path = f"reported_at.times[{index}]"
        if moment is None or moment < 0:
            violations.append(Violation(path, "must be UNIX seconds"))
            return {}
        if now is not None and moment - now > CLIENT_TIME_MAX_AHEAD_SECONDS:
            ahead = f"{moment - now:.0f} s past the server's clock"
            limit = f"at most {CLIENT_TIME_MAX_AHEAD_SECONDS:.0f}"
            violations.append(Violation(path, f"is {ahead} ({limit})"))
            return {}
    return dict(zip(steps, moments, strict=True))  # type: ignore[arg-type]


def parse_scalars(body: object, now: float | None = None) -> ScalarBatch:
    """A ``POST /api/v1/ingest/scalars`` body: columnar points per series, and optionally
    when each step was reported (checked against ``now``, the server's clock)."""
    item = _object(body)
    violations: list[Violation] = []
    reported_at = _reported_at(item, now, violations)
    series: list[SeriesPoints] = []
    invalid: list[InvalidPoints] = []
    total = 0
    for path, entry in _entries(item, "series", violations):
        steps = _steps(path, entry, violations)
        values = entry.get("values")
        if steps is None:
            continue
        if not isinstance(values, list) or len(values) != len(steps):
            violations.append(Violation(f"{path}.values", "must be a list as long as steps"))
            continue
        numbers = finite_floats(values)
        if None in numbers:
            violations.append(
                Violation(
                    f"{path}.values[{numbers.index(None)}]",
                    "not a finite number (report NaN and infinities under 'invalid')",
                )
            )
            continue
        series.append(SeriesPoints(entry["name"], steps, numbers))  # type: ignore[arg-type]
        total += len(steps)
    for path, entry in _entries(item, "invalid", violations):
        steps = _steps(path, entry, violations)
        kinds = entry.get("kinds")
        if steps is None:
            continue
        if not isinstance(kinds, list) or len(kinds) != len(steps):
            violations.append(Violation(f"{path}.kinds", "must be a list as long as steps"))
            continue
        if any(kind not in INVALID_KINDS for kind in kinds):
            violations.append(Violation(f"{path}.kinds", "each must be nan, inf or -inf"))
            continue
        invalid.append(InvalidPoints(entry["name"], steps, kinds))
        total += len(steps)
    if not violations and not 1 <= total <= SCALAR_BATCH_MAX_POINTS:
        violations.append(
            Violation(
                "series",
                f"a batch holds 1-{SCALAR_BATCH_MAX_POINTS} points in all (got {total})",
            )
        )
    _raise_if(violations)
    return ScalarBatch(series, invalid, reported_at)


@dataclass(frozen=True, slots=True)
class LogLine:
    seq: int
    stream: LogStream
    time: float
    text: str
    data: bytes | None


def parse_log_lines(body: object) -> list[LogLine]:
    """A ``POST /api/v1/ingest/logs`` body."""
    item = _object(body)
    raw = item.get("lines")
    if not isinstance(raw, list) or not 1 <= len(raw) <= LOG_BATCH_MAX_LINES:
        raise InvalidInput((Violation("lines", f"must be a list of 1-{LOG_BATCH_MAX_LINES}"),))
    violations: list[Violation] = []
    lines: list[LogLine] = []
    for index, line in enumerate(raw):
        path = f"lines[{index}]"
        if not isinstance(line, dict):
            violations.append(Violation(path, "must be an object"))
            continue
        before = len(violations)
        seq, stream, time, text = (line.get(k) for k in ("seq", "stream", "time", "text"))
        if not is_count(seq):
            violations.append(Violation(f"{path}.seq", "must be a nonnegative integer"))
        if stream not in ("stdout", "stderr"):
            violations.append(Violation(f"{path}.stream", "must be stdout or stderr"))
        moment = finite_float(time)
        if moment is None or moment < 0:
            violations.append(Violation(f"{path}.time", "must be UNIX seconds"))
        if not isinstance(text, str) or len(text) > LOG_LINE_MAX_CHARS:
            violations.append(
                Violation(f"{path}.text", f"must be a string of at most {LOG_LINE_MAX_CHARS}")
            )
        elif "\x00" in text:
            violations.append(Violation(f"{path}.text", "must not contain NUL; send it in data"))
        data = None
        if line.get("data") is not None:
            try:
                data = base64.b64decode(line["data"], validate=True)
            except (binascii.Error, TypeError, ValueError):
                violations.append(Violation(f"{path}.data", "must be base64"))
        if len(violations) == before:
            lines.append(LogLine(seq, stream, moment, text, data))  # type: ignore[arg-type]
    _raise_if(violations)
    return lines


@dataclass(frozen=True, slots=True)
class StatusReport:
    status: RunStatus
    exit_code: int | None
    #: When the attempt reached the status (UNIX seconds), for one that arrives late: after
    #: an outage, or replayed by ``tuneplane sync``. None: now.
    time: float | None = None


def parse_status(body: object) -> StatusReport:
    item = _object(body)
    violations: list[Violation] = []
    status = item.get("status")
    if status not in RUN_STATUSES:
        violations.append(Violation("status", f"must be one of {', '.join(RUN_STATUSES)}"))
    exit_code = item.get("exit_code")
    if exit_code is not None and not (type(exit_code) is int and -(2**31) <= exit_code < 2**31):
        violations.append(Violation("exit_code", "must be an integer or null"))
    moment = None if item.get("time") is None else finite_float(item.get("time"))
    if item.get("time") is not None and (moment is None or moment < 0):
        violations.append(Violation("time", "must be UNIX seconds"))
    _raise_if(violations)
    return StatusReport(status, exit_code, moment)  # type: ignore[arg-type]


def parse_heartbeat(body: object) -> dict[str, float]:
    """Transport health counters; all nonnegative integers, plus capacity and interval,
    and optionally the observation and trajectory queues' counters."""
    item = _object(body)
    violations: list[Violation] = []
    health: dict[str, float] = {}
    for key in (*HEALTH_COUNTERS, "queue_capacity"):
        value = item.get(key)
        if isinstance(value, int) and is_count(value):
            health[key] = value
        else:
            violations.append(Violation(key, "must be a nonnegative integer"))
    for key in (*EVENT_HEALTH_COUNTERS, *TRAJECTORY_HEALTH_COUNTERS):
        value = item.get(key)
        if value is None:
            continue
        if isinstance(value, int) and is_count(value):
            health[key] = value
        else:
            violations.append(Violation(key, "must be a nonnegative integer or absent"))
    interval = finite_float(item.get("interval"))
    if interval is None or not 0 < interval <= 3600:
        violations.append(Violation("interval", "must be seconds between heartbeats (0-3600]"))
    else:
        health["interval"] = interval
    _raise_if(violations)
    return health
