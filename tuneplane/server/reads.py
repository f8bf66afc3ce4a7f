"""The JSON read API under ``/api/v1``. Every page of the dashboard is a client of it."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request
from sqlalchemy import Connection
from starlette.responses import Response, StreamingResponse

from tuneplane.contract.arena import ALERT_LEVELS
from tuneplane.contract.errors import InvalidInput, NotFound, Violation
from tuneplane.contract.limits import (
    CHART_SERIES_MAX,
    MAX_POINTS_MAX,
    POINTS_PAGE_DEFAULT,
    POINTS_PAGE_MAX,
    QUERY_INTEGER_MAX,
    STEP_MAX,
)
from tuneplane.contract.run_query import (
    RUNS_PAGE_DEFAULT,
    RUNS_PAGE_MAX,
    Field,
    config_value,
    parse_columns,
    parse_query,
    parse_sort,
)
from tuneplane.server.access import caller_of, permissions
from tuneplane.server.guard import GuardedRoute
from tuneplane.server.models import (
    AlertOut,
    Downsampled,
    InvalidPointOut,
    MetricOut,
    MetricsDownsampled,
    PointPage,
    ProjectOut,
    RunOut,
    RunsDownsampled,
    RunsMetrics,
)
from tuneplane.server.responses import JSON
from tuneplane.server.run_json import run_json
from tuneplane.server.state import app_state
from tuneplane.store import access, catalog, evaluation, points, run_search
from tuneplane.store.run_summary import run_summary
from tuneplane.store.runs import differing_attempt_configs

router = APIRouter(prefix="/api/v1", tags=["read"], route_class=GuardedRoute)

RUN = "/projects/{project}/runs/{run}"

# Query parameters shared by the point reads.
MaxPoints = Annotated[int, Query(ge=1, le=MAX_POINTS_MAX)]
SomeMaxPoints = Annotated[int | None, Query(ge=1, le=MAX_POINTS_MAX)]
StartStep = Annotated[int | None, Query(ge=0, le=STEP_MAX, description="first step (inclusive)")]
EndStep = Annotated[int | None, Query(ge=0, le=STEP_MAX, description="last step (inclusive)")]
PageLimit = Annotated[int, Query(ge=1, le=POINTS_PAGE_MAX)]
RunNames = Annotated[str, Query(description="run names, comma-separated")]
XMetric = Annotated[
    str | None,
    Query(
        description="another metric of the run: each bucket gains x, that metric's value at "
        "the bucket's last step (or its last value before it; null before its first)",
        min_length=1,
    ),
]


@router.get("/projects", response_model=list[ProjectOut])
def list_projects(request: Request) -> Response:
    """The projects the caller may read (a private one is absent for everyone else)."""
    with app_state(request).database.connect() as connection:
        readable = access.readable_project_names(connection, caller_of(request).actor)
        rows = [
            row
            for row in catalog.list_projects(connection)
            if readable is None or row.name in readable
        ]
    return JSON(
        [
            {
                "project": r.name,
                "display_name": r.display_name,
                "created_at": r.created_at,
                "run_count": r.run_count,
                "updated_at": r.updated_at,
            }
            for r in rows
        ]
    )


@router.get("/projects/{project}/runs", response_model=list[RunOut])
def list_runs(
    request: Request,
    project: str,
    q: Annotated[str | None, Query(description="a search (docs/api.md, Searching runs)")] = None,
    sort: Annotated[str | None, Query(description="FIELD or -FIELD (descending)")] = None,
    columns: Annotated[str | None, Query(description="config.KEY,METRIC.STAT,…")] = None,
    limit: Annotated[int, Query(ge=1, le=RUNS_PAGE_MAX)] = RUNS_PAGE_DEFAULT,
    offset: Annotated[int, Query(ge=0, le=QUERY_INTEGER_MAX)] = 0,
) -> Response:
    """The project's runs matching ``q``, in ``sort`` order (oldest first without one), a
    page of ``limit`` from ``offset``; the header ``X-Total-Count`` says how many match.
    ``columns`` adds the named config values and summary metrics to each run, as
    ``columns``. ``latest_checkpoint`` is the checkpoint of the run's latest evaluated round
    that recorded one (with that round), or null. For a share link, just the run it opens."""
    terms, order, fields = parse_query(q or ""), parse_sort(sort), parse_columns(columns)
    actor = caller_of(request).actor
    with app_state(request).database.connect() as connection:
        found = run_search.search_runs(connection, project, terms, order, fields, limit, offset)
        you = permissions(request, connection, project)
        shown = [row for row in found.rows if actor.share_run_id in (None, row.id)]
        marks = evaluation.latest_checkpoints(connection, [row.id for row in shown])
    answer = [
        {
            **run_json(project, row),
            "you": you,
            "latest_checkpoint": marks.get(row.id),
            **_columns(fields, row, found),
        }
        for row in shown
    ]
    total = found.total if actor.share_run_id is None else len(shown)
    return JSON(answer, headers={"X-Total-Count": str(total)})


def _columns(
    fields: Sequence[Field], row: catalog.RunRow, found: run_search.RunPage
) -> dict[str, object]:
    if not fields:
        return {}
    values: dict[str, object] = {}
    for field in fields:
        if field.kind == "config":
            values[field.text] = config_value(row.config, field.path)
        else:
            values[field.text] = found.metric_columns.get(row.id, {}).get(field.text)
    return {"columns": values}


@router.get(RUN, response_model=RunOut)
def get_run(request: Request, project: str, run: str) -> Response:
    with app_state(request).database.connect() as connection:
        row = catalog.get_run(connection, project, run)
        you = permissions(request, connection, project, row.id)
        differing = differing_attempt_configs(connection, row.id, row.config)
        summary = run_summary(connection, row.id)
    return JSON(
        {**run_json(project, row), "attempt_configs": differing, "summary": summary, "you": you}
    )


def metric_json(summary: points.MetricSummary) -> dict[str, object]:
    return {
        "metric": summary.name,
        "count": summary.count,
        "invalid_count": summary.invalid_count,
        "corrected": summary.corrected,
        "min": summary.min_value,
        "max": summary.max_value,
        "last": summary.last_value,
        "first_step": summary.first_step,
        "last_step": summary.last_step,
    }


def run_names(runs: str) -> list[str]:
    """The distinct run names of a comma-separated ``runs`` parameter, in order."""
    names = list(dict.fromkeys(name for name in runs.split(",") if name))
    if not 1 <= len(names) <= CHART_SERIES_MAX:
        raise InvalidInput((Violation("runs", f"name 1-{CHART_SERIES_MAX} runs, comma-separated"),))
    return names


@router.get("/projects/{project}/metrics", response_model=RunsMetrics)
def list_metrics_of_runs(
    request: Request,
    project: str,
    runs: RunNames,
) -> Response:
    """``…/runs/{run}/metrics`` for each named run of the project, in one request (a
    comparison of many runs). An unknown run is a 404."""
    answer = []
    with app_state(request).database.connect() as connection:
        for name in run_names(runs):
            run_row = catalog.get_run(connection, project, name)
            summaries = points.list_summaries(connection, run_row.id)
            answer.append({"run": name, "metrics": [metric_json(s) for s in summaries]})
    return JSON({"runs": answer})


@router.get(RUN + "/metrics", response_model=list[MetricOut])
def list_metrics(
    request: Request,
    project: str,
    run: str,
    metric: Annotated[
        list[str] | None, Query(description="only this metric (repeat for more); any name")
    ] = None,
) -> Response:
    """Every metric of the run with its summary; ``metric=`` keeps the named ones (an
    unknown one is a 404)."""
    with app_state(request).database.connect() as connection:
        run_row = catalog.get_run(connection, project, run)
        summaries = points.list_summaries(connection, run_row.id)
    if metric is not None:
        by_name = {s.name: s for s in summaries}
        for name in metric:
            if name not in by_name:
                raise NotFound(f"metric {name!r} not found in this run")
        summaries = [by_name[name] for name in dict.fromkeys(metric)]
    return JSON([metric_json(s) for s in summaries])


def _parse_cursor(cursor: str | None) -> tuple[int, int] | None:
    if cursor is None:
        return None
    step, _, event = cursor.partition(":")
    if not (
        step.isascii()
        and step.isdigit()
        and event.isascii()
        and event.isdigit()
        and int(step) <= STEP_MAX
        and int(event) <= QUERY_INTEGER_MAX
    ):
        raise InvalidInput((Violation("cursor", "must be a next_cursor value from a page"),))
    return int(step), int(event)


@router.get(
    RUN + "/points/{metric:path}",
    response_model=PointPage | Downsampled,
    summary="Points of one metric: raw pages, or downsampled to max_points buckets",
)
def read_points(
    request: Request,
    project: str,
    run: str,
    metric: str,
    max_points: SomeMaxPoints = None,
    start: StartStep = None,
    end: EndStep = None,
    cursor: str | None = None,
    limit: PageLimit = POINTS_PAGE_DEFAULT,
    x: XMetric = None,
) -> Response:
    """Metric names may contain ``/``: ``…/points/train/loss`` reads ``train/loss``.

    Without ``max_points``: original points in step order, ``limit`` per page; pass the
    answer's ``next_cursor`` as ``cursor`` for the next page.

    With ``max_points=N``: at most N buckets over about equal step ranges, each with its
    exact step range, count, min, max, mean and last value, computed in the store, so spikes
    stay visible however long the series. A series that fits is returned one point per
    bucket with ``downsampled: false``. With ``x=<metric>`` each bucket also carries that
    metric's value at its last step, to chart the series over it (an epoch, a token count).
    """
    _x_needs_max_points(x, max_points)
    with app_state(request).database.connect() as connection:
        run_row = catalog.get_run(connection, project, run)
        metric_id = catalog.get_metric_id(connection, run_row.id, metric)
        if max_points is None:
            return JSON(_page_json(connection, metric, metric_id, cursor, start, end, limit))
        x_id = _x_id(connection, run_row.id, x)
        chart = _chart_json(connection, metric_id, start, end, max_points, x_id)
    return JSON({"metric": metric, **chart})


def _x_needs_max_points(x: str | None, max_points: int | None) -> None:
    if x is not None and max_points is None:
        raise InvalidInput((Violation("x", "pairs buckets only: give max_points too"),))


#: A run without the x metric: its buckets' x are all null.
NO_X = -1


def _x_id(connection: Connection, run_id: int, x: str | None) -> int | None:
    """The x metric's series of a run, NO_X when the run has none, None when none is asked."""
    if x is None:
        return None
    found = catalog.find_metric_id(connection, run_id, x)
    return NO_X if found is None else found


