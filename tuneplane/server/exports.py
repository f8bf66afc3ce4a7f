"""A run's registered exports (``GET …/runs/{run}/exports``): what ``register_export``
recorded, each with its digest and how it was made, for the run page and for matched
benchmark launches (docs/sdk.md)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from tuneplane.server.responses import JSON
from tuneplane.server.state import app_state
from tuneplane.store import catalog
from tuneplane.store.exports import list_exports

router = APIRouter(prefix="/api/v1", tags=["runs"])


@router.get("/projects/{project}/runs/{run}/exports")
def get_exports(request: Request, project: str, run: str) -> Response:
    """The run's exports, in the order they were registered: ``export_id``, the execution
    ``attempt``, ``step``, ``uri`` (an absolute path on the machine that registered it, or
    a URI), ``format``, ``digest`` and ``digest_method`` (``sha256-files-v1``, ``given``
    or ``none``), and for a local export its ``files`` and ``bytes``."""
    with app_state(request).database.connect() as connection:
        run_id = catalog.get_run(connection, project, run).id
        return JSON(list_exports(connection, run_id))
