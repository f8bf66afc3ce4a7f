"""Reading a server's runs and points from Python: :class:`Api`, the read side of the SDK.

Series are read whole through the bulk read (``GET …/runs/{run}/columns``), as an Arrow
stream when pyarrow is importable and as JSON columns otherwise, and answered as plain rows,
NumPy arrays, or pandas or polars frames (``format=``)::

    api = tuneplane.Api()                      # TUNEPLANE_URL and TUNEPLANE_API_KEY
    for run in api.runs("grpo"):
        print(run["run"], run["status"])
    loss = api.points("grpo", "qwen-7b", "train/loss", format="pandas")
    frame = api.history("grpo", "qwen-7b", ["train/loss", "train/reward"], format="pandas")

A read the server refuses raises :class:`~tuneplane.client.errors.ApiError` with its status
and the server's own message.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator, Sequence
from typing import Any, Final
from urllib.parse import quote

import httpx
import orjson

from tuneplane.client import frames
from tuneplane.client.errors import ApiError
from tuneplane.client.frames import Format, Series
from tuneplane.client.reads import error_message
from tuneplane.client.runner import api_key as default_api_key
from tuneplane.contract import environment
from tuneplane.contract.run_query import RUNS_PAGE_MAX
from tuneplane.contract.version import __version__

ARROW_STREAM: Final = "application/vnd.apache.arrow.stream"
#: Characters of metric names one request's query carries; more are read in several.
_QUERY_CHARS: Final = 6000
_INVALID: Final = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


class Api:
    """A server's read API with one API key. ``url`` defaults to ``TUNEPLANE_URL`` (else
    http://127.0.0.1:8000), ``api_key`` to ``TUNEPLANE_API_KEY`` (else the admin key a local
    ``tuneplane serve`` wrote in its data directory); ``transport`` as httpx takes it."""

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = (
            url or environment.URL_SETTING.get(os.environ) or environment.DEFAULT_URL
        ).rstrip("/")
        key = api_key or default_api_key(None, os.environ)
        headers = {"User-Agent": f"tuneplane-sdk/{__version__}"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._http = httpx.Client(
            base_url=self.url,
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=5.0),
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Api:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def runs(self, project: str, query: str | None = None, *, format: Format = "list") -> Any:
        """The project's runs (those matching ``query``, the search of docs/api.md), oldest
        first, as the API lists them: a list of dicts, or a pandas or polars frame."""
        frames.check_format(format)
        found: list[dict[str, Any]] = []
        while True:
            params: dict[str, Any] = {"limit": RUNS_PAGE_MAX, "offset": len(found)}
            if query is not None:
                params["q"] = query
            answer = self._get(f"{_project(project)}/runs", params)
            page = orjson.loads(answer.content)
            found += page
            if not page or len(found) >= int(answer.headers.get("x-total-count", "0")):
                return frames.records(found, format)

    def points(
        self,
        project: str,
        run: str,
        series: str,
        *,
        start: int | None = None,
        end: int | None = None,
        format: Format = "list",
    ) -> Any:
        """Every point of one series (steps ``start..end``) in step order: rows
        ``{step, value, time}``, a dict of NumPy arrays, or a frame with those columns. A
        point reported as NaN or an infinity has it as its value and no time."""
        frames.check_format(format)
        found = self._series(project, run, [series], start, end, format != "list")
        return frames.points(found[series], format)

    def history(
        self,
        project: str,
        run: str,
        series: Sequence[str] | None = None,
        *,
        start: int | None = None,
        end: int | None = None,
        format: Format = "list",
    ) -> Any:
        """The named series (every series of the run without ``series``) side by side by
        step: a row per step with ``step`` and each series' value there (its last, if it has
        several), absent where it has none (None in dicts, NaN in arrays and frames)."""
        frames.check_format(format)
        names = None if series is None else list(dict.fromkeys(series))
        found = self._series(project, run, names, start, end, format != "list")
        ordered = found if names is None else {name: found[name] for name in names}
        return frames.history(ordered, format)

    def _series(
        self,
        project: str,
        run: str,
        names: list[str] | None,
        start: int | None,
        end: int | None,
        arrays: bool,
    ) -> dict[str, Series]:
        """The series of one run by name, read in as few requests as the query allows."""
        path = f"{_project(project)}/runs/{quote(run, safe='')}/columns"
        found: dict[str, Series] = {}
        for part in _name_parts(names):
            params: list[tuple[str, Any]] = [("metric", name) for name in part or ()]
            params += [(key, value) for key, value in (("start", start), ("end", end))
                       if value is not None]  # fmt: skip
            found.update(self._read_columns(path, params, arrays))
        missing = [name for name in names or () if name not in found]
        if missing:
            raise ApiError(f"series {missing[0]!r} not found in run {run!r}", 404)
        return found

    def _read_columns(
        self, path: str, params: list[tuple[str, Any]], arrays: bool
    ) -> dict[str, Series]:
        # Arrow needs pyarrow and NumPy here (pyarrow alone may come without NumPy).
        pyarrow = _optional("pyarrow") if _optional("numpy") is not None else None
        if pyarrow is not None:
            answer = self._get(path, params, accept=ARROW_STREAM)
            if answer.headers.get("content-type", "").startswith(ARROW_STREAM):
                return _from_arrow(pyarrow, answer.content, arrays)
        else:
            answer = self._get(path, params)
        body = orjson.loads(answer.content)
        return {s["metric"]: _from_json(s, arrays) for s in body["series"]}

    def _get(self, path: str, params: Any, accept: str = "application/json") -> httpx.Response:
        try:
            answer = self._http.get(path, params=params, headers={"Accept": accept})
        except httpx.TransportError as exc:
            raise ApiError(
                f"{self.url} is unreachable ({type(exc).__name__}); is the server running, "
                f"and is {environment.URL} (or url=) its address?",
                None,
            ) from exc
        if answer.is_success:
            return answer
        message = error_message(answer)
        status = answer.status_code
        if status == 401 and "Authorization" not in self._http.headers:
            message += f" (set {environment.API_KEY} or pass api_key=)"
        raise ApiError(f"{path} answered {status}: {message}", status)


def _project(project: str) -> str:
    return f"/api/v1/projects/{quote(project, safe='')}"


def _name_parts(names: list[str] | None) -> Iterator[list[str] | None]:
    """``names`` in parts whose query fits a request line; None (every series) as is."""
    if names is None:
        yield None
        return
    part: list[str] = []
    size = 0
    for name in names:
        length = len(quote(name, safe="")) + len("&metric=")
        if part and size + length > _QUERY_CHARS:
            yield part
            part, size = [], 0
        part.append(name)
        size += length
    if part:
        yield part


def _optional(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def _from_arrow(pyarrow: Any, content: bytes, arrays: bool) -> dict[str, Series]:
    """Series from the Arrow stream: its batches grouped by metric (a batch holds points of
    one series), sorted by step so the invalid points, which follow, take their places."""
    np = frames.need("numpy")

    batches: dict[str, list[Any]] = {}
    for batch in pyarrow.ipc.open_stream(content):
        if batch.num_rows:
            batches.setdefault(batch.column(1)[0].as_py(), []).append(batch)
    found: dict[str, Series] = {}
    for metric, parts in batches.items():
        table = pyarrow.Table.from_batches(parts)
        step = table.column("step").to_numpy()
        value = table.column("value").to_numpy()
        time = table.column("time").to_numpy()  # null (no time) reads as NaN
        if len(parts) > 1 and not (step[1:] >= step[:-1]).all():
            order = np.argsort(step, kind="stable")
            step, value, time = step[order], value[order], time[order]
        if arrays:
            found[metric] = Series(step, value, time)
        else:
            times = [None if t != t else t for t in time.tolist()]
            found[metric] = Series(step.tolist(), value.tolist(), times)
    return found


def _from_json(series: dict[str, Any], arrays: bool) -> Series:
    """A series from its JSON columns, its invalid points put in their places by step."""
    invalid = series["invalid"]
    steps = series["steps"] + invalid["steps"]
    values = series["values"] + [_INVALID[kind] for kind in invalid["kinds"]]
    times = series["times"] + [None] * len(invalid["steps"])
    order = sorted(range(len(steps)), key=steps.__getitem__) if invalid["steps"] else None
    if order is not None:
        steps, values, times = ([column[i] for i in order] for column in (steps, values, times))
    if not arrays:
        return Series(steps, values, times)
    np = frames.need("numpy")

    time = np.array([np.nan if t is None else t for t in times], dtype=np.float64)
    return Series(np.array(steps, dtype=np.int64), np.array(values, dtype=np.float64), time)


__all__ = ["ARROW_STREAM", "Api"]
