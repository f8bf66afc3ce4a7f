"""Where the data directory is: one rule for ``tuneplane serve`` and the client commands.

``tuneplane serve`` keeps its SQLite database and ``admin.key`` there; ``tuneplane run`` on
the same machine reads the key from the same place.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Final

from tuneplane.contract.settings import PATH, Setting

#: Environment variables naming the data directory, in order of precedence.
#: ``TRACKIO_DIR`` keeps an Arena deployment's setting working.
DATA_DIR_VARIABLES: Final = ("TUNEPLANE_DIR", "TRACKIO_DIR")
DATA_DIR_DEFAULT: Final = "./tuneplane-data"

DATA_DIR: Final = Setting(
    DATA_DIR_VARIABLES[0],
    PATH,
    None,
    "Data directory: the SQLite database, its lock file and admin.key live here.",
    default_text=DATA_DIR_DEFAULT,
)
TRACKIO_DIR: Final = Setting(
    DATA_DIR_VARIABLES[1],
    PATH,
    None,
    "Read as the data directory when TUNEPLANE_DIR is unset (Arena deployments).",
)


def resolve_data_dir(explicit: str | None, environ: Mapping[str, str]) -> Path:
    """The data directory: ``explicit`` (a ``--data-dir`` flag), else the first non-empty
    variable of :data:`DATA_DIR_VARIABLES`, else :data:`DATA_DIR_DEFAULT`; made absolute."""
    chosen = explicit or next(
        (environ[name] for name in DATA_DIR_VARIABLES if environ.get(name)), DATA_DIR_DEFAULT
    )
    return Path(chosen).absolute()
