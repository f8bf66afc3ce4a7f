"""The ASGI application: ``create_app(settings)``."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Final

from fastapi import Depends, FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from tuneplane.blobs import open_blob_store
from tuneplane.contract.errors import TuneplaneError
from tuneplane.contract.version import __version__
from tuneplane.launch.recipes import load_recipes
from tuneplane.server import (
    alert_checker,
    alert_rules,
    bulk_reads,
    diagnoses,
    evaluation,
    exports,
    groups,
    ingest,
    keys,
    launch,
    logs,
    matched_launch,
    matched_trials,
    oidc,
    pages,
    project_access,
    purger,
    reads,
    run_admin,
    runs,
    sdk_ingest,
    signin,
    streams,
    sweeper,
    trackio,
    trackio_import,
    trajectories,
    webhook_sender,
)
from tuneplane.server.alerting import AlertEngine
from tuneplane.server.auth import IngestTokenGuard
from tuneplane.server.body import BodyDeadline
from tuneplane.server.guard import authorize, decided_first
from tuneplane.server.headers import ResponseHeaders
from tuneplane.server.live import LiveHub
from tuneplane.server.models import ErrorOut, IngestResult
from tuneplane.server.outbound import OutboundPolicy
from tuneplane.server.prefix import RootPath
from tuneplane.server.responses import (
    JSON,
    on_client_disconnect,
    on_http_error,
    on_store_failure,
    on_tuneplane_error,
    on_unexpected_error,
    on_validation_error,
)
from tuneplane.server.settings import Settings
from tuneplane.server.state import AppState, FirstAdmin
from tuneplane.store import accounts
from tuneplane.store.arena import ArenaIngest
from tuneplane.store.credentials import ensure_admin_key
from tuneplane.store.database import Database


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's schema plus the hand-documented ``POST /ingest``."""
    if app.openapi_schema is None:
        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        schema["paths"]["/ingest"] = ingest.OPENAPI
        components = schema.setdefault("components", {})
        schemas = components.setdefault("schemas", {})
        for model in (IngestResult, ErrorOut):
            model_schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
            schemas.update(model_schema.pop("$defs", {}))
            schemas[model.__name__] = model_schema
        components.setdefault("securitySchemes", {})["ingestSecret"] = {
            "type": "http",
            "scheme": "bearer",
        }
        app.openapi_schema = schema
    return app.openapi_schema


GUARDED: Final = [Depends(authorize)]


def _first_admin_token(database: Database) -> str | None:
    """A one-time token for creating the first administrator, while there is no account."""
    with database.connect() as connection:
        if accounts.count_users(connection):
            return None
    return secrets.token_urlsafe(32)


def _add_error_handlers(app: FastAPI) -> None:
    """One JSON error shape for everything that can go wrong (responses.py)."""
    # A request refused by its rule is refused, whatever else was wrong with it.
    app.add_exception_handler(TuneplaneError, decided_first(on_tuneplane_error, on_tuneplane_error))
    app.add_exception_handler(
        RequestValidationError, decided_first(on_validation_error, on_tuneplane_error)
    )
    app.add_exception_handler(HTTPException, decided_first(on_http_error, on_tuneplane_error))
    app.add_exception_handler(ClientDisconnect, on_client_disconnect)
    app.add_exception_handler(OSError, on_store_failure)
    app.add_exception_handler(SQLAlchemyError, on_store_failure)
    app.add_exception_handler(Exception, on_unexpected_error)


def _start_alerting(state: AppState) -> list[asyncio.Task[None]]:
    """The alert engine, the periodic check of time-based rules and the webhook sender."""
    settings = state.settings
    return [
        asyncio.create_task(state.alerts.run_forever()),
        asyncio.create_task(
            alert_checker.check_forever(state.alerts, state.database, settings.alert_check_interval)
        ),
        asyncio.create_task(
            webhook_sender.deliver_forever(
                state.alerts, state.database, settings.webhook_retry, state.outbound
            )
        ),
    ]


