"""Bulk reads: every original point of many series in one request, as columns.

``GET …/runs/{run}/columns`` reads series of one run, ``GET …/projects/{project}/columns``
the same series of several runs. The answer is JSON (``steps``, ``values`` and ``times`` as
arrays per series, the invalid points beside them as the ``…/invalid`` routes list them) or,
for a client whose ``Accept`` names it, an Apache Arrow IPC stream: one row per point
(``run``, ``metric``, ``step``, ``value``, ``time``), a record batch per page of blocks,
each series' invalid points after its valid ones with their NaN or infinity as the value
and no time. Both are made from the stored blocks' bytes (store/point_columns.py) and
written by orjson and pyarrow from NumPy arrays, never a Python object per point; a read of
more than ``_INLINE_POINTS`` points is streamed. NumPy and pyarrow are imported on the
first bulk read, so a server that serves none does not carry them.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Final

import orjson
from fastapi import APIRouter, Query, Request
from sqlalchemy import Connection
from starlette.responses import Response, StreamingResponse

from tuneplane.contract.errors import InvalidInput, NotFound, Violation
from tuneplane.contract.limits import BULK_SERIES_MAX
from tuneplane.server.guard import GuardedRoute
from tuneplane.server.reads import RUN, EndStep, RunNames, StartStep, run_names
from tuneplane.server.state import app_state
from tuneplane.store import point_columns
from tuneplane.store.database import Database

if TYPE_CHECKING:
    import pyarrow as pa

router = APIRouter(prefix="/api/v1", tags=["read"], route_class=GuardedRoute)

ARROW_STREAM: Final = "application/vnd.apache.arrow.stream"
#: Reads of at most this many points are answered whole, in the route's own thread hop;
#: longer ones are streamed a page of blocks at a time.
_INLINE_POINTS: Final = 200_000
#: Elements per piece of a JSON array: bounds the text held at once.
_JSON_PIECE: Final = 1 << 18

Metrics = Annotated[
    list[str] | None,
    Query(description="a metric name; repeat for more (none: every series of the run)"),
]


@dataclass(frozen=True, slots=True)
class _Series:
    run: str
    metric: str
    metric_id: int
    count: int


@router.get(
    RUN + "/columns",
    summary="Every original point of series of one run, as columns (JSON or Arrow)",
    responses={200: {"content": {"application/json": {}, ARROW_STREAM: {}}}},
)
def read_columns(
    request: Request,
    project: str,
    run: str,
    metric: Metrics = None,
    start: StartStep = None,
    end: EndStep = None,
) -> Response:
    """Every original point of the named metrics (all of the run's without ``metric``)
    with steps in ``start..end``, as columns; ``Accept: application/vnd.apache.arrow.stream``
    answers an Arrow IPC stream. Metrics the run does not have are listed under
    ``missing``."""
    return _answer(request, project, [run], metric, start, end)


@router.get(
    "/projects/{project}/columns",
    summary="Every original point of series of several runs, as columns (JSON or Arrow)",
    responses={200: {"content": {"application/json": {}, ARROW_STREAM: {}}}},
)
def read_columns_of_runs(
    request: Request,
    project: str,
    runs: RunNames,
    metric: Metrics = None,
    start: StartStep = None,
    end: EndStep = None,
) -> Response:
    """``…/runs/{run}/columns`` for each named run, in one answer. An unknown run is a
    404."""
    return _answer(request, project, run_names(runs), metric, start, end)


def _answer(
    request: Request,
    project: str,
    runs: Sequence[str],
    metric: list[str] | None,
    start: int | None,
    end: int | None,
) -> Response:
    if start is not None and end is not None and end < start:
        raise InvalidInput((Violation("end", "must be at least start"),))
    names = None if metric is None else list(dict.fromkeys(metric))
    arrow = ARROW_STREAM in request.headers.get("accept", "")
    database = app_state(request).database
    with database.connect() as connection:
        series, missing = _resolve(connection, project, runs, names)
        if sum(item.count for item in series) <= _INLINE_POINTS:
            chunks = (
                _arrow(connection, series, start, end)
                if arrow
                else (_json(connection, series, missing, start, end))
            )
            body = b"".join(chunks)
            return Response(body, media_type=ARROW_STREAM if arrow else "application/json")
    return StreamingResponse(
        _streamed(database, series, missing, start, end, arrow),
        media_type=ARROW_STREAM if arrow else "application/json",
    )


def _resolve(
    connection: Connection, project: str, runs: Sequence[str], names: list[str] | None
) -> tuple[list[_Series], list[dict[str, str]]]:
    """The series to read, in request order (a run's own in name order without names), and
    the named ones a run lacks."""
    series: list[_Series] = []
    missing: list[dict[str, str]] = []
    ids = point_columns.run_ids(connection, project, runs)
    for run in runs:
        run_id = ids.get(run)
        if run_id is None:
            raise NotFound(f"run {run!r} not found in project {project!r}")
        stored = {name: (metric_id, count) for name, metric_id, count in
                  point_columns.series_of_run(connection, run_id)}  # fmt: skip
        for name in stored if names is None else names:
            found = stored.get(name)
            if found is None:
                missing.append({"run": run, "metric": name})
            else:
                series.append(_Series(run, name, *found))
        if len(series) > BULK_SERIES_MAX:
            raise InvalidInput(
                (Violation("metric", f"a read takes at most {BULK_SERIES_MAX} series"),)
            )
    return series, missing


def _streamed(
    database: Database,
    series: list[_Series],
    missing: list[dict[str, str]],
    start: int | None,
    end: int | None,
    arrow: bool,
) -> Iterator[bytes]:
    with database.connect() as connection:
        if arrow:
            yield from _arrow(connection, series, start, end)
        else:
            yield from _json(connection, series, missing, start, end)


# JSON ---------------------------------------------------------------------------------------


def _json(
    connection: Connection,
    series: list[_Series],
    missing: list[dict[str, str]],
    start: int | None,
    end: int | None,
) -> Iterator[bytes]:
    yield b'{"series":['
    for index, item in enumerate(series):
        columns = point_columns.read_series(connection, item.metric_id, start, end)
        invalid = point_columns.read_invalid(connection, item.metric_id, start, end)
        head = {"run": item.run, "metric": item.metric}
        yield (b"," if index else b"") + orjson.dumps(head)[:-1] + b',"steps":'
        yield from _json_array(columns.steps)
        yield b',"values":'
        yield from _json_array(columns.values)
        yield b',"times":'
        yield from _json_array(columns.times)
        marked = {"steps": [step for step, _ in invalid], "kinds": [kind for _, kind in invalid]}
        yield b',"invalid":' + orjson.dumps(marked) + b"}"
    yield b'],"missing":' + orjson.dumps(missing) + b"}"


def _json_array(items: Any) -> Iterator[bytes]:
    """A NumPy array as a JSON array, a piece at a time."""
    if len(items) <= _JSON_PIECE:
        yield orjson.dumps(items, option=orjson.OPT_SERIALIZE_NUMPY)
        return
    yield b"["
    for begin in range(0, len(items), _JSON_PIECE):
        text = orjson.dumps(items[begin : begin + _JSON_PIECE], option=orjson.OPT_SERIALIZE_NUMPY)
        yield (b"," if begin else b"") + text[1:-1]
    yield b"]"


# Arrow --------------------------------------------------------------------------------------


@functools.cache
def arrow_schema() -> pa.Schema:
    import pyarrow as pa

    # A batch names one run and one metric: a one-entry dictionary, a byte a row.
    names = pa.dictionary(pa.int8(), pa.utf8())
    return pa.schema(
        [
            pa.field("run", names, nullable=False),
            pa.field("metric", names, nullable=False),
            pa.field("step", pa.int64(), nullable=False),
            pa.field("value", pa.float64(), nullable=False),
            pa.field("time", pa.float64()),
        ]
    )


def _arrow(
    connection: Connection, series: list[_Series], start: int | None, end: int | None
) -> Iterator[bytes]:
    """The series as an Arrow IPC stream, a record batch per page of blocks; each batch
    names its run and metric through a one-entry dictionary."""
    import pyarrow as pa

    schema = arrow_schema()
    sink = io.BytesIO()
    writer = pa.ipc.new_stream(sink, schema)

    def written() -> bytes:
        data = sink.getvalue()
        sink.seek(0)
        sink.truncate()
        return data

    for item in series:
        names = (pa.array([item.run]), pa.array([item.metric]))
        for page in point_columns.iter_pages(connection, item.metric_id, start, end):
            writer.write_batch(_batch(schema, names, page.steps, page.values, page.times))
            yield written()
        invalid = point_columns.read_invalid(connection, item.metric_id, start, end)
        if invalid:
            steps = pa.array([step for step, _ in invalid], pa.int64())
            values = pa.array([point_columns.INVALID_VALUES[kind] for _, kind in invalid])
            times = pa.nulls(len(invalid), pa.float64())
            writer.write_batch(_batch(schema, names, steps, values, times))
    writer.close()
    yield written()


def _batch(schema: pa.Schema, names: tuple[pa.Array, pa.Array], *columns: Any) -> Any:
    import numpy as np
    import pyarrow as pa

    indices = pa.array(np.zeros(len(columns[0]), dtype=np.int8))
    labels = [pa.DictionaryArray.from_arrays(indices, dictionary) for dictionary in names]
    arrays = [pa.array(c) if isinstance(c, np.ndarray) else c for c in columns]
    return pa.record_batch([*labels, *arrays], schema=schema)
