"""Recipes: declared job templates, one TOML or JSON file each in the recipes directory.

A recipe names the command a job runs, the parameters it takes (a JSON Schema of types,
ranges, required names and defaults), where its code comes from (a local directory, or a
git repository at a commit), what it runs in (a Python environment, or a container image),
what it needs (GPUs, CPUs, memory, time), the rules its merged parameters and config must
satisfy, and the engine that runs it (docs/launch.md has the format and examples).

The directory is read once, at start: :func:`load_recipes` reports every problem of every
file at once, one line each naming the file, the field and the rule, as a bad setting is
reported. Reading is pure but for reading the files.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, cast

from jsonschema import Draft202012Validator, SchemaError

from tuneplane.contract import launch as limits
from tuneplane.contract.ids import id_problem
from tuneplane.contract.launch_rules import Expr, RuleError, parse_rule
from tuneplane.contract.settings import SettingError

RecipeKind = Literal["training", "evaluation"]
_KINDS: Final = ("training", "evaluation")
_TOP_KEYS: Final = frozenset(
    {
        "description",
        "kind",
        "engine",
        "command",
        "parameters",
        "source",
        "runtime",
        "resources",
        "rules",
        "secrets",
    }
)
#: The JSON Schema keywords a parameter schema may use: types, ranges, required names,
#: defaults, and the words that describe them. Others are refused rather than ignored, so a
#: schema never seems to check what it does not.
SCHEMA_KEYWORDS: Final = frozenset(
    {
        "type",
        "properties",
        "required",
        "default",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "enum",
        "minLength",
        "maxLength",
        "pattern",
        "items",
        "minItems",
        "maxItems",
        "additionalProperties",
        "title",
        "description",
    }
)
_PLACEHOLDER: Final = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
_COMMIT: Final = re.compile(r"[0-9a-f]{40}", re.ASCII)
_GIT_URL: Final = re.compile(r"(https://|ssh://|git@|file:///)\S+", re.ASCII)
_IMAGE: Final = re.compile(r"[a-z0-9][a-z0-9._/:@-]{0,254}", re.ASCII)
_SECRET_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}", re.ASCII)


@dataclass(frozen=True, slots=True)
class Source:
    """Where a job's code comes from: a directory on the server's machine, or a git
    repository at one commit."""

    directory: Path | None = None
    git: str | None = None
    commit: str | None = None

    def to_json(self) -> dict[str, str]:
        if self.directory is not None:
            return {"kind": "directory", "path": str(self.directory)}
        return {"kind": "git", "url": str(self.git), "commit": str(self.commit)}


@dataclass(frozen=True, slots=True)
class Runtime:
    """What a job runs in: a Python environment's directory, or a container image."""

    python: Path | None = None
    image: str | None = None

    def to_json(self) -> dict[str, str]:
        if self.python is not None:
            return {"kind": "python", "path": str(self.python)}
        return {"kind": "image", "image": str(self.image)}


@dataclass(frozen=True, slots=True)
class Resources:
    gpus: int = 0
    cpus: int = 1
    memory_gb: float = 1.0
    time_minutes: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "gpus": self.gpus,
            "cpus": self.cpus,
            "memory_gb": self.memory_gb,
            "time_minutes": self.time_minutes,
        }


@dataclass(frozen=True, slots=True)
class ConfigRule:
    """An effective-configuration rule: its text, its message, its parsed expression."""

    check: str
    message: str
    expr: Expr = field(compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Recipe:
    name: str
    file: Path
    description: str
    kind: RecipeKind
    engine: limits.Engine
    command: tuple[str, ...]
    parameters: dict[str, Any]
    source: Source
    runtime: Runtime
    resources: Resources
    rules: tuple[ConfigRule, ...]
    #: Secrets the job gets by name: environment variables of the server, read at
    #: submission and handed to the job's environment only (never stored).
    secrets: tuple[str, ...] = ()

    def spec(self) -> dict[str, Any]:
        """The recipe as the API shows it and the check record's fingerprint covers."""
        return {
            "name": self.name,
            "description": self.description,
            "kind": self.kind,
            "engine": self.engine,
            "command": list(self.command),
            "parameters": self.parameters,
            "source": self.source.to_json(),
            "runtime": self.runtime.to_json(),
            "resources": self.resources.to_json(),
            "rules": [{"check": r.check, "message": r.message} for r in self.rules],
            "secrets": list(self.secrets),
        }


class _Problems:
    """Problems of one file, each ``file: field: rule``."""

    def __init__(self, file: Path) -> None:
        self.file = file
        self.lines: list[str] = []

    def add(self, where: str, rule: str) -> None:
        self.lines.append(f"{self.file}: {where}: {rule}" if where else f"{self.file}: {rule}")


def load_recipes(directory: Path | None) -> dict[str, Recipe]:
    """Every recipe of ``directory`` by name (its file name without .toml or .json);
    none without a directory. :class:`SettingError` lists every problem, one line each."""
    if directory is None:
        return {}
    problems: list[str] = []
    recipes: dict[str, Recipe] = {}
    try:
        files = sorted(p for p in directory.iterdir() if p.suffix in (".toml", ".json"))
    except OSError as exc:
        raise SettingError([f"{directory}: cannot list the recipes: {exc.strerror}"]) from exc
    if len(files) > limits.RECIPES_MAX:
        raise SettingError([f"{directory}: more than {limits.RECIPES_MAX} recipes"])
    for path in files:
        file_problems = _Problems(path)
        recipe = read_recipe(path, file_problems)
        if recipe is not None and recipe.name in recipes:
            file_problems.add("", f"a second recipe named {recipe.name!r} (.toml and .json)")
        elif recipe is not None and not file_problems.lines:
            recipes[recipe.name] = recipe
        problems.extend(file_problems.lines)
    if problems:
        raise SettingError(problems)
    return recipes


def _read_document(path: Path, problems: _Problems) -> dict[str, Any] | None:
    try:
        if path.stat().st_size > limits.RECIPE_FILE_MAX_BYTES:
            problems.add("", f"larger than {limits.RECIPE_FILE_MAX_BYTES} bytes")
            return None
        raw = path.read_bytes()
    except OSError as exc:
        problems.add("", f"cannot be read: {exc.strerror}")
        return None
    try:
        text = raw.decode()
        document = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, ValueError) as exc:
        problems.add("", f"is not valid {path.suffix[1:].upper()}: {exc}")
        return None
    if not isinstance(document, dict):
        problems.add("", "must hold an object (a table)")
        return None
    return document


def read_recipe(path: Path, problems: _Problems) -> Recipe | None:
    """One recipe file; its problems go to ``problems`` (None when it has any)."""
    name = path.stem
    if (problem := id_problem(name)) is not None:
        problems.add("name", f"the file name without {path.suffix} {problem}")
    document = _read_document(path, problems)
    if document is None:
        return None
    for key in sorted(set(document) - _TOP_KEYS):
        problems.add(key, f"unknown field (known: {', '.join(sorted(_TOP_KEYS))})")
    description = document.get("description", "")
    if not isinstance(description, str):
        problems.add("description", "must be a string")
    kind = document.get("kind", "training")
    if kind not in _KINDS:
        problems.add("kind", f"must be one of {', '.join(_KINDS)}")
    engine = document.get("engine")
    if engine not in limits.ENGINES:
        problems.add("engine", f"must be one of {', '.join(limits.ENGINES)}")
    parameters = _parameters(document.get("parameters"), problems)
    command = _command(document.get("command"), parameters, problems)
    source = _source(document.get("source"), path.parent, problems)
    runtime = _runtime(document.get("runtime"), problems)
    resources = _resources(document.get("resources", {}), problems)
    rules = _rules(document.get("rules", []), problems)
    secrets = _secrets(document.get("secrets", []), problems)
    if problems.lines:
        return None
    if source is None or runtime is None or resources is None or parameters is None:
        return None  # each has its problem on the list
    engine = cast(limits.Engine, engine)  # one of ENGINES: checked above
    return Recipe(
        name,
        path,
        description,
        kind,
        engine,
        command,
        parameters,
        source,
        runtime,
        resources,
        rules,
        secrets,
    )


def _command(
    value: object, parameters: dict[str, Any] | None, problems: _Problems
) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(a, str) for a in value):
        problems.add(
            "command", "must be a non-empty list of strings (the program, then its arguments)"
        )
        return ()
    if len(value) > limits.COMMAND_MAX_ARGS:
        problems.add("command", f"has more than {limits.COMMAND_MAX_ARGS} arguments")
    # A broken schema is its own problem: its names are not judged again here.
    declared = None if parameters is None else set(parameters.get("properties", {}))
    for index, argument in enumerate(value):
        if len(argument) > limits.COMMAND_ARG_MAX_CHARS or "\x00" in argument:
            problems.add(
                f"command[{index}]",
                f"must be at most {limits.COMMAND_ARG_MAX_CHARS} characters without NUL",
            )
        for match in _PLACEHOLDER.finditer(argument):
            name = match.group(1)
            if name is not None and declared is not None and name not in declared:
                problems.add(
                    f"command[{index}]",
                    f"{{{name}}} is not a parameter of the recipe (parameters.properties)",
                )
    return tuple(value)


def render_command(command: tuple[str, ...], parameters: Mapping[str, object]) -> list[str]:
    """The command with each ``{name}`` replaced by its parameter's value (``{{`` and
    ``}}`` are braces); :class:`KeyError` names a parameter that has no value."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return match.group(0)[0]
        given = parameters[name]
        return json.dumps(given) if isinstance(given, bool | list | dict) else str(given)

    return [_PLACEHOLDER.sub(value, argument) for argument in command]


def _schema_keywords(schema: object, where: str, problems: _Problems) -> None:
    if not isinstance(schema, dict):
        return
    for key, value in schema.items():
        if key not in SCHEMA_KEYWORDS:
            problems.add(
                f"{where}.{key}",
                "is not a supported schema keyword (types, ranges, "
                "required, defaults: docs/launch.md)",
            )
        elif key == "properties" and isinstance(value, dict):
            for name, inner in value.items():
                _schema_keywords(inner, f"{where}.properties.{name}", problems)
        elif key in ("items", "additionalProperties"):
            _schema_keywords(value, f"{where}.{key}", problems)


def _parameters(value: object, problems: _Problems) -> dict[str, Any] | None:
    """The parameter schema (None when it is broken: its problems are on the list)."""
    if value is None:
        return {"type": "object", "properties": {}}
    if not isinstance(value, dict) or value.get("type") != "object":
        problems.add("parameters", 'must be a JSON Schema of type "object"')
        return None
    try:
        Draft202012Validator.check_schema(value)
    except SchemaError as error:
        where = ".".join(str(p) for p in error.absolute_path)
        problems.add(f"parameters.{where}" if where else "parameters", error.message)
        return None
    _schema_keywords(value, "parameters", problems)
    for name, inner in value.get("properties", {}).items():
        if isinstance(inner, dict) and "default" in inner:
            for wrong in Draft202012Validator(inner).iter_errors(inner["default"]):
                problems.add(f"parameters.properties.{name}.default", wrong.message)
    return value


def _source(value: object, base: Path, problems: _Problems) -> Source | None:
    if not isinstance(value, dict) or set(value) not in ({"path"}, {"git", "commit"}):
        problems.add(
            "source",
            "must be a table with path (a directory) or with git and "
            "commit (a repository and a full commit hash)",
        )
        return None
    if "path" in value:
        path = value["path"]
        if not isinstance(path, str) or not path or "\x00" in path:
            problems.add("source.path", "must be a directory path (relative to the recipe's)")
            return None
        return Source(directory=(base / path).resolve())
    git, commit = value["git"], value["commit"]
    if not isinstance(git, str) or not _GIT_URL.fullmatch(git):
        problems.add("source.git", "must be a repository URL: https://, ssh://, git@ or file:///")
    if not isinstance(commit, str) or not _COMMIT.fullmatch(commit):
        problems.add("source.commit", "must be a full commit hash (40 lowercase hex digits)")
    return Source(git=str(git), commit=str(commit))


def _runtime(value: object, problems: _Problems) -> Runtime | None:
    if not isinstance(value, dict) or set(value) not in ({"python"}, {"image"}):
        problems.add(
            "runtime",
            "must be a table with python (an environment's directory) "
            "or image (a container image name)",
        )
        return None
    if "python" in value:
        python = value["python"]
        if not isinstance(python, str) or not python.startswith("/") or "\x00" in python:
            problems.add(
                "runtime.python",
                "must be an absolute path to a Python environment "
                "(the directory holding bin/python)",
            )
            return None
        return Runtime(python=Path(python))
    image = value["image"]
    if not isinstance(image, str) or not _IMAGE.fullmatch(image):
        problems.add(
            "runtime.image", "must be a container image name such as ghcr.io/org/trainer:1.2"
        )
        return None
    return Runtime(image=image)


def _whole(value: object, low: int, high: int, where: str, problems: _Problems) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        problems.add(where, f"must be a whole number from {low} to {high}")
        return low
    return value


def _resources(value: object, problems: _Problems) -> Resources | None:
    known = {"gpus", "cpus", "memory_gb", "time_minutes"}
    if not isinstance(value, dict):
        problems.add("resources", "must be a table of gpus, cpus, memory_gb and time_minutes")
        return None
    for key in sorted(set(value) - known):
        problems.add(f"resources.{key}", f"unknown field (known: {', '.join(sorted(known))})")
    gpus = _whole(value.get("gpus", 0), 0, limits.GPUS_MAX, "resources.gpus", problems)
    cpus = _whole(value.get("cpus", 1), 1, limits.CPUS_MAX, "resources.cpus", problems)
    memory = _positive(
        value.get("memory_gb", 1.0), "GB", limits.MEMORY_GB_MAX, "resources.memory_gb", problems
    )
    minutes = value.get("time_minutes")
    if minutes is not None:
        minutes = _positive(
            minutes, "minutes", limits.TIME_MINUTES_MAX, "resources.time_minutes", problems
        )
    return Resources(gpus, cpus, memory, minutes)


def _positive(value: object, unit: str, high: float, where: str, problems: _Problems) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= high:
        problems.add(where, f"must be a number of {unit} greater than 0 and at most {high:g}")
        return 1.0
    return float(value)


def _rules(value: object, problems: _Problems) -> tuple[ConfigRule, ...]:
    if not isinstance(value, list) or len(value) > limits.RULES_MAX:
        problems.add(
            "rules", f"must be a list of at most {limits.RULES_MAX} tables of check and message"
        )
        return ()
    rules = []
    for index, item in enumerate(value):
        where = f"rules[{index}]"
        if not isinstance(item, dict) or not set(item) <= {"check", "message"}:
            problems.add(where, "must be a table of check (an expression) and message")
            continue
        check, message = item.get("check"), item.get("message", "")
        if not isinstance(message, str):
            problems.add(f"{where}.message", "must be a string")
        if not isinstance(check, str):
            problems.add(
                f"{where}.check", "must be an expression such as global_batch % world_size == 0"
            )
            continue
        try:
            rules.append(ConfigRule(check, str(message), parse_rule(check)))
        except RuleError as exc:
            problems.add(f"{where}.check", str(exc))
    return tuple(rules)


def _secrets(value: object, problems: _Problems) -> tuple[str, ...]:
    """Names of environment variables; the server's own settings and the attempt's
    variables (``TUNEPLANE_*``) are never a job's secret."""
    if not isinstance(value, list) or len(value) > limits.SECRETS_MAX:
        problems.add(
            "secrets", f"must be a list of at most {limits.SECRETS_MAX} environment variable names"
        )
        return ()
    for index, name in enumerate(value):
        if not isinstance(name, str) or not _SECRET_NAME.fullmatch(name):
            problems.add(
                f"secrets[{index}]",
                "must be an environment variable name (letters, digits and _, "
                "not starting with a digit, at most 128)",
            )
        elif name.startswith(limits.SERVER_PREFIX):
            problems.add(
                f"secrets[{index}]",
                f"{name}: {limits.SERVER_PREFIX}* variables are the server's settings and "
                "the job's attempt, never a job's secret",
            )
    if len(set(map(str, value))) != len(value):
        problems.add("secrets", "names a secret twice")
    return tuple(str(name) for name in value)
