"""Launching jobs: the limits of a recipe, the readiness checks and what they never check,
job states and the check record's place in a run's config. Pure: ``launch/`` reads recipes
and runs the checks, ``store/`` records submissions, ``server/`` exposes them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

from tuneplane.contract.errors import InvalidInput, MalformedRequest, Violation
from tuneplane.contract.ids import id_problem
from tuneplane.contract.limits import RUN_CONFIG_MAX_BYTES
from tuneplane.contract.validation import json_problem

#: A recipe file, read whole at start: a template, not a data file.
RECIPE_FILE_MAX_BYTES: Final = 256 * 1024
#: Recipes one directory may hold (each is listed by ``GET /api/v1/recipes``).
RECIPES_MAX: Final = 1_000
#: Arguments of a recipe's command, and characters of one.
COMMAND_MAX_ARGS: Final = 256
COMMAND_ARG_MAX_CHARS: Final = 4_096
#: Effective-configuration rules of one recipe, and characters of one rule.
RULES_MAX: Final = 64
#: What a recipe may declare it needs: more than any one machine or allocation has.
GPUS_MAX: Final = 1_024
CPUS_MAX: Final = 4_096
MEMORY_GB_MAX: Final = 65_536
TIME_MINUTES_MAX: Final = 60 * 24 * 365
#: Secrets one recipe may name, and the prefix of names that never are one: the server's
#: own settings and the attempt's ``TUNEPLANE_JOB_*`` variables.
SECRETS_MAX: Final = 32
SERVER_PREFIX: Final = "TUNEPLANE_"
#: A launch request's body: recipe name, parameters and config.
LAUNCH_BODY_MAX_BYTES: Final = 128 * 1024
#: Seconds a git source may take to clone and check out, and a runtime to answer.
SOURCE_TIMEOUT_SECONDS: Final = 120.0
RUNTIME_TIMEOUT_SECONDS: Final = 20.0
#: Admission defaults (TUNEPLANE_LAUNCH_MAX_JOBS and TUNEPLANE_LAUNCH_MAX_GPUS).
LAUNCH_MAX_JOBS_DEFAULT: Final = 4
LAUNCH_MAX_GPUS_DEFAULT: Final = 8

#: The engines a recipe may name. ``local`` is always there; a server drives the others when
#: its settings configure them (docs/launch.md).
Engine = Literal["local", "slurm", "ray"]
ENGINES: Final[tuple[Engine, ...]] = get_args(Engine)

#: What a job is, as its engine reports it. ``lost``: the engine no longer knows the job
#: (its process vanished without an exit status of its own).
JobState = Literal["pending", "running", "succeeded", "failed", "cancelled", "lost"]
JOB_STATES: Final[tuple[JobState, ...]] = get_args(JobState)
ACTIVE_JOB_STATES: Final[frozenset[JobState]] = frozenset({"pending", "running"})

CheckStatus = Literal["passed", "failed", "not_checked"]
#: The readiness checks, in the order they run and are shown.
CheckName = Literal[
    "recipe", "parameters", "source", "configuration", "fleet", "runtime", "secrets"
]
CHECK_NAMES: Final[tuple[CheckName, ...]] = get_args(CheckName)
CHECK_TITLES: Final[dict[CheckName, str]] = {
    "recipe": "Recipe compatibility",
    "parameters": "Parameters against the recipe's schema",
    "source": "Source availability",
    "configuration": "Effective-configuration rules",
    "fleet": "Fleet fit",
    "runtime": "Runtime-reference resolution",
    "secrets": "Secrets by name",
}

#: What a readiness check never looks at, whatever it says of the rest: a passing report is
#: no promise about any of these.
NEVER_CHECKED: Final[tuple[tuple[str, str], ...]] = (
    ("downloads", "Worker-side model and data set downloads"),
    ("mounts", "Mounts and shared file systems on the workers"),
    ("connectivity", "The job environment's network connectivity"),
    ("smoke_run", "A real generation, scoring or training smoke run"),
    (
        "fallback_source",
        "Whether a fallback source repository reproduces the original archived package: "
        "source availability says the source can be fetched, not that it is the same code",
    ),
    ("framework_rules", "Framework-specific static rules the recipe does not declare"),
)

#: The run config's key holding the check record of the submission that created the run.
CHECK_RECORD_KEY: Final = "tuneplane_launch"
FINGERPRINT_COVERS: Final = (
    "SHA-256 of the canonical JSON of the recipe's specification, the parameters and the "
    "config; not a checksum of every source file, and not a continuing permission"
)


def canonical_json(value: Any) -> bytes:
    """One byte string per JSON value: keys sorted, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def input_fingerprint(spec: Any, parameters: Any, config: Any) -> str:
    """The SHA-256 of a submission's specification and configuration inputs.

    >>> input_fingerprint({"command": ["x"]}, {}, {})[:12]
    '3bba29bed122'
    """
    document = {"spec": spec, "parameters": parameters, "config": config}
    return hashlib.sha256(canonical_json(document)).hexdigest()


@dataclass(frozen=True, slots=True)
class LaunchInput:
    """A preview's or a submission's body: the recipe, its parameters, the config, the
    new run's ID (None: one is made from the recipe's name) and the run of the project it
    re-runs (its parent, None for a first launch)."""

    recipe: str
    parameters: dict[str, Any]
    config: dict[str, Any]
    run: str | None = None
    parent: str | None = None


_LAUNCH_FIELDS: Final = ("recipe", "parameters", "config", "run", "parent")


def parameters_and_config(
    body: dict[str, Any], violations: list[Violation]
) -> dict[str, dict[str, Any]]:
    """A launch body's ``parameters`` and ``config`` (objects, ``{}`` when absent) by name;
    each that breaks its rule is left out, its violation added."""
    objects: dict[str, dict[str, Any]] = {}
    for name in ("parameters", "config"):
        value = body.get(name, {})
        if not isinstance(value, dict):
            violations.append(Violation(name, "must be an object"))
        elif (unstorable := json_problem(value, name)) is not None:
            violations.append(unstorable)
        else:
            objects[name] = value
    if len(objects) == 2 and len(canonical_json(objects)) > RUN_CONFIG_MAX_BYTES // 2:
        violations.append(
            Violation(
                "config",
                f"parameters and config must be at most {RUN_CONFIG_MAX_BYTES // 2048} KiB as JSON",
            )
        )
    return objects


def parse_launch(body: object) -> LaunchInput:
    """``{"recipe": ..., "parameters": {...}, "config": {...}, "run": ..., "parent": ...}``;
    :class:`InvalidInput` names every field that breaks its rule."""
    if not isinstance(body, dict):
        raise MalformedRequest("body: must be a JSON object")
    violations = [
        Violation(key, f"unknown field (known: {', '.join(_LAUNCH_FIELDS)})")
        for key in sorted(set(body) - set(_LAUNCH_FIELDS))
    ]
    recipe, run, parent = body.get("recipe"), body.get("run"), body.get("parent")
    if (problem := id_problem(recipe)) is not None:
        violations.append(Violation("recipe", "required" if recipe is None else problem))
    for name, value in (("run", run), ("parent", parent)):
        if value is not None and (problem := id_problem(value)) is not None:
            violations.append(Violation(name, problem))
    objects = parameters_and_config(body, violations)
    if violations:
        raise InvalidInput(tuple(violations))
    return LaunchInput(str(recipe), objects["parameters"], objects["config"], run, parent)
