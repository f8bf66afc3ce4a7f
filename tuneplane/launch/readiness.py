"""The readiness checks of a launch: recipe compatibility, parameters against the schema,
source availability, the effective-configuration rules, fleet fit and the runtime reference.

Each check is passed, failed or not checked, with its reason. The same function serves a
preview (which never submits and never allocates) and a submission (which runs every check
again, whatever a preview said). A git source is cloned into a temporary directory that is
removed whatever happens, unless the submission keeps the checkout for its job. What no
check ever looks at is :data:`tuneplane.contract.launch.NEVER_CHECKED`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from tuneplane.contract.launch import (
    CHECK_TITLES,
    FINGERPRINT_COVERS,
    NEVER_CHECKED,
    RUNTIME_TIMEOUT_SECONDS,
    SOURCE_TIMEOUT_SECONDS,
    CheckName,
    CheckStatus,
    input_fingerprint,
)
from tuneplane.contract.launch_rules import RuleError, evaluate
from tuneplane.launch.recipes import Recipe, render_command


@dataclass(frozen=True, slots=True)
class Check:
    name: CheckName
    status: CheckStatus
    reason: str

    def to_json(self) -> dict[str, str]:
        return {
            "name": self.name,
            "title": CHECK_TITLES[self.name],
            "status": self.status,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class Capacity:
    """What an engine reports it has now."""

    engine: str
    cpus: int
    memory_gb: float
    gpus: int
    #: Runtime kinds the engine can run (``python``, ``image``).
    runtimes: frozenset[str] = frozenset({"python"})


@dataclass(frozen=True, slots=True)
class Report:
    recipe: Recipe
    checks: tuple[Check, ...]
    #: The parameters with the schema's defaults filled in.
    parameters: dict[str, Any]
    config: dict[str, Any]
    checked_at: float
    #: The command with its parameters in place (empty when they do not fit).
    command: tuple[str, ...] = ()
    #: Where the job runs: the source directory, or the kept checkout of a git source.
    workdir: Path | None = None
    fingerprint: str = field(default="")

    @property
    def ready(self) -> bool:
        """No check failed (one that could not be made is said so, not passed)."""
        return all(check.status != "failed" for check in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "recipe": self.recipe.name,
            "ready": self.ready,
            "checked_at": self.checked_at,
            "checks": [check.to_json() for check in self.checks],
            "not_checked": [{"name": n, "reason": r} for n, r in NEVER_CHECKED],
            "fingerprint": {"sha256": self.fingerprint, "covers": FINGERPRINT_COVERS},
        }


def check_readiness(
    recipe: Recipe,
    parameters: Mapping[str, Any],
    config: Mapping[str, Any],
    capacity: Capacity | None,
    keep_source: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Report:
    """Every check of launching ``recipe`` with ``parameters`` and ``config`` on the engine
    whose ``capacity`` is given (None: this server has no such engine configured).
    ``keep_source``: a new directory to keep a git source's checkout in (a submission's);
    without it, the checkout is removed before this returns. ``environ``: where the
    recipe's secrets are looked up by name (the server's environment by default)."""
    merged = _with_defaults(recipe, parameters)
    parameter_check, command = _parameters(recipe, merged)
    source_check, workdir = _source(recipe, keep_source)
    checks = (
        _compatibility(recipe, capacity),
        parameter_check,
        source_check,
        _configuration(recipe, merged, config, parameter_check),
        check_fleet(recipe, capacity),
        check_runtime(recipe),
        check_secrets(recipe, os.environ if environ is None else environ),
    )
    return Report(
        recipe=recipe,
        checks=checks,
        parameters=merged,
        config=dict(config),
        checked_at=time.time(),
        command=tuple(command),
        workdir=workdir,
        fingerprint=input_fingerprint(recipe.spec(), merged, dict(config)),
    )


def _with_defaults(recipe: Recipe, parameters: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(parameters)
    for name, schema in recipe.parameters.get("properties", {}).items():
        if name not in merged and isinstance(schema, dict) and "default" in schema:
            merged[name] = schema["default"]
    return merged


def _compatibility(recipe: Recipe, capacity: Capacity | None) -> Check:
    if capacity is None:
        return Check(
            "recipe", "failed", f"the {recipe.engine} engine is not configured on this server"
        )
    if recipe.engine != capacity.engine:
        return Check(
            "recipe", "failed", f"the recipe runs on {recipe.engine}, not on {capacity.engine}"
        )
    runtime = "python" if recipe.runtime.python is not None else "image"
    if runtime not in capacity.runtimes:
        what = "a container image" if runtime == "image" else "a Python environment"
        return Check("recipe", "failed", f"the {capacity.engine} engine cannot run {what}")
    return Check(
        "recipe", "passed", f"runs on the {capacity.engine} engine, in {what_runs(recipe)}"
    )


def what_runs(recipe: Recipe) -> str:
    if recipe.runtime.python is not None:
        return f"the Python environment {recipe.runtime.python}"
    return f"the image {recipe.runtime.image}"


def _parameters(recipe: Recipe, merged: dict[str, Any]) -> tuple[Check, list[str]]:
    validator = Draft202012Validator(recipe.parameters)
    problems = []
    for error in sorted(validator.iter_errors(merged), key=lambda e: list(e.absolute_path)):
        where = ".".join(str(p) for p in error.absolute_path)
        problems.append(f"parameters.{where}: {error.message}" if where else error.message)
    if problems:
        return Check("parameters", "failed", "; ".join(problems)), []
    try:
        command = render_command(recipe.command, merged)
    except KeyError as exc:
        reason = f"the command needs {exc.args[0]}, which has no value and no default"
        return Check("parameters", "failed", reason), []
    if any("\x00" in argument for argument in command):
        # No program can receive it: the operating system ends an argument at NUL.
        return Check("parameters", "failed", "a value in the command holds a NUL character"), []
    return Check("parameters", "passed", "the parameters satisfy the recipe's schema"), command


def _configuration(
    recipe: Recipe, merged: dict[str, Any], config: Mapping[str, Any], parameters: Check
) -> Check:
    if not recipe.rules:
        return Check("configuration", "not_checked", "the recipe declares no rules")
    if parameters.status == "failed":
        return Check("configuration", "not_checked", "the parameters do not fit the schema")
    names = {**config, **merged}  # a parameter wins over a config key of its name
    broken = []
    for rule in recipe.rules:
        try:
            if not evaluate(rule.expr, names):
                broken.append(f"{rule.check}: {rule.message or 'does not hold'}")
        except RuleError as exc:
            broken.append(f"{rule.check}: cannot be judged: {exc}")
    if broken:
        return Check("configuration", "failed", "; ".join(broken))
    count = len(recipe.rules)
    return Check("configuration", "passed", f"{count} rule{'s' * (count != 1)} hold")


def check_fleet(recipe: Recipe, capacity: Capacity | None) -> Check:
    """The resources the recipe declares against what the engine reports now."""
    if capacity is None:
        return Check("fleet", "not_checked", f"no {recipe.engine} engine to ask")
    needs = recipe.resources
    short = [
        f"{what} (needs {need:g}, has {has:g})"
        for what, need, has in (
            ("GPUs", needs.gpus, capacity.gpus),
            ("CPUs", needs.cpus, capacity.cpus),
            ("memory in GB", needs.memory_gb, capacity.memory_gb),
        )
        if need > has
    ]
    has = (
        f"{capacity.cpus} CPUs, {capacity.memory_gb:.1f} GB, {capacity.gpus} GPUs "
        f"reported by the {capacity.engine} engine now"
    )
    if short:
        return Check("fleet", "failed", f"too few {', '.join(short)}: {has}")
    return Check(
        "fleet",
        "passed",
        f"needs {needs.cpus} CPUs, {needs.memory_gb:g} GB, {needs.gpus} GPUs; {has}",
    )


def check_runtime(recipe: Recipe) -> Check:
    """The recipe's Python environment runs ``python -c 'import sys'`` (an image is not
    checked: resolving it is the engine registry's business)."""
    if recipe.runtime.python is None:
        return Check(
            "runtime",
            "not_checked",
            f"the image {recipe.runtime.image} is resolved "
            "by the engine's registry, which this check does not reach",
        )
    python = recipe.runtime.python / "bin" / "python"
    if not python.is_file():
        return Check("runtime", "failed", f"{python} does not exist")
    try:
        done = subprocess.run(
            [str(python), "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
            capture_output=True,
            text=True,
            timeout=RUNTIME_TIMEOUT_SECONDS,
            env={"PATH": os.defpath},
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("runtime", "failed", f"{python} did not run: {exc}")
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        return Check("runtime", "failed", f"{python} -c 'import sys' failed: {tail[0]}")
    return Check("runtime", "passed", f"{python} runs (Python {done.stdout.strip()})")


def check_secrets(recipe: Recipe, environ: Mapping[str, str]) -> Check:
    """Each secret the recipe names is set (and not empty) where it is looked up. The
    reason names secrets, never their values."""
    if not recipe.secrets:
        return Check("secrets", "passed", "the recipe names no secrets")
    missing = [name for name in recipe.secrets if not environ.get(name)]
    if missing:
        return Check(
            "secrets",
            "failed",
            f"not set in the server's environment: {', '.join(missing)}",
        )
    return Check(
        "secrets",
        "passed",
        f"{', '.join(recipe.secrets)} set in the server's environment "
        "(handed to the job's environment only, never stored)",
    )


def read_secrets(recipe: Recipe, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The values of the recipe's secrets, for the job's environment only (a secret unset
    since the check is left out, and the job says so when it needs it)."""
    environ = os.environ if environ is None else environ
    return {name: environ[name] for name in recipe.secrets if environ.get(name)}


def _source(recipe: Recipe, keep: Path | None) -> tuple[Check, Path | None]:
    source = recipe.source
    if source.directory is not None:
        directory = source.directory
        if not directory.is_dir():
            return Check("source", "failed", f"{directory} is not a directory"), None
        if not os.access(directory, os.R_OK | os.X_OK):
            return Check("source", "failed", f"{directory} cannot be read"), None
        return Check("source", "passed", f"{directory} is a readable directory"), directory
    if keep is not None:
        check = _checkout(str(source.git), str(source.commit), keep)
        if check.status != "passed":
            shutil.rmtree(keep, ignore_errors=True)
            return check, None
        return check, keep
    with tempfile.TemporaryDirectory(prefix="tuneplane-source-") as scratch:
        return _checkout(str(source.git), str(source.commit), Path(scratch) / "source"), None


def _checkout(url: str, commit: str, into: Path) -> Check:
    """Clone ``url`` into ``into`` and check out ``commit`` (no submodules, no prompts)."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "/bin/false"}
    deadline = time.monotonic() + SOURCE_TIMEOUT_SECONDS
    steps = (
        ["git", "clone", "--quiet", "--no-checkout", "--", url, str(into)],
        ["git", "-C", str(into), "checkout", "--quiet", "--detach", commit],
    )
    for step in steps:
        left = deadline - time.monotonic()
        try:
            done = subprocess.run(
                step,
                capture_output=True,
                text=True,
                env=env,
                timeout=max(left, 1),
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            return Check(
                "source", "failed", f"{url} took longer than {SOURCE_TIMEOUT_SECONDS:g} s to fetch"
            )
        except OSError as exc:
            return Check("source", "failed", f"git did not run: {exc}")
        if done.returncode != 0:
            said = (done.stderr.strip().splitlines() or ["no message"])[-1]
            what = "clone" if step[1] == "clone" else f"check out {commit}"
            return Check("source", "failed", f"cannot {what} from {url}: {said}")
    return Check("source", "passed", f"{url} at {commit} was checked out")
