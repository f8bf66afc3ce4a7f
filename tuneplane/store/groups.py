"""The runs of one group charted as one series: each run's bucketed chart read (see
``points.read_chart``) placed on a grid common to the group, by step or by another metric's
value, and per grid cell the mean of the runs' values there, their lowest and highest, their
standard deviation and how many runs have a point there."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy import Connection

from tuneplane.store import points

#: The grid cell an x (a step, or the x metric's value) falls in.
_CellOf = Callable[[float], int]


@dataclass(frozen=True, slots=True)
class Member:
    """One run of a group: its series of the metric, the series of the x metric (None when
    the run has none, or when the group is paired by step), and when the run was created."""

    metric_id: int
    x_id: int | None
    created_at: float


@dataclass(frozen=True, slots=True)
class GroupBucket:
    """One grid cell. A run's value there is the mean of its points in the cell; ``mean``,
    ``min``, ``max`` and ``std`` (population, over runs) are of those values, ``n`` runs'."""

    x: float
    step_min: int
    step_max: int
    mean: float
    min: float
    max: float
    std: float
    n: int
    time: float
    elapsed: float


@dataclass(frozen=True, slots=True)
class GroupChart:
    total: int
    downsampled: bool
    buckets: list[GroupBucket]


@dataclass(slots=True)
class _Cell:
    """One run's points in one grid cell."""

    step_min: int
    step_max: int
    count: int = 0
    total: float = 0.0
    x_total: float = 0.0
    time: float = 0.0


@dataclass(slots=True)
class _Read:
    """One run's buckets with the x each is placed at (its step, or the x metric's value)."""

    member: Member
    buckets: list[points.Bucket]
    xs: list[float]
    cells: dict[int, _Cell] = field(default_factory=dict)


def read_group(
    connection: Connection,
    members: Sequence[Member],
    *,
    lo: int,
    hi: int,
    max_points: int,
    over_x: bool,
) -> GroupChart:
    """Steps ``lo..hi`` of every member, on at most ``max_points`` grid cells.

    By step (``over_x`` false), every member is read over the same range and bucket width,
    so its buckets fall on the grid's cells (a cell is a bucket's step range). Over another
    metric, each bucket is placed at that metric's value at its last step (as a chart over it
    is) and the cells are equal parts of the x range the members cover; a run without the
    x metric has no place on it."""
    total = 0
    reads: list[_Read] = []
    for member in members:
        chart = points.read_chart(connection, member.metric_id, lo=lo, hi=hi, max_points=max_points)
        total += chart.total
        if not over_x:
            xs = [float(b.step_min) for b in chart.buckets]
            reads.append(_Read(member, chart.buckets, xs))
        elif member.x_id is not None:
            paired = points.values_at(connection, member.x_id, [b.step_max for b in chart.buckets])
            kept = [(b, x) for b, x in zip(chart.buckets, paired, strict=True) if x is not None]
            reads.append(_Read(member, [b for b, _ in kept], [x for _, x in kept]))
    cell_of = _step_cells(lo, hi, max_points) if not over_x else _x_cells(reads, max_points)
    for read in reads:
        _fill(read, cell_of)
    buckets = _combine(reads, over_x)
    placed = sum(len(read.cells) for read in reads)
    return GroupChart(total, total > placed, buckets)


def _step_cells(lo: int, hi: int, max_points: int) -> _CellOf:
    width = -(-(hi - lo + 1) // max_points)
    return lambda x: (int(x) - lo) // width


def _x_cells(reads: Sequence[_Read], max_points: int) -> _CellOf:
    xs = [x for read in reads for x in read.xs]
    if not xs:
        return lambda x: 0
    low, high = min(xs), max(xs)
    if high <= low:
        return lambda x: 0
    return lambda x: min(max_points - 1, int((x - low) / (high - low) * max_points))


def _fill(read: _Read, cell_of: _CellOf) -> None:
    for bucket, x in zip(read.buckets, read.xs, strict=True):
        index = cell_of(x)
        cell = read.cells.get(index)
        if cell is None:
            cell = read.cells[index] = _Cell(bucket.step_min, bucket.step_max)
        cell.step_min = min(cell.step_min, bucket.step_min)
        cell.step_max = max(cell.step_max, bucket.step_max)
        cell.count += bucket.count
        cell.total += bucket.sum
        cell.x_total += x * bucket.count
        cell.time = max(cell.time, bucket.time_last)


def _combine(reads: Sequence[_Read], over_x: bool) -> list[GroupBucket]:
    out: list[GroupBucket] = []
    for index in sorted({index for read in reads for index in read.cells}):
        here = [(read.member, read.cells[index]) for read in reads if index in read.cells]
        values = [cell.total / cell.count for _, cell in here]
        n = len(values)
        mean = math.fsum(values) / n
        step_min = min(cell.step_min for _, cell in here)
        step_max = max(cell.step_max for _, cell in here)
        x = (
            math.fsum(cell.x_total / cell.count for _, cell in here) / n
            if over_x
            else (step_min + step_max) / 2
        )
        out.append(
            GroupBucket(
                x=x,
                step_min=step_min,
                step_max=step_max,
                mean=mean,
                min=min(values),
                max=max(values),
                std=math.sqrt(math.fsum((v - mean) ** 2 for v in values) / n),
                n=n,
                time=math.fsum(cell.time for _, cell in here) / n,
                elapsed=math.fsum(cell.time - member.created_at for member, cell in here) / n,
            )
        )
    return out
