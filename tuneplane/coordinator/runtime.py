"""Where Harbor runs: this interpreter, or the one ``TUNEPLANE_HARBOR_PYTHON`` names.

Harbor needs Python 3.12 or newer and tuneplane supports 3.11, so Harbor is never imported
until a real execution starts. When this interpreter cannot import it, ``tuneplane eval
run`` replaces itself (``exec``: same process, same signals, same environment, so the
``tuneplane run`` job's credentials and SIGTERM reach it) with ``$TUNEPLANE_HARBOR_PYTHON
-m tuneplane.cli eval run …``: a Python 3.12 environment with both tuneplane and Harbor
installed. Without one, it says so in one line.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Final, NoReturn

from tuneplane.contract.settings import Rule, Setting

HARBOR_PYTHON_VARIABLE: Final = "TUNEPLANE_HARBOR_PYTHON"
#: Harbor's wheels say ``Requires-Python: >=3.12``.
HARBOR_MIN_PYTHON: Final = (3, 12)


def _interpreter(raw: str) -> str | None:
    return raw if os.path.isfile(raw) and os.access(raw, os.X_OK) else None


HARBOR_PYTHON: Final = Setting(
    HARBOR_PYTHON_VARIABLE,
    Rule("must be an executable file (a Python 3.12+ interpreter)", _interpreter),
    None,
    "The Python (3.12 or newer, with tuneplane and harbor installed) that `tuneplane eval "
    "run` re-executes itself under when this interpreter cannot import Harbor.",
)


def harbor_problem() -> str | None:
    """Why this interpreter cannot run Harbor, or None when it can."""
    version = ".".join(str(part) for part in sys.version_info[:3])
    if sys.version_info[:2] < HARBOR_MIN_PYTHON:
        return f"Harbor needs Python 3.12 or newer, and {sys.executable} is {version}"
    if importlib.util.find_spec("harbor") is None:
        return f"Harbor is not installed for {sys.executable} (pip install harbor)"
    return None


def harbor_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("harbor")
    except PackageNotFoundError:
        return "unknown"


def reexec(python: str, arguments: Sequence[str], environ: Mapping[str, str]) -> NoReturn:
    """Become ``python -m tuneplane.cli ARGUMENTS``. The variable is left out of the new
    process, so an interpreter that cannot import Harbor either says so instead of
    starting itself again."""
    child = {key: value for key, value in environ.items() if key != HARBOR_PYTHON_VARIABLE}
    sys.stdout.flush()
    sys.stderr.flush()
    # The configured interpreter, by path, with our own arguments: no shell involved.
    os.execve(python, [python, "-m", "tuneplane.cli", *arguments], child)  # noqa: S606


def require_harbor(arguments: Sequence[str], environ: Mapping[str, str]) -> str | None:
    """None when Harbor can run here; otherwise re-execute under ``TUNEPLANE_HARBOR_PYTHON``
    when it is set (never returns), or the one line that says what is missing."""
    problem = harbor_problem()
    if problem is None:
        return None
    python = HARBOR_PYTHON.get(environ)
    if python is not None:
        reexec(python, arguments, environ)
    return (
        f"{problem}; run it with a Python 3.12+ environment that has tuneplane and harbor "
        f"installed, or set {HARBOR_PYTHON_VARIABLE} to that environment's python"
    )
