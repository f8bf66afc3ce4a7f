"""The runs list's search language: ``q``, ``sort`` and ``columns`` of
``GET /api/v1/projects/{project}/runs``, parsed into typed terms (docs/api.md, "Searching
runs"). Pure: store/run_search.py turns the terms into SQL.

::

    query  := term ( ["and"] term )*
    term   := field op value | word
    op     := =  !=  <  <=  >  >=  ~          (~: contains, case-insensitive)
    value  := a bare word or a "double-quoted string"
    field  := tag | group | status | name | last_step | points | alerts
            | config.KEY[.KEY…]               the run's config (KEY: letters, digits, _ -)
            | attempt.config.KEY[.KEY…]       any attempt's own config
            | METRIC.STAT                     STAT: last min max count

A bare word with no operator matches runs whose ID, display name, group, tags, status or
config (as JSON text) contains it, as the dashboard's old text filter did.

>>> parse_query('config.lr < 1e-4 and reward.last > 0.8 tag=baseline')[0]
Filter(field=Field(kind='config', path=('lr',), stat=None), op='<', value=0.0001)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Final, Literal

from tuneplane.contract.errors import InvalidInput, Violation
from tuneplane.contract.ids import metric_name_problem
from tuneplane.contract.protocol import END_UNKNOWN_STATUS, RUN_STATUSES

QUERY_MAX_CHARS: Final = 2000
QUERY_TERMS_MAX: Final = 32
COLUMNS_MAX: Final = 16
#: A page of the runs list.
RUNS_PAGE_MAX: Final = 1000
RUNS_PAGE_DEFAULT: Final = 1000

STATS: Final = ("last", "min", "max", "count")
#: ``unknown``: a run a Trackio client logged (its end is not reported); ``none``: a run
#: that never reported a status (an Arena run).
STATUS_VALUES: Final = (*RUN_STATUSES, END_UNKNOWN_STATUS, "none")
#: Fields of the run itself: the operators each takes.
_TEXT_OPS: Final = ("=", "!=", "~")
_NUMBER_OPS: Final = ("=", "!=", "<", "<=", ">", ">=")
RUN_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "tag": ("=", "!="),
    "group": _TEXT_OPS,
    "status": ("=", "!="),
    "name": _TEXT_OPS,
    "last_step": _NUMBER_OPS,
    "points": _NUMBER_OPS,
    "alerts": _NUMBER_OPS,
}
#: What ``sort`` takes besides config keys and metric statistics.
SORT_FIELDS: Final = (
    "name", "display_name", "status", "group", "created_at", "updated_at", "last_step",
    "points", "alerts",
)  # fmt: skip

Op = Literal["=", "!=", "<", "<=", ">", ">=", "~"]
Value = str | float | bool | None
FieldKind = Literal["run", "config", "attempt_config", "metric"]

_TOKEN: Final = re.compile(
    r'\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<op><=|>=|!=|=|<|>|~)|(?P<word>[^\s"<>=!~]+))'
)
_KEY: Final = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True, slots=True)
class Field:
    """``run`` fields have their name in ``path[0]``; metrics their name there and ``stat``."""

    kind: FieldKind
    path: tuple[str, ...]
    stat: str | None = None

    @property
    def text(self) -> str:
        if self.kind == "metric":
            return f"{self.path[0]}.{self.stat}"
        prefix = {"run": "", "config": "config.", "attempt_config": "attempt.config."}[self.kind]
        return prefix + ".".join(self.path)


@dataclass(frozen=True, slots=True)
class Filter:
    field: Field
    op: Op
    value: Value


@dataclass(frozen=True, slots=True)
class Words:
    """A bare word: the run's ID, display name, group, tags, status or config has it."""

    text: str


Term = Filter | Words


@dataclass(frozen=True, slots=True)
class Sort:
    field: Field
    descending: bool


def _bad(param: str, rule: str) -> InvalidInput:
    return InvalidInput((Violation(param, rule),))


