"""A signed-in user's personal API keys: create (shown once), list, revoke."""

from __future__ import annotations

from typing import Annotated, Any, Final

from fastapi import APIRouter, Path, Request
from starlette.responses import Response

from tuneplane.contract.access import KEY_SCOPES, KeyScope, may_mint
from tuneplane.contract.errors import Forbidden, InvalidInput, Violation
from tuneplane.contract.ids import id_problem
from tuneplane.contract.limits import ROW_ID_MAX
from tuneplane.server.access import caller_of
from tuneplane.server.body import read_json
from tuneplane.server.guard import GuardedRoute
from tuneplane.server.responses import JSON
from tuneplane.server.state import app_state
from tuneplane.store import credentials

router = APIRouter(prefix="/api/v1/keys", tags=["access"], route_class=GuardedRoute)

_BODY_MAX: Final = 4096
RowId = Annotated[int, Path(ge=1, le=ROW_ID_MAX)]


def _user_id(request: Request) -> int:
    user_id = caller_of(request).actor.user_id
    assert user_id is not None, "the guard lets only signed-in users here"
    return user_id


def _parse(body: Any) -> tuple[str, KeyScope]:
    if not isinstance(body, dict):
        raise InvalidInput((Violation("body", "must be an object"),))
    name, scope = body.get("name"), body.get("scope", "read")
    violations = []
    problem = id_problem(name) if isinstance(name, str) else "required: a name for the key"
    if problem:
        violations.append(Violation("name", problem))
    if scope not in KEY_SCOPES:
        violations.append(Violation("scope", f"must be one of {', '.join(KEY_SCOPES)}"))
    if violations:
        raise InvalidInput(tuple(violations))
    return name, scope  # type: ignore[return-value]


@router.post("", status_code=201)
async def create_key(request: Request) -> Response:
    """A new key, ``{"name": "laptop", "scope": "read" | "write"}``; the key is in this
    answer only (the server keeps its hash)."""
    name, scope = _parse(await read_json(request, _BODY_MAX))
    user_id = _user_id(request)
    if not may_mint(caller_of(request).actor, scope):
        raise Forbidden(f"scope: this credential may not make a {scope} key (wider than its own)")
    key_id, key = await app_state(request).database.write(
        credentials.create_api_key, user_id, name, scope
    )
    return JSON({"id": key_id, "name": name, "scope": scope, "key": key}, status_code=201)


@router.get("")
def list_keys(request: Request) -> Response:
    with app_state(request).database.connect() as connection:
        keys = credentials.list_api_keys(connection, _user_id(request))
    return JSON([key.to_json() for key in keys])


@router.delete("/{key_id}")
async def revoke_key(request: Request, key_id: RowId) -> Response:
    """Revoke a key: it is refused from now on, on every server process."""
    await app_state(request).database.write(credentials.revoke_api_key, _user_id(request), key_id)
    return JSON({"id": key_id, "revoked": True})