def _page_json(
    connection: Connection,
    metric: str,
    metric_id: int,
    cursor: str | None,
    start: int | None,
    end: int | None,
    limit: int,
) -> dict[str, object]:
    """One page of original points in step order, and the cursor of the next."""
    page = points.read_page(
        connection, metric_id, after=_parse_cursor(cursor), start=start, end=end, limit=limit
    )
    next_cursor = f"{page[-1].step}:{page[-1].event_id}" if len(page) == limit else None
    return {
        "metric": metric,
        "points": [
            {"step": p.step, "value": p.value, "log_id": p.log_id, "time": p.time} for p in page
        ],
        "next_cursor": next_cursor,
    }


def _chart_json(
    connection: Connection,
    metric_id: int,
    start: int | None,
    end: int | None,
    max_points: int,
    x_id: int | None = None,
) -> dict[str, object]:
    """A series reduced to at most ``max_points`` buckets within ``start..end``; with
    ``x_id`` (see _x_id), each bucket paired with that series' value at its last step."""
    bounds = points.step_bounds(connection, metric_id)
    assert bounds is not None
    lo = max(bounds[0], start if start is not None else bounds[0])
    hi = min(bounds[1], end if end is not None else bounds[1])
    chart = (
        points.read_chart(connection, metric_id, lo=lo, hi=hi, max_points=max_points)
        if lo <= hi
        else points.Chart(0, False, [])
    )
    buckets: list[dict[str, object]] = [
        {
            "step_min": b.step_min,
            "step_max": b.step_max,
            "count": b.count,
            "min": b.min,
            "max": b.max,
            "mean": b.mean,
            "last": b.last,
            "time": b.time_last,
        }
        for b in chart.buckets
    ]
    if x_id is not None:
        steps = [b.step_max for b in chart.buckets]
        xs = [None] * len(steps) if x_id == NO_X else points.values_at(connection, x_id, steps)
        for bucket, x in zip(buckets, xs, strict=True):
            bucket["x"] = x
    return {"downsampled": chart.downsampled, "total_points": chart.total, "buckets": buckets}