def _tokens(query: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    position = 0
    while position < len(query):
        if query[position:].strip() == "":
            break
        match = _TOKEN.match(query, position)
        if match is None or match.end() == position:
            raise _bad("q", f"cannot read {query[position:].strip()[:40]!r} (an unclosed quote?)")
        kind = match.lastgroup or "word"
        tokens.append((kind, match.group(kind)))
        position = match.end()
    return tokens


def parse_field(text: str, param: str = "q") -> Field:
    """A field name as ``q``, ``sort`` and ``columns`` write it."""
    if text in RUN_FIELDS or text in SORT_FIELDS:
        return Field("run", (text,))
    for prefix, kind in (("attempt.config.", "attempt_config"), ("config.", "config")):
        if text.startswith(prefix):
            keys = tuple(text[len(prefix) :].split("."))
            if not all(_KEY.fullmatch(key) for key in keys):
                raise _bad(
                    param, f"{text!r}: config keys are letters, digits, _ and - (a.b for nested)"
                )
            return Field(kind, keys)  # type: ignore[arg-type]
    metric, dot, stat = text.rpartition(".")
    if not dot or stat not in STATS:
        known = ", ".join(RUN_FIELDS)
        raise _bad(
            param,
            f"{text!r}: unknown field; use {known}, config.KEY, attempt.config.KEY or "
            f"METRIC.STAT with STAT one of {', '.join(STATS)}",
        )
    if (problem := metric_name_problem(metric)) is not None:
        raise _bad(param, f"{text!r}: the metric name {problem}")
    return Field("metric", (metric,), stat)


def _value(kind: str, raw: str) -> Value:
    if kind == "quoted":
        return re.sub(r"\\(.)", r"\1", raw[1:-1])
    lowered = raw.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "null":
        return None
    try:
        number = float(raw)
    except ValueError:
        return raw
    return number if math.isfinite(number) else raw


def _check(term: Filter, source: str) -> None:
    field, op, value = term.field, term.op, term.value
    where = f"{source!r}"
    if field.kind == "run":
        name = field.path[0]
        allowed = RUN_FIELDS.get(name)
        if allowed is None:
            raise _bad("q", f"{where}: {name} can be sorted by, not searched")
        if op not in allowed:
            raise _bad("q", f"{where}: {name} takes {' '.join(allowed)}")
        if allowed is _NUMBER_OPS and not isinstance(value, float):
            raise _bad("q", f"{where}: {name} is compared with a number")
        if name == "status" and str(value).lower() not in STATUS_VALUES:
            raise _bad("q", f"{where}: status is one of {', '.join(STATUS_VALUES)}")
        if allowed is not _NUMBER_OPS and not isinstance(value, str):
            raise _bad("q", f'{where}: {name} is compared with text (quote it: "{value}")')
    elif field.kind == "metric":
        if op == "~" or not isinstance(value, float):
            raise _bad(
                "q", f"{where}: a metric statistic is compared with a number (= != < <= > >=)"
            )
    elif op in ("<", "<=", ">", ">=") and not isinstance(value, float):
        raise _bad("q", f"{where}: ordering ({op}) needs a number")
    elif op == "~" and not isinstance(value, str):
        raise _bad("q", f"{where}: ~ (contains) needs text")


def parse_query(query: str) -> list[Term]:
    """The terms of ``q``, all of which a run must match; raises :class:`InvalidInput`
    naming the part of the query that is wrong."""
    if len(query) > QUERY_MAX_CHARS:
        raise _bad("q", f"must be at most {QUERY_MAX_CHARS} characters")
    tokens = _tokens(query)
    terms: list[Term] = []
    index = 0
    while index < len(tokens):
        kind, text = tokens[index]
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        if kind == "word" and text.lower() == "and" and terms:
            index += 1
            continue
        if kind == "op":
            raise _bad("q", f"{text!r} must follow a field (as in config.lr {text} 1e-4)")
        if following is None or following[0] != "op":
            terms.append(Words(_value("quoted", text) if kind == "quoted" else text))  # type: ignore[arg-type]
            index += 1
            continue
        op = following[1]
        value_token = tokens[index + 2] if index + 2 < len(tokens) else None
        if value_token is None or value_token[0] == "op":
            raise _bad("q", f"{text} {op}: a value must follow the operator")
        if kind == "quoted":
            raise _bad("q", f"{text}: a field name is not quoted")
        field = parse_field(text)
        textual = field.kind == "run" and RUN_FIELDS.get(field.path[0]) is _TEXT_OPS
        textual = textual or (field.kind == "run" and field.path[0] in ("tag", "status"))
        value = _value("quoted", value_token[1]) if value_token[0] == "quoted" else value_token[1]
        term = Filter(field, op, value if textual else _value(*value_token))  # type: ignore[arg-type]
        _check(term, f"{text} {op} {value_token[1]}")
        terms.append(term)
        index += 3
    if len(terms) > QUERY_TERMS_MAX:
        raise _bad("q", f"at most {QUERY_TERMS_MAX} terms")
    return terms


def parse_sort(sort: str | None) -> Sort | None:
    """``sort=FIELD`` (ascending) or ``sort=-FIELD`` (descending); runs without a value come
    last either way."""
    if not sort:
        return None
    descending = sort.startswith("-")
    field = parse_field(sort.lstrip("-"), "sort")
    if field.kind == "attempt_config":
        raise _bad("sort", f"{sort!r}: sort by config.KEY (an attempt's config filters only)")
    if field.kind == "run" and field.path[0] not in SORT_FIELDS:
        raise _bad("sort", f"{sort!r}: sortable run fields are {', '.join(SORT_FIELDS)}")
    return Sort(field, descending)


def parse_columns(columns: str | None) -> list[Field]:
    """``columns=config.lr,reward.last``: config keys and metric statistics to show."""
    if not columns:
        return []
    names = list(dict.fromkeys(name.strip() for name in columns.split(",") if name.strip()))
    if len(names) > COLUMNS_MAX:
        raise _bad("columns", f"at most {COLUMNS_MAX} columns")
    fields = [parse_field(name, "columns") for name in names]
    for name, field in zip(names, fields, strict=True):
        if field.kind not in ("config", "metric"):
            raise _bad("columns", f"{name!r}: a column is config.KEY or METRIC.STAT")
    return fields


def config_value(config: dict[str, object] | None, path: tuple[str, ...]) -> object:
    """The value at a key path of a config, or None."""
    value: object = config
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value
