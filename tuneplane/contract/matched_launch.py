"""Matched benchmark launches: two runs' registered exports evaluated by one evaluation
recipe with the same parameters, each side its own job (docs/launch.md).

A body (``POST …/launch/matched/preview`` and ``POST …/launch/matched``)::

    {"recipe": "lm_eval", "parameters": {"tasks": "arc_easy"}, "config": {}, "limit": 50,
     "left": {"run": "sft-3", "export": "<export_id>"},
     "right": {"run": "sft-4", "export": "<export_id>"},
     "pair": "matched-1a2b3c4d", "side": "left"}

``pair`` and ``side`` are for starting one side (the preview makes the pair's ID). Each
side's job gets the export's path or URI as the recipe's ``model`` parameter and the sample
limit as its ``limit``: everything else is the same on both sides by construction, so the
two sides' protocol digests (:func:`protocol_digest`) are equal. Pure: the server finds the
exports and runs the checks.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

from tuneplane.contract.errors import InvalidInput, MalformedRequest, Violation
from tuneplane.contract.ids import id_problem
from tuneplane.contract.launch import canonical_json, parameters_and_config

Side = Literal["left", "right"]
SIDES: Final[tuple[Side, ...]] = get_args(Side)
#: The evaluation recipe's parameters a matched launch fills in per side and for both.
MODEL_PARAMETER: Final = "model"
LIMIT_PARAMETER: Final = "limit"
#: The run config's key holding what a side's job evaluates: the pair, the side, the run
#: and export it came from, and the protocol digest.
MATCHED_CONFIG_KEY: Final = "matched_evaluation"
PAIR_PREFIX: Final = "matched-"
PROTOCOL_COVERS: Final = (
    "SHA-256 of the canonical JSON of the recipe's specification, the parameters without "
    "the model, and the config: what both sides share, so equal by construction"
)
_FIELDS: Final = ("recipe", "parameters", "config", "limit", "left", "right", "pair", "side")


@dataclass(frozen=True, slots=True)
class Choice:
    """One side's choice: a run of the project and one of its exports."""

    run: str
    export: str


@dataclass(frozen=True, slots=True)
class MatchedInput:
    recipe: str
    parameters: dict[str, Any]
    config: dict[str, Any]
    limit: int | None
    sides: dict[Side, Choice]
    pair: str | None = None
    side: Side | None = None


def new_pair() -> str:
    return f"{PAIR_PREFIX}{secrets.token_hex(4)}"


def side_run(pair: str, side: Side) -> str:
    """The run a side's job creates (and the idempotency key of its submission)."""
    return f"{pair}-{side}"


def protocol_digest(spec: Any, parameters: dict[str, Any], config: dict[str, Any]) -> str:
    """What both sides share: the recipe, the parameters but the model, the config but
    the matched block."""
    shared = {k: v for k, v in parameters.items() if k != MODEL_PARAMETER}
    settings = {k: v for k, v in config.items() if k != MATCHED_CONFIG_KEY}
    document = {"spec": spec, "parameters": shared, "config": settings}
    return hashlib.sha256(canonical_json(document)).hexdigest()


def _choice(value: object, name: str, violations: list[Violation]) -> Choice | None:
    if not isinstance(value, dict) or set(value) != {"run", "export"}:
        violations.append(Violation(name, "required: an object of run and export"))
        return None
    for key in ("run", "export"):
        if (problem := id_problem(value[key])) is not None:
            violations.append(Violation(f"{name}.{key}", problem))
    return Choice(str(value["run"]), str(value["export"]))


def parse_matched(body: object, starting: bool) -> MatchedInput:
    """A matched launch's body; ``starting``: one side's start, which names the pair and
    the side. :class:`InvalidInput` names every field that breaks its rule."""
    if not isinstance(body, dict):
        raise MalformedRequest("body: must be a JSON object")
    violations = [
        Violation(key, f"unknown field (known: {', '.join(_FIELDS)})")
        for key in sorted(set(body) - set(_FIELDS))
    ]
    recipe = body.get("recipe")
    if (problem := id_problem(recipe)) is not None:
        violations.append(Violation("recipe", "required" if recipe is None else problem))
    objects = parameters_and_config(body, violations)
    for name in (MODEL_PARAMETER, LIMIT_PARAMETER):
        if name in objects.get("parameters", {}):
            violations.append(
                Violation(f"parameters.{name}", "set per side by the matched launch, not given")
            )
    limit = body.get("limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        violations.append(Violation("limit", "must be a whole number of samples, at least 1"))
    sides = {side: _choice(body.get(side), side, violations) for side in SIDES}
    pair, side = body.get("pair"), body.get("side")
    wrong_pair = not isinstance(pair, str) or not pair.startswith(PAIR_PREFIX) or id_problem(pair)
    if (starting or pair is not None) and wrong_pair:
        violations.append(Violation("pair", f"required: the preview's pair ID ({PAIR_PREFIX}…)"))
    if starting and side not in SIDES:
        violations.append(Violation("side", "required: left or right"))
    if violations:
        raise InvalidInput(tuple(violations))
    chosen = {name: choice for name, choice in sides.items() if choice is not None}
    return MatchedInput(
        str(recipe), objects["parameters"], objects["config"], limit, chosen, pair, side
    )