def _lifespan(
    settings: Settings, opened: Database
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's background work (sweeps, purges, lost attempts, a Trackio import, alert
    checks) for its life; the database closes after it."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state = app.state.tuneplane
        tasks: list[asyncio.Task[Any]] = [
            asyncio.create_task(sweeper.sweep_forever(state, settings.sweep_interval)),
            asyncio.create_task(purger.purge_forever(state, settings.sweep_interval)),
            asyncio.create_task(diagnoses.watch_lost_attempts(state)),
            asyncio.create_task(diagnoses.check_language_model(state)),
            asyncio.create_task(launch.watch_jobs(state)),
            asyncio.create_task(trajectories.check_blob_store(state)),
            # Live updates from and to the other server processes of a PostgreSQL database.
            asyncio.create_task(state.live.run_forever(state.database)),
        ]
        if settings.trackio_import:  # Trackio databases in the data directory
            tasks.append(asyncio.create_task(trackio_import.import_on_start(state)))
        alerting = _start_alerting(state)
        try:
            yield
        finally:
            await state.alerts.stop(alerting)
            for task in tasks:
                task.cancel()
            launch.stop_jobs(state)  # before the database closes: their states are written
            opened.close()

    return lifespan


def _include_routers(app: FastAPI) -> None:
    # Every route runs the guard: its rule in access.RULES decides who may call it.
    for router in (
        reads.router,
        bulk_reads.router,
        groups.router,
        logs.router,
        streams.router,
        evaluation.router,
        exports.router,
        matched_trials.router,
        diagnoses.router,
        alert_rules.router,
        runs.router,
        run_admin.router,
        sdk_ingest.router,
        trajectories.router,
        signin.router,
        keys.router,
        project_access.router,
        launch.router,
        matched_launch.router,
        oidc.router,
        trackio.router,
        pages.router,
    ):
        app.include_router(router, dependencies=GUARDED)


def _add_probes(app: FastAPI, opened: Database) -> None:
    @app.get("/healthz", tags=["meta"], dependencies=GUARDED)
    def healthz() -> Response:
        """Readiness: 200 once the store answers a trivial query and the blob store takes
        a write, else 503 naming the one that does not (a readinessProbe)."""
        opened.ping()
        app.state.tuneplane.blobs.ping()
        return JSON({"status": "ok", "store": "ok", "blobs": "ok", "version": __version__})

    @app.get("/livez", tags=["meta"], dependencies=GUARDED)
    async def livez() -> Response:
        """Liveness: 200 while the process serves requests, whatever the store does (a
        livenessProbe: restarting the server would not bring PostgreSQL back)."""
        return JSON({"status": "ok", "version": __version__})


def create_app(settings: Settings, database: Database | None = None) -> FastAPI:
    """Build the app. The database is opened (and migrated) now, so a locked or unreachable
    database fails here rather than on the first request; the app closes it on shutdown.
    Recipes are read first: a problem in one is a :class:`SettingError`, as a bad setting."""
    recipes = load_recipes(settings.recipes_dir)
    if database is None:
        database = Database(settings.database_url)
        database.migrate()
    database.run_write(ensure_admin_key, settings.data_dir)

    lifespan = _lifespan(settings, database)

    app = FastAPI(
        title="tuneplane",
        version=__version__,
        description="Telemetry for fine-tuning and RL training runs.",
        lifespan=lifespan,
        # /docs is served from the package under the dashboard's policy (pages.py); ReDoc
        # would load its script from a CDN.
        docs_url=None,
        redoc_url=None,
        responses={
            400: {"model": ErrorOut},
            404: {"model": ErrorOut},
            422: {"model": ErrorOut},
        },
    )
    live = LiveHub()
    alerts = AlertEngine(database, live.notify)
    app.state.tuneplane = AppState(
        settings=settings,
        database=database,
        arena=ArenaIngest(database, alerts.after_arena),
        alerts=alerts,
        outbound=OutboundPolicy(settings.outbound_allow),
        live=live,
        blobs=open_blob_store(settings.blob_url, settings.data_dir),
        first_admin=FirstAdmin(_first_admin_token(database)),
        recipes=recipes,
        engines=launch.open_engines(settings),
    )
    _add_error_handlers(app)
    app.router.routes.append(ingest.route)
    _include_routers(app)
    app.mount("/static", pages.static_files(), name="static")
    app.add_middleware(IngestTokenGuard)
    app.add_middleware(BodyDeadline, timeout=settings.body_timeout)
    # Added last, so outermost: the guard's refusals carry the headers too.
    app.add_middleware(ResponseHeaders, frame_ancestors=settings.frame_ancestors)
    if settings.root_path:  # outermost of all: every other layer sees the prefixed scope
        app.add_middleware(RootPath, prefix=settings.root_path)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]

    _add_probes(app, database)
    return app