def _charts(
    connection: Connection,
    label: str,
    series: list[tuple[str, int | None, int | None]],
    start: int | None,
    end: int | None,
    max_points: int,
) -> tuple[list[dict[str, object]], list[str]]:
    """The reduction of each named series (``{label: name, …}``; each with its x series, see
    _x_id), and the names that have no such series."""
    found: list[dict[str, object]] = []
    missing: list[str] = []
    for name, metric_id, x_id in series:
        if metric_id is None:
            missing.append(name)
        else:
            chart = _chart_json(connection, metric_id, start, end, max_points, x_id)
            found.append({label: name, **chart})
    return found, missing


@router.get(
    RUN + "/points",
    response_model=MetricsDownsampled | PointPage,
    summary="Several metrics of one run, each downsampled to max_points buckets; "
    "or one metric's original points",
)
def read_points_of_metrics(
    request: Request,
    project: str,
    run: str,
    metric: Annotated[list[str], Query(description="a metric name; repeat for more")],
    max_points: SomeMaxPoints = None,
    start: StartStep = None,
    end: EndStep = None,
    cursor: str | None = None,
    limit: PageLimit = POINTS_PAGE_DEFAULT,
    x: XMetric = None,
) -> Response:
    """With ``max_points=N``: what ``…/points/{metric}?max_points=N`` answers, for each
    named metric of the run in one request (the new points of every chart of a live run).
    Metrics the run does not have are listed under ``missing``.

    Without ``max_points``: one metric's original points, a page at a time, as
    ``…/points/{metric}`` answers. The query form reads any metric name, including those a
    path cannot carry (``a/../b``, ``.``, names with ``%``, ``?`` or ``#``)."""
    names = list(dict.fromkeys(metric))
    _x_needs_max_points(x, max_points)
    if max_points is None:
        if len(names) != 1:
            raise InvalidInput(
                (Violation("metric", "name exactly one metric when max_points is not given"),)
            )
        with app_state(request).database.connect() as connection:
            run_id = catalog.get_run(connection, project, run).id
            metric_id = catalog.get_metric_id(connection, run_id, names[0])
            page = _page_json(connection, names[0], metric_id, cursor, start, end, limit)
        return JSON(page)
    if len(names) > CHART_SERIES_MAX:
        raise InvalidInput((Violation("metric", f"name at most {CHART_SERIES_MAX} metrics"),))
    with app_state(request).database.connect() as connection:
        run_id = catalog.get_run(connection, project, run).id
        x_id = _x_id(connection, run_id, x)
        series = [(name, catalog.find_metric_id(connection, run_id, name), x_id) for name in names]
        found, missing = _charts(connection, "metric", series, start, end, max_points)
    return JSON({"run": run, "metrics": found, "missing": missing})


