"""A project's visibility, its members and the share links to its runs (owners manage
the first two; editors and owners make share links)."""

from __future__ import annotations

import time
from typing import Annotated, Any, Final

from fastapi import APIRouter, Path, Request
from starlette.responses import Response

from tuneplane.contract.access import ROLES, VISIBILITIES
from tuneplane.contract.errors import InvalidInput, Violation
from tuneplane.contract.json_body import decode_json_body
from tuneplane.contract.limits import ROW_ID_MAX, SHARE_LINK_DAYS_MAX
from tuneplane.server.access import caller_of
from tuneplane.server.body import read_body, read_json
from tuneplane.server.guard import GuardedRoute
from tuneplane.server.responses import JSON
from tuneplane.server.state import app_state
from tuneplane.store import access, catalog

router = APIRouter(prefix="/api/v1/projects/{project}", tags=["access"], route_class=GuardedRoute)

_BODY_MAX: Final = 4096
RowId = Annotated[int, Path(ge=1, le=ROW_ID_MAX)]


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise InvalidInput((Violation("body", "must be an object"),))
    return body


def _settings_json(request: Request, project: str) -> dict[str, object]:
    with app_state(request).database.connect() as connection:
        facts = access.project_facts(connection, caller_of(request).actor, project)
    assert facts is not None, "the guard found the project"
    return {"project": project, "visibility": facts.visibility, "public_logs": facts.public_logs}


@router.get("/access")
def read_settings(request: Request, project: str) -> Response:
    """Who may see the project: ``visibility`` and ``public_logs``."""
    return JSON(_settings_json(request, project))


@router.patch("/access")
async def change_settings(request: Request, project: str) -> Response:
    """``{"visibility": "public" | "private", "public_logs": true | false}`` (either)."""
    body = _object(await read_json(request, _BODY_MAX))
    visibility, public_logs = body.get("visibility"), body.get("public_logs")
    violations = []
    if visibility is not None and visibility not in VISIBILITIES:
        violations.append(Violation("visibility", "must be public or private"))
    if public_logs is not None and not isinstance(public_logs, bool):
        violations.append(Violation("public_logs", "must be true or false"))
    unknown = sorted(set(body) - {"visibility", "public_logs"})
    violations += [Violation(name, "is not a setting of a project") for name in unknown]
    if violations:
        raise InvalidInput(tuple(violations))
    await app_state(request).database.write(access.set_visibility, project, visibility, public_logs)
    return JSON(_settings_json(request, project))


@router.get("/members")
def list_members(request: Request, project: str) -> Response:
    with app_state(request).database.connect() as connection:
        members = access.list_members(connection, project)
    return JSON([member.to_json() for member in members])


@router.put("/members/{login}")
async def set_member(request: Request, project: str, login: str) -> Response:
    """Add a member or change them: ``{"role": "owner" | "editor" | "viewer", "content":
    false}``; ``content`` lets them read trajectory bodies."""
    body = _object(await read_json(request, _BODY_MAX))
    role, content = body.get("role"), body.get("content", False)
    violations = []
    if role not in ROLES:
        violations.append(Violation("role", f"must be one of {', '.join(ROLES)}"))
    if not isinstance(content, bool):
        violations.append(Violation("content", "must be true or false"))
    if violations:
        raise InvalidInput(tuple(violations))
    member = await app_state(request).database.write(
        access.set_member, project, login, role, content
    )
    return JSON(member.to_json())


@router.delete("/members/{login}")
async def remove_member(request: Request, project: str, login: str) -> Response:
    await app_state(request).database.write(access.remove_member, project, login)
    return JSON({"login": login, "removed": True})


@router.post("/runs/{run}/shares", status_code=201)
async def create_share_link(request: Request, project: str, run: str) -> Response:
    """A read-only link to this run: ``{"expires_in_days": 7}`` (optional; at most
    ``SHARE_LINK_DAYS_MAX``). The answer's ``url`` is shown once; its token is in the
    fragment, which browsers never send to servers or put in a Referer."""
    raw = await read_body(request, _BODY_MAX)
    body = _object(decode_json_body(raw) if raw else {})
    days = body.get("expires_in_days")
    if days is not None and (
        isinstance(days, bool)
        or not isinstance(days, int | float)
        or not 0 < days <= SHARE_LINK_DAYS_MAX
    ):
        raise InvalidInput(
            (
                Violation(
                    "expires_in_days", f"must be a number of days in (0, {SHARE_LINK_DAYS_MAX}]"
                ),
            )
        )
    state = app_state(request)
    with state.database.connect() as connection:
        run_id = catalog.get_run(connection, project, run).id
    expires_at = None if days is None else time.time() + days * 86_400
    creator = caller_of(request).actor.user_id
    link_id, token = await state.database.write(
        access.create_share_link, run_id, creator, expires_at
    )
    base = str(request.base_url).rstrip("/")
    return JSON(
        {"id": link_id, "run": run, "expires_at": expires_at, "url": f"{base}/shared#{token}"},
        status_code=201,
    )


@router.get("/shares")
def list_share_links(request: Request, project: str) -> Response:
    with app_state(request).database.connect() as connection:
        links = access.list_share_links(connection, project)
    return JSON([link.to_json() for link in links])


@router.delete("/shares/{link_id}")
async def revoke_share_link(request: Request, project: str, link_id: RowId) -> Response:
    await app_state(request).database.write(access.revoke_share_link, project, link_id)
    return JSON({"id": link_id, "revoked": True})
