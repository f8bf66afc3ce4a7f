"""The real Trackio client, in a virtual environment of its own (``tests/.venvs/``, ignored
by git), so its dependencies never meet ours. Made once: ``python -m tests.trackio.venv``
(``scripts/test`` runs it), or by the first test that needs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Final

TRACKIO: Final = "trackio==0.40.0"
VENV: Final = Path(__file__).resolve().parents[1] / ".venvs" / "trackio-0.40.0"


def python() -> Path:
    """The venv's interpreter, making the venv first when it is missing."""
    interpreter = VENV / "bin" / "python"
    marker = VENV / "installed"
    if not marker.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
        # psutil: the client's CPU sampler, so system metrics are tried for real.
        pip = [str(interpreter), "-m", "pip", "--disable-pip-version-check", "install"]
        install = [*pip, "--quiet", TRACKIO, "psutil"]
        subprocess.run(install, check=True)
        marker.write_text(TRACKIO + "\n")
    return interpreter


if __name__ == "__main__":
    print(python())
