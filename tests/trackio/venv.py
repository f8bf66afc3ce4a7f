"""The real Trackio clients, each in a virtual environment of its own (``tests/.venvs/``,
ignored by git), so their dependencies never meet ours: the oldest release tuneplane speaks
for and the newest. Made once: ``python -m tests.trackio.venv`` makes every one
(``scripts/test`` runs it), or the first test that needs one makes it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Final

#: Oldest first. 0.40.0's local files are what the importer tests read.
VERSIONS: Final = ("0.40.0", "0.43.0")
OLDEST: Final = VERSIONS[0]
NEWEST: Final = VERSIONS[-1]
_VENVS: Final = Path(__file__).resolve().parents[1] / ".venvs"


def python(version: str = OLDEST) -> Path:
    """The interpreter of ``trackio==version``'s venv, making the venv first when missing."""
    home = _VENVS / f"trackio-{version}"
    interpreter = home / "bin" / "python"
    marker = home / "installed"
    wanted = f"trackio=={version}"
    if not marker.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(home)], check=True)
        # psutil: the client's CPU sampler, so system metrics are tried for real.
        pip = [str(interpreter), "-m", "pip", "--disable-pip-version-check", "install"]
        subprocess.run([*pip, "--quiet", wanted, "psutil"], check=True)
        marker.write_text(wanted + "\n")
    return interpreter


if __name__ == "__main__":
    for each in VERSIONS:
        print(python(each))
