"""Packing a series' points into blocks: the byte layout and the per-block rollup.

A block holds consecutive points of one series in (step, event) order as four packed
little-endian arrays (steps and event ids as int64, values and receive times as float64),
and its rollup: count, min, max, sum, last value and last time. Blocks are cut at step
boundaries, so the points of one step never span two blocks and a block's first step names
it within its series.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

#: Points per block. Appends rewrite the series' last block, so a smaller block keeps small
#: batches cheap; a larger one means fewer rollup rows per chart.
BLOCK_POINTS: Final = 512

_SWAP: Final = sys.byteorder != "little"


def pack(typecode: str, items: Sequence[int] | Sequence[float]) -> bytes:
    packed = array(typecode, items)
    if _SWAP:
        packed.byteswap()
    return packed.tobytes()


def unpack(typecode: str, data: bytes) -> array:  # type: ignore[type-arg]
    items = array(typecode)
    items.frombytes(data)
    if _SWAP:
        items.byteswap()
    return items


@dataclass(slots=True)
class Points:
    """Points of one series in (step, event) order, as parallel lists or, unpacked from a
    block, arrays (which extend and pack again without a conversion per point)."""

    steps: list[int] | array[int]
    events: list[int] | array[int]
    values: list[float] | array[float]
    times: list[float] | array[float]

    @classmethod
    def unpacked(cls, steps: bytes, events: bytes, values: bytes, times: bytes) -> Points:
        return cls(unpack("q", steps), unpack("q", events), unpack("d", values), unpack("d", times))

    def __len__(self) -> int:
        return len(self.steps)

    def extend(self, other: Points) -> None:
        self.steps.extend(other.steps)
        self.events.extend(other.events)
        self.values.extend(other.values)
        self.times.extend(other.times)


@dataclass(frozen=True, slots=True)
class Columns:
    """A block unpacked for charts: steps, values and receive times as arrays (no event
    ids, no conversion to lists; ``bisect``, slicing and ``min``/``max``/``sum`` work on
    them directly)."""

    steps: array  # type: ignore[type-arg]
    values: array  # type: ignore[type-arg]
    times: array  # type: ignore[type-arg]

    @classmethod
    def unpacked(cls, steps: bytes, values: bytes, times: bytes) -> Columns:
        return cls(unpack("q", steps), unpack("d", values), unpack("d", times))


#: A block as stored: (first step, last step, count, min, max, sum, last value, last time,
#: steps, events, values, times).
BlockRow = tuple[int, int, int, float, float, float, float, float, bytes, bytes, bytes, bytes]


def cut(points: Points) -> Iterator[BlockRow]:
    """As few blocks as hold the points, of even sizes up to ``BLOCK_POINTS`` (more only
    when one step has more), never splitting a step. Even sizes keep points merged into
    the middle of a series from leaving a small block behind."""
    steps = points.steps
    total = len(steps)
    size = -(-total // -(-total // BLOCK_POINTS)) if total else BLOCK_POINTS
    start = 0
    while start < total:
        end = min(start + size, total)
        while end < total and steps[end] == steps[end - 1]:
            end += 1
        values = points.values[start:end]
        yield (
            steps[start],
            steps[end - 1],
            end - start,
            min(values),
            max(values),
            sum(values),
            values[-1],
            points.times[end - 1],
            pack("q", steps[start:end]),
            pack("q", points.events[start:end]),
            pack("d", values),
            pack("d", points.times[start:end]),
        )
        start = end