@router.get(
    "/projects/{project}/points/{metric:path}",
    response_model=RunsDownsampled,
    summary="One metric of several runs, each downsampled to max_points buckets",
)
def read_points_of_runs(
    request: Request,
    project: str,
    metric: str,
    runs: RunNames,
    max_points: MaxPoints,
    start: StartStep = None,
    end: EndStep = None,
    x: XMetric = None,
) -> Response:
    """What ``…/runs/{run}/points/{metric}?max_points=N`` answers, for each named run in
    one request (a comparison of many runs). Runs without the metric are listed under
    ``missing``; an unknown run is a 404."""
    return _points_of_runs(request, project, metric, runs, max_points, start, end, x)


@router.get(
    "/projects/{project}/points",
    response_model=RunsDownsampled,
    summary="One metric (named in the query) of several runs, downsampled",
)
def read_points_of_runs_by_query(
    request: Request,
    project: str,
    metric: Annotated[str, Query(description="the metric name; any name")],
    runs: RunNames,
    max_points: MaxPoints,
    start: StartStep = None,
    end: EndStep = None,
    x: XMetric = None,
) -> Response:
    """``…/points/{metric}?runs=…`` with the metric in the query, which carries any name
    (a path cannot carry ``a/../b``, ``.``, or names with ``%``, ``?`` or ``#``)."""
    return _points_of_runs(request, project, metric, runs, max_points, start, end, x)


