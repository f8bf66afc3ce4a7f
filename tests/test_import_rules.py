"""DESIGN.md's dependency rules are import-linter contracts (pyproject.toml) that
``./scripts/test`` runs: they hold today, and an import that runs up the house breaks them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = shutil.which("lint-imports")
    assert command is not None, "import-linter is installed by the test extra"
    return subprocess.run(
        [command, "--no-cache", "--config", str(tree / "pyproject.toml")],
        cwd=tree, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_an_upward_import_breaks_the_contracts(tmp_path: Path) -> None:
    tree = tmp_path / "house"
    shutil.copytree(ROOT / "tuneplane", tree / "tuneplane", ignore=shutil.ignore_patterns("static"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    kept = _lint(tree)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    ids = tree / "tuneplane" / "contract" / "ids.py"
    ids.write_text(ids.read_text() + "\nimport tuneplane.store.catalog  # noqa: E402, F401\n")
    broken = _lint(tree)
    assert broken.returncode == 1
    assert "contract imports nothing of the package BROKEN" in broken.stdout
