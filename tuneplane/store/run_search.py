"""The runs list's search (contract/run_query.py) as SQL, evaluated by the database on both
engines: config values by JSON extraction (SQLite ``json_extract``/``json_type``,
PostgreSQL ``#>``/``#>>``/``json_typeof``), summary metrics from ``metrics`` (its
``(run_id, name)`` key), tags from ``run_tags``. A page is found in steps: the IDs of
the matching runs in order, their number (unless the page shows it was the last), then the
run rows of just that page.

A comparison with a config key or a metric needs a value: a run without one never matches
(``config.lr != 0.1`` leaves out runs with no ``lr``); ``!=`` on a run's own fields (tag,
group, status, name) includes the runs that have none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Float,
    Text,
    and_,
    case,
    cast,
    exists,
    func,
    literal,
    not_,
    or_,
    select,
    true,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql import operators

from tuneplane.contract.run_query import Field, Sort, Term, Words
from tuneplane.store.catalog import RunRow, project_id, run_query, with_tags
from tuneplane.store.schema import attempts, metrics, run_tags, runs

_OPS = {
    "=": operators.eq,
    "!=": operators.ne,
    "<": operators.lt,
    "<=": operators.le,
    ">": operators.gt,
    ">=": operators.ge,
}
_STAT_COLUMNS = {
    "last": metrics.c.last_value,
    "min": metrics.c.min_value,
    "max": metrics.c.max_value,
    "count": metrics.c.count,
}
_SORT_COLUMNS: dict[str, Any] = {
    "name": runs.c.name,
    "display_name": func.coalesce(runs.c.display_name, runs.c.name),
    "status": runs.c.status,
    "group": runs.c.run_group,
    "created_at": runs.c.created_at,
    "updated_at": runs.c.updated_at,
    "last_step": runs.c.last_step,
    "points": runs.c.point_count,
    "alerts": runs.c.alert_count,
}


#: Sort keys every run has: no "without a value last" term, so an index can give the order.
_NOT_NULL = (runs.c.name, runs.c.created_at, runs.c.updated_at, runs.c.point_count,
             runs.c.alert_count, _SORT_COLUMNS["display_name"])  # fmt: skip


class _Json:
    """A JSON document column of one engine: the type, number and text at a key path."""

    def __init__(self, column: Any, sqlite: bool, path: Sequence[str]) -> None:
        self.column, self.sqlite = column, sqlite
        self.path: Any
        if sqlite:
            self.path = "$" + "".join(f'."{key}"' for key in path)
        else:
            self.path = literal(list(path), type_=postgresql.ARRAY(Text))  # a text[] path

    def type(self) -> Any:
        if self.sqlite:
            return func.json_type(self.column, self.path)
        return func.json_typeof(self.column.op("#>")(self.path))

    def text(self) -> Any:
        if self.sqlite:
            return case((self.type() == "text", func.json_extract(self.column, self.path)))
        return self.column.op("#>>", return_type=Text)(self.path)

    def number(self) -> Any:
        """The value where it is a JSON number, else NULL (PostgreSQL casts only then)."""
        if self.sqlite:
            return case(
                (self.type().in_(("integer", "real")), func.json_extract(self.column, self.path))
            )
        return case((self.type() == "number", cast(self.text(), Float)))

    def kind_is(self, kinds: tuple[str, str]) -> Any:
        sqlite_kind, pg_kind = kinds
        return self.type() == (sqlite_kind if self.sqlite else pg_kind)


def _json_match(document: _Json, op: str, value: object) -> ColumnElement[bool]:
    if isinstance(value, bool):
        expected = ("true", "boolean") if value else ("false", "boolean")
        if document.sqlite:
            matched = document.type() == expected[0]
        else:
            matched = and_(document.type() == "boolean", document.text() == str(value).lower())
        return matched if op == "=" else and_(document.type().is_not(None), not_(matched))
    if value is None:
        is_null = document.kind_is(("null", "null"))
        return is_null if op == "=" else and_(document.type().is_not(None), not_(is_null))
    if isinstance(value, float):
        return _OPS[op](document.number(), value)  # type: ignore[no-any-return]
    text = document.text()
    if op == "~":
        return text.icontains(str(value), autoescape=True)  # type: ignore[no-any-return]
    return _OPS[op](text, str(value))  # type: ignore[no-any-return]


def _run_field(name: str, op: str, value: object) -> ColumnElement[bool]:
    text = str(value)
    if name == "tag":
        tagged = exists().where(run_tags.c.run_id == runs.c.id, run_tags.c.tag == text)
        return tagged if op == "=" else not_(tagged)
    if name == "status" and text.lower() == "none":
        return runs.c.status.is_(None) if op == "=" else runs.c.status.is_not(None)
    column = {
        "group": runs.c.run_group,
        "status": runs.c.status,
        "last_step": runs.c.last_step,
        "points": runs.c.point_count,
        "alerts": runs.c.alert_count,
    }.get(name)
    if name == "name":
        if op == "~":
            return or_(_contains(runs.c.name, text), _contains(runs.c.display_name, text))
        matched = or_(runs.c.name == text, runs.c.display_name == text)
        return matched if op == "=" else not_(matched)
    assert column is not None
    if op == "~":
        return _contains(column, text)
    compared = _OPS[op](column, value if isinstance(value, float) else text)
    if op == "!=" and name in ("group", "status"):
        return or_(column.is_(None), compared)
    return compared  # type: ignore[no-any-return]


def _contains(column: Any, text: str) -> ColumnElement[bool]:
    return column.icontains(text, autoescape=True)  # type: ignore[no-any-return]


def _words(text: str) -> ColumnElement[bool]:
    tagged = exists().where(run_tags.c.run_id == runs.c.id, _contains(run_tags.c.tag, text))
    return or_(
        _contains(runs.c.name, text),
        _contains(runs.c.display_name, text),
        _contains(runs.c.run_group, text),
        _contains(runs.c.status, text),
        _contains(cast(runs.c.config, Text), text),
        tagged,
    )


def condition(term: Term, sqlite: bool) -> ColumnElement[bool]:
    """The SQL condition of one term, on ``runs``."""
    if isinstance(term, Words):
        return _words(term.text)
    field = term.field
    if field.kind == "run":
        return _run_field(field.path[0], term.op, term.value)
    if field.kind == "config":
        return _json_match(_Json(runs.c.config, sqlite, field.path), term.op, term.value)
    if field.kind == "attempt_config":
        document = _Json(attempts.c.config, sqlite, field.path)
        return exists().where(
            attempts.c.run_id == runs.c.id, _json_match(document, term.op, term.value)
        )
    stat = _STAT_COLUMNS[field.stat or "last"]
    return exists().where(
        metrics.c.run_id == runs.c.id,
        metrics.c.name == field.path[0],
        _OPS[term.op](stat, term.value),
    )


def _order(query: Any, sort: Sort | None, sqlite: bool) -> Any:
    """``query`` ordered by ``sort`` (runs without a value last), then by creation."""
    if sort is None:
        return query.order_by(runs.c.created_at, runs.c.id)
    field = sort.field
    keys: list[Any]
    if field.kind == "run":
        keys = [_SORT_COLUMNS[field.path[0]]]
    elif field.kind == "config":
        document = _Json(runs.c.config, sqlite, field.path)
        keys = [document.number(), document.text()]
    else:
        joined = metrics.alias("sorted_metric")
        query = query.outerjoin(
            joined, and_(joined.c.run_id == runs.c.id, joined.c.name == field.path[0])
        )
        keys = [joined.c[_STAT_COLUMNS[field.stat or "last"].name]]
    ordering: list[Any] = []
    for key in keys:
        if not any(key is column for column in _NOT_NULL):  # runs without a value last
            ordering.append(case((key.is_(None), 1), else_=0))
        ordering.append(key.desc() if sort.descending else key)
    tie = runs.c.created_at.desc() if sort.descending else runs.c.created_at
    return query.order_by(*ordering, tie, runs.c.id)


@dataclass(frozen=True, slots=True)
class RunPage:
    rows: list[RunRow]
    total: int
    #: Per run id, the value of each metric column asked for (``reward.last`` -> 0.91).
    metric_columns: dict[int, dict[str, float | int | None]]


def search_runs(
    connection: Connection,
    project: str,
    terms: Sequence[Term],
    sort: Sort | None = None,
    columns: Sequence[Field] = (),
    limit: int = 1000,
    offset: int = 0,
) -> RunPage:
    """A page of the project's runs matching every term, in ``sort`` order."""
    sqlite = connection.dialect.name == "sqlite"
    wanted = [runs.c.project_id == project_id(connection, project), runs.c.deleted_at.is_(None)]
    wanted += [condition(term, sqlite) for term in terms]
    # With terms, the matching runs are found once, counted by a window over them; without,
    # the project's runs are counted from the index and the page read in index order.
    columns_of_page = [runs.c.id, func.count().over().label("total")] if terms else [runs.c.id]
    query = _order(select(*columns_of_page).where(and_(true(), *wanted)), sort, sqlite)
    found = connection.execute(query.limit(limit).offset(offset)).all()
    ids = [int(row.id) for row in found]
    if terms and found:
        total = int(found[0].total)
    elif len(ids) < limit and (ids or not offset):
        total = offset + len(ids)
    else:
        total = int(
            connection.execute(select(func.count()).select_from(runs).where(*wanted)).scalar_one()
        )
    by_id = {
        row.id: RunRow(*row) for row in connection.execute(run_query().where(runs.c.id.in_(ids)))
    } if ids else {}  # fmt: skip
    rows = with_tags(connection, [by_id[i] for i in ids if i in by_id])
    return RunPage(rows, total, _metric_columns(connection, ids, columns))


def _metric_columns(
    connection: Connection, ids: list[int], columns: Sequence[Field]
) -> dict[int, dict[str, float | int | None]]:
    wanted = [field for field in columns if field.kind == "metric"]
    values: dict[int, dict[str, float | int | None]] = {
        run_id: {field.text: None for field in wanted} for run_id in ids
    }
    if not wanted or not ids:
        return values
    names = sorted({field.path[0] for field in wanted})
    rows = connection.execute(
        select(metrics.c.run_id, metrics.c.name, *_STAT_COLUMNS.values()).where(
            metrics.c.run_id.in_(ids), metrics.c.name.in_(names)
        )
    )
    for row in rows:
        stats = dict(zip(_STAT_COLUMNS, row[2:], strict=True))
        for field in wanted:
            if field.path[0] == row.name:
                values[row.run_id][field.text] = stats[field.stat or "last"]
    return values
