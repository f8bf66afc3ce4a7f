"""The dashboard: one HTML shell for every page, and the static files it loads.

The pages hold no data. Each serves the same shell; its ES modules read the address and
fetch everything from the public JSON API (``/api/v1``), so every page has a JSON twin and
the dashboard needs no private endpoint. The shell never contains user text: project and
run names reach the page only through the API and are rendered with ``textContent``.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Final

from fastapi import APIRouter
from starlette.responses import Response
from starlette.staticfiles import StaticFiles

STATIC_DIR: Final = Path(__file__).parent / "static"

#: Defence in depth behind text-only rendering: no inline script, nothing from elsewhere.
CONTENT_SECURITY_POLICY: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; "
    "base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)

_HEADERS: Final = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-cache",
}

router = APIRouter(include_in_schema=False)


@cache
def _shell() -> bytes:
    """index.html with a ``modulepreload`` link per module: the browser then fetches the
    whole module graph at once instead of one import level after another."""
    modules = sorted(path.relative_to(STATIC_DIR).as_posix() for path in STATIC_DIR.rglob("*.js"))
    links = "".join(f'<link rel="modulepreload" href="/static/{m}">\n' for m in modules)
    html = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    return html.replace("</head>", links + "</head>", 1).encode()


def _page() -> Response:
    return Response(_shell(), media_type="text/html; charset=utf-8", headers=_HEADERS)


def static_files() -> StaticFiles:
    """The dashboard's modules, styles and vendored chart library, mounted at ``/static``."""
    return StaticFiles(directory=STATIC_DIR)


@router.get("/")
def projects_page() -> Response:
    """Projects, with their run counts."""
    return _page()


@router.get("/projects/{project}")
def runs_page(project: str) -> Response:
    """The runs of one project: a filterable table; select runs to compare them."""
    return _page()


@router.get("/projects/{project}/runs/{run}")
def run_page(project: str, run: str) -> Response:
    """One run: every metric charted, live; logs tab; ``?metric=…&smooth=…&x=…&log=1``."""
    return _page()


@router.get("/compare")
def compare_page() -> Response:
    """Several runs overlaid: ``/compare?project=<p>&runs=<r1>,<r2>`` (``<p>/<r>`` works too)."""
    return _page()


@router.get("/reports")
def reports_page() -> Response:
    """Alerts, newest first: ``/reports?project=<p>&runs=<r1>,<r2>&level=error#alert-<id>``."""
    return _page()
