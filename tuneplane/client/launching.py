"""The client side of ``tuneplane launch``: one call of the public API each (docs/launch.md).
A call that gets no answer, or an answer that is not the route's, raises
:class:`LaunchFailed` with one line and the exit code the command ends with: a preview that
could not be made is a failed check request, never a passing report."""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import quote

import httpx

from tuneplane.contract import environment

#: Exit codes (2 is a usage error or a bad setting, as everywhere).
REFUSED_LAUNCH: Final = 1
UNREACHABLE: Final = 3
REFUSED_KEY: Final = 4
SERVER_ERROR: Final = 5

_TIMEOUT: Final = httpx.Timeout(180.0, connect=5.0)  # a preview may fetch a git source


class LaunchFailed(Exception):
    def __init__(self, message: str, exit_code: int, answer: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        #: The server's JSON error, when it answered one (a refused submission's checks).
        self.answer = answer


def _error(response: httpx.Response) -> tuple[str, Any]:
    try:
        body = response.json()
        return str(body["error"]["message"]), body
    except (ValueError, KeyError, TypeError):
        return response.text[:200] or response.reason_phrase, None


class LaunchApi:
    """The launch routes of one server, with the user's API key."""

    def __init__(
        self, server: str, key: str | None, transport: httpx.BaseTransport | None = None
    ) -> None:
        if not key:
            raise LaunchFailed(
                f"no API key: set {environment.API_KEY} (an editor's key of the project), or "
                f"run where `tuneplane serve` wrote {environment.ADMIN_KEY_FILE} (--data-dir)",
                REFUSED_KEY,
            )
        self.server = server.rstrip("/")
        self._http = httpx.Client(
            base_url=self.server,
            timeout=_TIMEOUT,
            transport=transport,
            headers={"Authorization": f"Bearer {key}"},
        )

    def close(self) -> None:
        self._http.close()

    def _call(
        self,
        method: str,
        path: str,
        ok: tuple[int, ...],
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        try:
            response = self._http.request(method, path, json=body, headers=headers)
        except httpx.HTTPError as exc:
            raise LaunchFailed(f"{self.server} is unreachable ({exc})", UNREACHABLE) from exc
        if response.status_code in ok:
            return response.json()
        message, answer = _error(response)
        if response.status_code in (401, 403):
            raise LaunchFailed(f"the server refused the key: {message}", REFUSED_KEY, answer)
        if response.status_code >= 500:
            code = response.status_code
            raise LaunchFailed(f"the server answered {code}: {message}", SERVER_ERROR, answer)
        raise LaunchFailed(message, REFUSED_LAUNCH, answer)

    def recipes(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self._call("GET", "/api/v1/recipes", (200,))
        return found

    def preview(self, project: str, body: dict[str, Any]) -> dict[str, Any]:
        shown: dict[str, Any] = self._call(
            "POST", f"{_project(project)}/launch/preview", (200,), body
        )
        return shown

    def submit(self, project: str, body: dict[str, Any], key: str | None) -> dict[str, Any]:
        headers = {"Idempotency-Key": key} if key else None
        made: dict[str, Any] = self._call(
            "POST", f"{_project(project)}/launch", (200, 201), body, headers
        )
        return made

    def jobs(self, project: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self._call("GET", f"{_project(project)}/launch/jobs", (200,))
        return found

    def cancel(self, project: str, job_id: int) -> dict[str, Any]:
        path = f"{_project(project)}/launch/jobs/{job_id}/cancel"
        job: dict[str, Any] = self._call("POST", path, (200,))
        return job


def _project(project: str) -> str:
    return f"/api/v1/projects/{quote(project, safe='')}"
