"""What :class:`tuneplane.Api` answers in each format: rows of plain dicts, NumPy arrays,
pandas or polars frames. Series arrive as :class:`Series` (columns in step order, invalid
points among them with their NaN or infinity as the value and no time); NumPy, pandas and
polars are imported only when a format asks for them."""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

Format = Literal["list", "numpy", "pandas", "polars"]
FORMATS: Final[tuple[str, ...]] = ("list", "numpy", "pandas", "polars")


@dataclass(frozen=True, slots=True)
class Series:
    """One series' points in step order: lists, or NumPy arrays (``time`` NaN where the
    point has none); ``time`` None where the point has none in lists."""

    step: Any
    value: Any
    time: Any


def check_format(format: str) -> None:
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {format!r}")
    if format != "list":
        need(format)


def need(module: str) -> Any:
    """The module, or an ImportError saying what to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"format={module!r} needs {module} installed (pip install {module})"
        ) from exc


def records(rows: Sequence[Mapping[str, Any]], format: Format) -> Any:
    """Plain records (runs) as rows, or a frame."""
    if format == "pandas":
        return need("pandas").DataFrame.from_records(list(rows))
    if format == "polars":
        return need("polars").from_dicts(list(rows), infer_schema_length=None)
    if format == "numpy":
        raise ValueError("format='numpy' answers series only: ask for list, pandas or polars")
    return list(rows)


def points(series: Series, format: Format) -> Any:
    """One series: rows ``{step, value, time}``, a dict of arrays, or a frame."""
    if format == "list":
        return [
            {"step": step, "value": value, "time": time}
            for step, value, time in zip(series.step, series.value, series.time, strict=True)
        ]
    columns = {"step": series.step, "value": series.value, "time": series.time}
    return _frame(columns, format)


def history(named: Mapping[str, Series], format: Format) -> Any:
    """Several series side by side by step: a row per step holding each series' value there
    (its last, where it has several), absent (None, NaN) where it has none."""
    if format == "list":
        rows: dict[int, dict[str, Any]] = {}
        for name, series in named.items():
            for step, value in zip(series.step, series.value, strict=True):
                rows.setdefault(step, {"step": step})[name] = value
        return [rows[step] for step in sorted(rows)]
    np = need("numpy")
    steps = np.unique(np.concatenate([s.step for s in named.values()] or [np.empty(0, "i8")]))
    columns: dict[str, Any] = {"step": steps}
    for name, series in named.items():
        column = np.full(len(steps), np.nan)
        if len(series.step):
            # Sorted by step: a step's last point is where the next step starts.
            last = np.append(series.step[1:] != series.step[:-1], True)
            column[np.searchsorted(steps, series.step[last])] = series.value[last]
        columns[name] = column
    return _frame(columns, format)


def _frame(columns: dict[str, Any], format: Format) -> Any:
    if format == "pandas":
        return need("pandas").DataFrame(columns)
    if format == "polars":
        return need("polars").DataFrame(columns)
    return columns


__all__ = ["FORMATS", "Format", "Series", "check_format", "history", "points", "records"]