def _points_of_runs(
    request: Request,
    project: str,
    metric: str,
    runs: str,
    max_points: int,
    start: int | None,
    end: int | None,
    x: str | None = None,
) -> Response:
    with app_state(request).database.connect() as connection:
        series: list[tuple[str, int | None, int | None]] = []
        for name in run_names(runs):
            run_id = catalog.get_run(connection, project, name).id
            metric_id = catalog.find_metric_id(connection, run_id, metric)
            series.append((name, metric_id, _x_id(connection, run_id, x)))
        found, missing = _charts(connection, "run", series, start, end, max_points)
    return JSON({"metric": metric, "runs": found, "missing": missing})


@router.get(RUN + "/metrics/{metric:path}", response_model=MetricOut)
def get_metric(request: Request, project: str, run: str, metric: str) -> Response:
    """One metric's summary (names may contain ``/``)."""
    with app_state(request).database.connect() as connection:
        run_row = catalog.get_run(connection, project, run)
        metric_id = catalog.get_metric_id(connection, run_row.id, metric)
        summary = points.get_summary(connection, metric_id)
    return JSON(metric_json(summary))


@router.get(RUN + "/invalid/{metric:path}", response_model=list[InvalidPointOut])
def read_invalid(request: Request, project: str, run: str, metric: str) -> Response:
    """Steps at which the metric was NaN or ±inf (``kind``: nan, inf, -inf)."""
    return _invalid(request, project, run, metric)


@router.get(RUN + "/invalid", response_model=list[InvalidPointOut])
def read_invalid_by_query(
    request: Request,
    project: str,
    run: str,
    metric: Annotated[str, Query(description="the metric name; any name")],
) -> Response:
    """``…/invalid/{metric}`` with the metric in the query, which carries any name."""
    return _invalid(request, project, run, metric)


def _invalid(request: Request, project: str, run: str, metric: str) -> Response:
    with app_state(request).database.connect() as connection:
        run_row = catalog.get_run(connection, project, run)
        metric_id = catalog.get_metric_id(connection, run_row.id, metric)
        rows = points.read_invalid(connection, metric_id)
    return JSON([{"step": step, "kind": kind} for step, kind in rows])


@router.get(RUN + "/alerts", response_model=list[AlertOut])
def list_alerts(request: Request, project: str, run: str, level: str | None = None) -> Response:
    """The run's alerts, newest first; ``level`` keeps one severity."""
    if level is not None and level not in ALERT_LEVELS:
        raise InvalidInput((Violation("level", "must be one of info, warn, error"),))
    with app_state(request).database.connect() as connection:
        run_row = catalog.get_run(connection, project, run)
        rows = catalog.list_alerts(connection, run_row.id, level)
    return JSON(
        [
            {
                "alert_id": r.alert_id,
                "title": r.title,
                "text": r.text,
                "level": r.level,
                "step": r.step,
                "received_at": r.received_at,
            }
            for r in rows
        ]
    )


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="milliseconds")


@router.get(
    RUN + "/export.csv",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/csv": {}}}},
)
def export_csv(request: Request, project: str, run: str) -> Response:
    """Every original point, streamed: ``step,metric,value,log_id,time`` (time in UTC)."""
    database = app_state(request).database
    with database.connect() as connection:
        run_id = catalog.get_run(connection, project, run).id

    def rows() -> Iterator[str]:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(("step", "metric", "value", "log_id", "time"))
        with database.connect() as connection:
            for count, (step, metric, value, log_id, time) in enumerate(
                points.iter_export_rows(connection, run_id), start=1
            ):
                writer.writerow((step, metric, repr(value), log_id, _iso(time)))
                if count % 2000 == 0:
                    yield buffer.getvalue()
                    buffer.seek(0)
                    buffer.truncate()
        yield buffer.getvalue()

    filename = f"{project}-{run}.csv"
    return StreamingResponse(
        rows(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )
