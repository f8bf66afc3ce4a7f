"""Harbor, in a Python 3.12 virtual environment of its own (``tests/.venvs/``, ignored by
git): Harbor's wheels need 3.12 or newer, and tuneplane is tested on 3.11. The environment
holds harbor from the registry and this checkout of tuneplane (editable), as a user's
coordinator environment would. Made once: ``python -m tests.coordinator.venv``
(``scripts/test`` runs it), or by the first test that needs it.

The 3.12 interpreter is pyenv's (``pyenv prefix 3.12``), or ``TUNEPLANE_TEST_PYTHON312``.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Final

HARBOR: Final = "harbor==0.25.0"
ROOT: Final = Path(__file__).resolve().parents[2]
VENV: Final = ROOT / "tests" / ".venvs" / "harbor-0.25.0"


def _python312() -> str:
    configured = os.environ.get("TUNEPLANE_TEST_PYTHON312")
    if configured:
        return configured
    pyenv = shutil.which("pyenv")
    if pyenv is not None:
        found = subprocess.run([pyenv, "prefix", "3.12"], capture_output=True, text=True)
        if found.returncode == 0 and found.stdout.strip():
            return str(Path(found.stdout.strip().splitlines()[0]) / "bin" / "python3")
    candidates = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3")))
    if not candidates:
        raise RuntimeError(
            "the Harbor tests need Python 3.12 (pyenv install 3.12, or set "
            "TUNEPLANE_TEST_PYTHON312)"
        )
    return candidates[-1]


def python() -> Path:
    """The venv's interpreter, making the venv first when it is missing."""
    interpreter = VENV / "bin" / "python"
    marker = VENV / "installed"
    if not marker.exists():
        subprocess.run([_python312(), "-m", "venv", "--clear", str(VENV)], check=True)
        pip = [str(interpreter), "-m", "pip", "--disable-pip-version-check", "install"]
        subprocess.run([*pip, "--quiet", HARBOR, "-e", str(ROOT)], check=True)
        marker.write_text(HARBOR + "\n")
    return interpreter


if __name__ == "__main__":
    sys.stdout.write(f"{python()}\n")
