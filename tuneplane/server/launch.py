"""Launching jobs: the recipes, the readiness preview, submission and the jobs it made
(docs/launch.md). Who may call each route is in ``server/access.py``: recipes are read by
any signed-in caller, previews and launches need write access to the project."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from tuneplane.contract.errors import NotFound, Unauthorized
from tuneplane.launch.recipes import Recipe
from tuneplane.server.access import caller_of
from tuneplane.server.responses import JSON
from tuneplane.server.state import app_state

router = APIRouter(prefix="/api/v1", tags=["launch"])


def _signed_in(request: Request) -> None:
    """Recipes name commands, paths and environments of the server's machine: they are
    for the people who use it, not for anonymous readers of public projects."""
    actor = caller_of(request).actor
    if not (actor.signed_in or actor.is_admin):
        raise Unauthorized("authorization: sign in first (recipes are for signed-in users)")


def _recipe(request: Request, name: str) -> Recipe:
    recipe = app_state(request).recipes.get(name)
    if recipe is None:
        raise NotFound(f"recipe: no recipe named {name!r}")
    return recipe


@router.get("/recipes")
def list_recipes(request: Request) -> Response:
    """The server's recipes (read from TUNEPLANE_RECIPES_DIR at start), by name."""
    _signed_in(request)
    recipes = app_state(request).recipes
    return JSON([recipes[name].spec() for name in sorted(recipes)])


@router.get("/recipes/{recipe}")
def get_recipe(request: Request, recipe: str) -> Response:
    """One recipe: its command, parameter schema, source, runtime, resources and rules."""
    _signed_in(request)
    return JSON(_recipe(request, recipe).spec())
