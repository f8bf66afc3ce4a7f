"""The dashboard: one HTML shell for every page, and the static files it loads.

The pages hold no data. Each serves the same shell; its ES modules read the address and
fetch everything from the public JSON API (``/api/v1``), so every page has a JSON twin and
the dashboard needs no private endpoint. The shell never contains user text: project and
run names reach the page only through the API and are rendered with ``textContent``.
"""

from __future__ import annotations

import gzip
import hashlib
import html
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Final
from urllib.parse import quote

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import Receive, Scope, Send

from tuneplane.contract.ids import display_name_problem, id_for_name
from tuneplane.server.prefix import root_of

STATIC_DIR: Final = Path(__file__).parent / "static"

#: Defence in depth behind text-only rendering: no inline script, nothing from elsewhere.
#: Who may frame a page is said by a policy of its own on every answer (headers.py).
CONTENT_SECURITY_POLICY: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; "
    "base-uri 'none'; form-action 'self'"
)

_HEADERS: Final = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    # Share-link tokens travel in an address's fragment, which is never sent as a referrer;
    # no-referrer keeps every other address of the dashboard (project and run names) in too.
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

router = APIRouter(include_in_schema=False)

#: Classic scripts of the API reference page (``/docs``), not modules of the dashboard.
_DOCS_SCRIPTS: Final = frozenset({"vendor/swagger-ui-bundle.js", "api-docs.js"})

#: ``/docs``: Swagger UI from the package, started by a script file (no inline script), so
#: the dashboard's policy holds here too and the page needs nothing from elsewhere.
_DOCS_PAGE: Final = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>tuneplane API</title>
<link rel="icon" href="/static/favicon.svg">
<link rel="stylesheet" href="/static/vendor/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/static/vendor/swagger-ui-bundle.js"></script>
<script src="/static/api-docs.js"></script>
</body>
</html>
"""

#: A page's own addresses (``href="/…"``, ``src="/…"``), which get the server's prefix.
_LOCAL_ADDRESS: Final = re.compile(r'((?:href|src)=")/(?!/)')


def _under(root: str, page: str) -> bytes:
    """A page with its addresses under ``root`` (``--root-path``), which it also names in
    ``<meta name="tuneplane-root">`` for the modules (lib/root.js). The root follows the
    setting's rule (no quotes or brackets); it is escaped all the same."""
    meta = f'<meta name="tuneplane-root" content="{html.escape(root)}">\n'
    page = _LOCAL_ADDRESS.sub(lambda match: f"{match[1]}{html.escape(root)}/", page)
    charset = '<meta charset="utf-8">\n'
    return page.replace(charset, charset + meta, 1).encode()


@cache
def _shell(root: str) -> bytes:
    """index.html with a ``modulepreload`` link per module: the browser then fetches the
    whole module graph at once instead of one import level after another."""
    modules = sorted(
        name
        for name in (path.relative_to(STATIC_DIR).as_posix() for path in STATIC_DIR.rglob("*.js"))
        if name not in _DOCS_SCRIPTS
    )
    links = "".join(f'<link rel="modulepreload" href="/static/{m}">\n' for m in modules)
    shell = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    return _under(root, shell.replace("</head>", links + "</head>", 1))


@cache
def _docs_page(root: str) -> bytes:
    return _under(root, _DOCS_PAGE)


def _page(request: Request) -> Response:
    return page_response(request)


def page_response(request: Request, status: int = 200) -> Response:
    """The dashboard's shell (it holds no data, so a refused page may show it too)."""
    return Response(
        _shell(root_of(request)),
        status_code=status,
        media_type="text/html; charset=utf-8",
        headers=_HEADERS,
    )


class StaticBundle:
    """The dashboard's modules, styles and vendored chart library, read into memory once and
    served with an ETag and, where the browser takes it, gzip. A page loads about thirty small
    modules at once; answering each from memory keeps that well under the time of one read of
    the API."""

    def __init__(self, directory: Path = STATIC_DIR) -> None:
        self.files: dict[str, _StaticFile] = {}
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                body = path.read_bytes()
                name = path.relative_to(directory).as_posix()
                self.files[name] = _StaticFile(
                    body=body,
                    gzipped=gzip.compress(body, mtime=0) if len(body) > 1024 else None,
                    media_type=_MEDIA_TYPES.get(path.suffix, "text/plain; charset=utf-8"),
                    etag=f'"{hashlib.sha256(body).hexdigest()[:20]}"',
                )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        request = Request(scope)
        found = self.files.get(
            request.url.path.removeprefix(scope.get("root_path", "")).lstrip("/")
        )
        if request.method not in ("GET", "HEAD") or found is None:
            response: Response = PlainTextResponse("Not Found", status_code=404)
        else:
            response = found.response(request)
        await response(scope, receive, send)


@dataclass(frozen=True, slots=True)
class _StaticFile:
    body: bytes
    gzipped: bytes | None
    media_type: str
    etag: str

    def response(self, request: Request) -> Response:
        headers = {"ETag": self.etag, "Cache-Control": "no-cache", "Vary": "Accept-Encoding"}
        if request.headers.get("if-none-match") == self.etag:
            return Response(status_code=304, headers=headers)
        body = self.body
        if self.gzipped is not None and "gzip" in request.headers.get("accept-encoding", ""):
            body = self.gzipped
            headers["Content-Encoding"] = "gzip"
        return Response(body, media_type=self.media_type, headers=headers)


