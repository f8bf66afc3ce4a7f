"""Changing what the server stores, with the user's API key: the client side of
``tuneplane runs delete``. One call of the public API each (docs/api.md, "Managing runs");
a failure raises :class:`AdminFailed`, one line and the exit code the command ends with::

    delete_run("http://127.0.0.1:8000", key, "grpo", "qwen-7b-seed1")
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import quote

import httpx

from tuneplane.contract import environment

#: Exit codes (2 is a usage error or a bad setting, as everywhere).
NOT_FOUND: Final = 1
UNREACHABLE: Final = 3
REFUSED: Final = 4
SERVER_ERROR: Final = 5

_TIMEOUT: Final = httpx.Timeout(30.0, connect=5.0)


class AdminFailed(Exception):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def _refusal(response: httpx.Response) -> str:
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return response.text[:200] or response.reason_phrase


def delete_run(
    server: str,
    key: str | None,
    project: str,
    run: str,
    *,
    transport: httpx.BaseTransport | None = None,
) -> dict[str, Any]:
    """``DELETE /api/v1/projects/{project}/runs/{run}``: the server's answer."""
    if not key:
        raise AdminFailed(
            f"no API key: set {environment.API_KEY} (an owner's key of the project), or run "
            f"where `tuneplane serve` wrote {environment.ADMIN_KEY_FILE} (--data-dir)",
            REFUSED,
        )
    address = f"{server.rstrip('/')}/api/v1/projects/{quote(project, safe='')}/runs/"
    address += quote(run, safe="")
    try:
        with httpx.Client(timeout=_TIMEOUT, transport=transport) as http:
            response = http.delete(address, headers={"Authorization": f"Bearer {key}"})
    except httpx.HTTPError as exc:
        raise AdminFailed(f"{server} is unreachable ({exc})", UNREACHABLE) from exc
    if response.status_code == 404:
        raise AdminFailed(f"no run {project}/{run} ({_refusal(response)})", NOT_FOUND)
    if response.status_code in (401, 403):
        raise AdminFailed(f"the server refused: {_refusal(response)}", REFUSED)
    if response.status_code != 200:
        raise AdminFailed(
            f"the server answered {response.status_code}: {_refusal(response)}", SERVER_ERROR
        )
    answer: dict[str, Any] = response.json()
    return answer
