"""Reading what the server stores, with the user's API key: the client side of
``tuneplane projects list`` and ``tuneplane runs list|show|export``.

Each read is one call of the public JSON API (docs/api.md), so a script gets from
``--json`` exactly what the API answers. A read that fails raises :class:`ReadFailed`, one
line naming the address and what to do, with the exit code the command ends with::

    client = ReadClient("http://127.0.0.1:8000", key)
    for project in client.projects():
        print(project["project"], project["run_count"])
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Mapping
from typing import IO, Any, Final
from urllib.parse import quote

import httpx

from tuneplane.contract import environment
from tuneplane.contract.version import __version__

#: Exit codes of the reading commands (2 is a usage error or a bad setting, as everywhere).
NOT_FOUND: Final = 1
UNREACHABLE: Final = 3
REFUSED: Final = 4
SERVER_ERROR: Final = 5

_TIMEOUT: Final = httpx.Timeout(30.0, connect=5.0)


class ReadFailed(Exception):
    """A read the server refused or could not answer: ``message`` is one line."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class ReadClient:
    """The server's read API with one credential; ``transport`` as httpx takes it."""

    def __init__(
        self, server: str, key: str | None, *, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.server = server.rstrip("/")
        headers = {"User-Agent": f"tuneplane-cli/{__version__}", "Accept": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._keyed = bool(key)
        self._http = httpx.Client(
            base_url=self.server, headers=headers, timeout=_TIMEOUT, transport=transport
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ReadClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def projects(self) -> list[dict[str, Any]]:
        """Every project the key may see: ``[{project, run_count, created_at, updated_at}]``."""
        answer: list[dict[str, Any]] = self._get_json("/api/v1/projects")
        return answer

    def runs(self, project: str, params: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        """A project's runs; ``params`` go to the server as they are (its filters)."""
        answer: list[dict[str, Any]] = self._get_json(f"{_project(project)}/runs", params)
        return answer

    def run(self, project: str, run: str) -> dict[str, Any]:
        """One run, with its metric summaries under ``metrics``."""
        path = f"{_project(project)}/runs/{quote(run, safe='')}"
        found: dict[str, Any] = self._get_json(path)
        found["metrics"] = self._get_json(f"{path}/metrics")
        return found

    def export_csv(self, project: str, run: str, out: IO[str], metric: str | None = None) -> int:
        """Stream the run's original points as CSV (``step,metric,value,log_id,time``) into
        ``out``, only ``metric``'s when one is named; answers the number of rows written."""
        path = f"{_project(project)}/runs/{quote(run, safe='')}/export.csv"
        writer = csv.writer(out, lineterminator="\n")
        rows = 0
        try:
            with self._http.stream("GET", path, headers={"Accept": "text/csv"}) as answer:
                self._check(answer, path)
                lines = csv.reader(answer.iter_lines())
                header = next(lines, None)
                if header is None:
                    return 0
                writer.writerow(header)
                for row in _matching(lines, metric):
                    writer.writerow(row)
                    rows += 1
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from exc
        return rows

    def _get_json(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        try:
            answer = self._http.get(path, params=dict(params or {}))
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from exc
        self._check(answer, path)
        try:
            return answer.json()
        except ValueError as exc:
            raise ReadFailed(
                f"{self.server}{path} did not answer JSON (is {environment.URL} a tuneplane "
                "server?)",
                SERVER_ERROR,
            ) from exc

    def _check(self, answer: httpx.Response, path: str) -> None:
        if answer.is_success:
            return
        if answer.is_stream_consumed is False:
            answer.read()
        message = error_message(answer)
        status = answer.status_code
        if status in (401, 403):
            hint = "" if self._keyed else f"; set {environment.API_KEY}"
            raise ReadFailed(f"refused ({status}): {message}{hint}", REFUSED)
        if status == 404:
            raise ReadFailed(f"not found: {message}", NOT_FOUND)
        raise ReadFailed(f"{self.server}{path} answered {status}: {message}", SERVER_ERROR)

    def _unreachable(self, exc: httpx.TransportError) -> ReadFailed:
        return ReadFailed(
            f"{self.server} is unreachable ({type(exc).__name__}); is the server running, "
            f"and is {environment.URL} (or --server) its address?",
            UNREACHABLE,
        )


def _project(project: str) -> str:
    return f"/api/v1/projects/{quote(project, safe='')}"


def _matching(rows: Iterator[list[str]], metric: str | None) -> Iterator[list[str]]:
    for row in rows:
        if metric is None or (len(row) > 1 and row[1] == metric):
            yield row


def error_message(answer: httpx.Response) -> str:
    """The API's own message (``{"error": {"message": …}}``), else the status line."""
    try:
        body = answer.json()
        message = body["error"]["message"]
        if isinstance(message, str) and message:
            return message
    except (ValueError, KeyError, TypeError):
        pass
    return answer.reason_phrase or str(answer.status_code)
