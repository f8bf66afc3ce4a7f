"""What a server process does before it serves: the interpreter's tuning, its log lines,
and the app of each process that ``tuneplane serve --workers N`` starts.

With ``--workers N`` (PostgreSQL only) uvicorn binds the socket and starts N processes that
accept on it, each building its own app through :func:`worker_app` from the command line's
flags, which the parent hands down in :data:`FLAGS_VARIABLE`. The processes share the
first-administrator token the parent printed, so its link works whichever process answers;
a PostgreSQL database takes one account however many processes try at once.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import sys
from typing import Any, Final

from fastapi import FastAPI

from tuneplane.server.app import create_app
from tuneplane.server.settings import Settings

#: The flags of ``tuneplane serve`` as JSON, for the processes it starts.
FLAGS_VARIABLE: Final = "TUNEPLANE_SERVE_FLAGS"


def tune_interpreter() -> None:
    """The event loop and the SQLite writer share the GIL. A thread coming back from a
    database call waits up to the switch interval for it (5 ms by default, which would cap
    the writer at a few hundred statements a second); and the garbage collector need not
    rescan the objects built at startup."""
    sys.setswitchinterval(0.0005)
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def log_to_stderr(level: str) -> None:
    """The server's own log lines (``tuneplane.*``: store outages, refused sign-ins, slow
    clients) at ``level``, as uvicorn prints its own."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s:     %(name)s: %(message)s"))
    logger = logging.getLogger("tuneplane")
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False


def worker_flags(flags: dict[str, Any]) -> dict[str, str]:
    """The environment that hands ``flags`` (settings, ``log_level``, ``first_admin``) to
    the processes."""
    return {FLAGS_VARIABLE: json.dumps(flags)}


def worker_app() -> FastAPI:
    """The app of one of several server processes (uvicorn's factory)."""
    flags: dict[str, Any] = json.loads(os.environ[FLAGS_VARIABLE])
    token = flags.pop("first_admin", None)
    level = flags.pop("log_level", "info")
    app = create_app(Settings.from_env(**flags))
    if token is not None:
        app.state.tuneplane.first_admin.share(token)
    app.openapi()
    tune_interpreter()
    log_to_stderr(level)
    return app
