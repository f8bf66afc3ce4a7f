"""The dashboard's JavaScript is linted by ESLint and type-checked by TypeScript's checker in
``./scripts/test`` (package.json, eslint.config.js, tsconfig.json): a copy of the dashboard
with a deliberate type error and an unused variable fails both, naming the file and the rule."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STATIC = Path("tuneplane", "server", "static")
BIN = ROOT / "node_modules" / ".bin"


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dashboard and its check configuration copied, one module given two mistakes."""
    assert (BIN / "tsc").exists(), "scripts/test installs the checkers (npm ci)"
    tree = tmp_path_factory.mktemp("dashboard")
    shutil.copytree(ROOT / STATIC, tree / STATIC, ignore=shutil.ignore_patterns("swagger-ui*"))
    for name in ("tsconfig.json", "eslint.config.js", "package.json"):
        shutil.copy(ROOT / name, tree / name)
    # eslint.config.js imports its plugins from beside itself.
    (tree / "node_modules").symlink_to(ROOT / "node_modules")
    dom = tree / STATIC / "lib" / "dom.js"
    dom.write_text(
        dom.read_text()
        + '\n/** @type {number} */\nexport const count = "three";\n'
        + "\nexport function tidy() {\n  const forgotten = 1;\n}\n"
    )
    return tree


def _run(tree: Path, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=tree, capture_output=True, text=True, timeout=120)


def test_a_type_error_fails_the_type_check(broken: Path) -> None:
    checked = _run(broken, str(BIN / "tsc"))
    assert checked.returncode != 0
    dom = f"{STATIC.as_posix()}/lib/dom.js("
    errors = [
        line.split(": ", 1)[1] for line in checked.stdout.splitlines() if line.startswith(dom)
    ]
    assert errors == [
        "error TS2322: Type 'string' is not assignable to type 'number'.",
        "error TS6133: 'forgotten' is declared but its value is never read.",
    ], checked.stdout


def test_an_unused_variable_fails_the_lint(broken: Path) -> None:
    linted = _run(broken, str(BIN / "eslint"), STATIC.as_posix())
    assert linted.returncode == 1
    found = linted.stdout.split(f"{STATIC.as_posix()}/lib/dom.js\n", 1)[1].split("\n\n", 1)[0]
    assert "'forgotten' is assigned a value but never used  no-unused-vars" in found, linted.stdout