_MEDIA_TYPES: Final = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".svg": "image/svg+xml",
}


def static_files() -> StaticBundle:
    """The ASGI app mounted at ``/static``."""
    return StaticBundle()


@router.get("/docs")
def api_docs_page(request: Request) -> Response:
    """The API reference: Swagger UI over ``/openapi.json``."""
    return Response(
        _docs_page(root_of(request)), media_type="text/html; charset=utf-8", headers=_HEADERS
    )


@router.get("/")
def projects_page(request: Request) -> Response:
    """Projects, with their run counts; Trackio's dashboard addresses go where they mean."""
    target = trackio_target(request.query_params)
    if target is not None:
        return RedirectResponse(root_of(request) + target, status_code=302)
    return _page(request)


def trackio_target(params: Mapping[str, str]) -> str | None:
    """Where a Trackio dashboard address (as the Arena's submissions page links runs) goes:
    ``/?project=<p>&runs=<r1>,<r2>`` (``run_ids=`` and ``selected_project=`` are its other
    spellings) opens the project, the run or their comparison. The names are Trackio's, so
    they are mapped to IDs as every path maps names (contract.ids.id_for_name)."""
    project = params.get("project") or params.get("selected_project")
    if not project or display_name_problem(project):
        return None
    listed = (params.get("runs") or params.get("run_ids") or "").split(",")
    runs = list(dict.fromkeys(id_for_name(r.strip()) for r in listed if r.strip()))
    p = quote(id_for_name(project, fallback="project"), safe="")
    if not runs:
        return f"/projects/{p}"
    if len(runs) == 1:
        return f"/projects/{p}/runs/{quote(runs[0], safe='')}"
    return f"/compare?project={p}&runs={','.join(runs)}"


@router.get("/projects/{project}")
def runs_page(request: Request, project: str) -> Response:
    """The runs of one project: a filterable table; select runs to compare them."""
    return _page(request)


@router.get("/projects/{project}/access")
def access_page(request: Request, project: str) -> Response:
    """Who may see the project: visibility and public logs, members (owners), share links
    (owners and editors)."""
    return _page(request)


@router.get("/projects/{project}/alerts")
def alerts_page(request: Request, project: str) -> Response:
    """The project's alert rules (editors and owners change them) and its webhooks with
    their delivery logs (editors and owners only)."""
    return _page(request)


@router.get("/projects/{project}/launch")
def launch_page(request: Request, project: str) -> Response:
    """The recipes a project's editors may launch: engine, resources and parameters."""
    return _page(request)


@router.get("/projects/{project}/launch/recipes/{recipe}")
def launch_form_page(request: Request, project: str, recipe: str) -> Response:
    """The launch form of one recipe: parameters from its schema, the config, Check
    readiness and Submit; ``?from=<run>`` re-runs that run, prefilled from it."""
    return _page(request)


@router.get("/projects/{project}/launch/matched")
def matched_launch_page(request: Request, project: str) -> Response:
    """Start matched benchmark evaluations of two runs (``?left=<run>&right=<run>``): one
    export of each, one benchmark, an optional sample limit; check both, start each side."""
    return _page(request)


@router.get("/projects/{project}/runs/{run}")
def run_page(request: Request, project: str, run: str) -> Response:
    """One run: every metric charted, live; Validation, Training rollouts, Events and Logs
    tabs (``?tab=validation&round=…&status=…&trial=…``, ``?tab=rollouts&category=…&step=…``);
    ``?metric=…&smooth=…&x=…&log=1``."""
    return _page(request)


@router.get("/projects/{project}/runs/{run}/trajectory")
def trajectory_page(request: Request, project: str, run: str) -> Response:
    """One execution's trajectory, its text's state and its messages a page at a time: a
    trial attempt (``?attempt=&round_id=&trial_id=&trial_attempt=``) or a training rollout
    (``?attempt=&step=&trajectory_id=``); ``&offset=`` names the page."""
    return _page(request)


@router.get("/compare")
def compare_page(request: Request) -> Response:
    """Several runs overlaid: ``/compare?project=<p>&runs=<r1>,<r2>`` (``<p>/<r>`` works too)."""
    return _page(request)


@router.get("/reports")
def reports_page(request: Request) -> Response:
    """Alerts, newest first: ``/reports?project=<p>&runs=<r1>,<r2>&level=error#alert-<id>``."""
    return _page(request)


@router.get("/matched")
def matched_page(request: Request) -> Response:
    """Matched evaluation evidence of two rounds:
    ``/matched?left=<project>/<run>/<round>&right=<project>/<run>/<round>``."""
    return _page(request)


@router.get("/sign-in")
def sign_in_page(request: Request) -> Response:
    """Sign in with a local account: ``/sign-in?next=<address to return to>``."""
    return _page(request)


@router.get("/welcome")
def welcome_page(request: Request) -> Response:
    """The first administrator's account, from the one-time link ``tuneplane serve``
    printed (``/welcome#<token>``)."""
    return _page(request)


@router.get("/shared")
def shared_page(request: Request) -> Response:
    """A share link (``/shared#tpl_…``): the run it opens, read-only."""
    return _page(request)


@router.get("/account")
def account_page(request: Request) -> Response:
    """The signed-in user's account: personal API keys, sign out."""
    return _page(request)
