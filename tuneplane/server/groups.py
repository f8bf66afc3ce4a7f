"""Groups charted as one: ``GET …/groups/points`` aggregates, per ``group`` of the named
runs, one metric's bucketed series into a mean with its min, max and standard deviation."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Query, Request
from sqlalchemy import Connection
from starlette.responses import Response

from tuneplane.server.guard import GuardedRoute
from tuneplane.server.models import GroupsDownsampled
from tuneplane.server.reads import EndStep, MaxPoints, RunNames, StartStep, XMetric
from tuneplane.server.reads import run_names as parse_run_names
from tuneplane.server.responses import JSON
from tuneplane.server.state import app_state
from tuneplane.store import catalog, groups, points

router = APIRouter(prefix="/api/v1", tags=["read"], route_class=GuardedRoute)

MetricName = Annotated[str, Query(description="the metric name; any name")]


@router.get(
    "/projects/{project}/groups/points",
    response_model=GroupsDownsampled,
    summary="One metric of the named runs, aggregated per group: mean, min, max, std, n",
)
def read_group_points(
    request: Request,
    project: str,
    metric: MetricName,
    runs: RunNames,
    max_points: MaxPoints,
    start: StartStep = None,
    end: EndStep = None,
    x: XMetric = None,
) -> Response:
    """The named runs that have a ``group`` are charted per group: their series are reduced
    as ``…/points?runs=`` reduces them, on one grid of at most ``max_points`` cells (steps of
    equal width; with ``x=<metric>``, equal parts of the range of that metric's values, each
    bucket placed at its value at the bucket's last step), and each cell gives the mean of
    the runs' values there, their min, max and population standard deviation, and ``n``, how
    many runs have a point there. A group's ``invalid`` lists the steps in range at which
    some of its runs reported NaN or an infinity (``runs``: which; ``kind``: the first's), so
    a chart marks them on the mean line and says how many runs were valid there. Runs
    without a group are listed under ``ungrouped``; runs without the metric under their
    group's ``missing``; an unknown run is a 404."""
    names = parse_run_names(runs)
    with app_state(request).database.connect() as connection:
        members: dict[str, list[tuple[str, catalog.RunRow]]] = {}
        ungrouped: list[str] = []
        for name in names:
            row = catalog.get_run(connection, project, name)
            if row.group:
                members.setdefault(row.group, []).append((name, row))
            else:
                ungrouped.append(name)
        answer = [
            _group_json(connection, group, rows, metric, (start, end), max_points, x)
            for group, rows in members.items()
        ]
    return JSON({"metric": metric, "groups": answer, "ungrouped": ungrouped})


def _group_json(
    connection: Connection,
    group: str,
    rows: list[tuple[str, catalog.RunRow]],
    metric: str,
    steps: tuple[int | None, int | None],
    max_points: int,
    x: str | None,
) -> dict[str, object]:
    found: list[str] = []
    missing: list[str] = []
    members: list[groups.Member] = []
    marked: dict[int, list[tuple[str, str]]] = {}
    lo, hi = None, None
    for name, row in rows:
        metric_id = catalog.find_metric_id(connection, row.id, metric)
        bounds = None if metric_id is None else points.step_bounds(connection, metric_id)
        if metric_id is None or bounds is None:
            missing.append(name)
            continue
        found.append(name)
        for step, kind in points.read_invalid(connection, metric_id):
            marked.setdefault(step, []).append((name, kind))
        x_id = None if x is None else catalog.find_metric_id(connection, row.id, x)
        members.append(groups.Member(metric_id, x_id, row.created_at))
        lo = bounds[0] if lo is None else min(lo, bounds[0])
        hi = bounds[1] if hi is None else max(hi, bounds[1])
    empty = {
        "group": group,
        "runs": found,
        "missing": missing,
        "downsampled": False,
        "invalid": [],
    }
    if lo is None or hi is None:
        return {**empty, "total_points": 0, "buckets": []}
    start, end = steps
    lo, hi = max(lo, start if start is not None else lo), min(hi, end if end is not None else hi)
    if lo > hi:
        return {**empty, "total_points": 0, "buckets": []}
    empty["invalid"] = [
        {"step": step, "kind": marked[step][0][1], "runs": [name for name, _ in marked[step]]}
        for step in sorted(marked)
        if lo <= step <= hi
    ]
    chart = groups.read_group(
        connection, members, lo=lo, hi=hi, max_points=max_points, over_x=x is not None
    )
    buckets = [asdict(b) for b in chart.buckets]
    return {
        **empty,
        "downsampled": chart.downsampled,
        "total_points": chart.total,
        "buckets": buckets,
    }
