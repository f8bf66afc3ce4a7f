"""The evaluation plan of ``tuneplane eval run``: the import plan's declarations, plus
what to run — each trial's local Harbor task directory, and one Harbor ``TrialConfig``
template (agent, environment, timeouts) for all of them.

The checkpoint is named in one place, ``checkpoint``: its ``name`` (recorded beside the
round) and the ``model_name`` / ``base_url`` the agent is given at run time. None of it is
part of the template, so none of it enters the settings digest: two plans that differ only
in their checkpoint declare the same protocol and their rounds compare.

Everything here is checked without Harbor (``--check-plan``): the declarations by the
import plan's own rules (:mod:`tuneplane.importers.plan`, so the two can never disagree),
the task directories on disk, and the coordinator's own fields. Harbor's ``TrialConfig``
validates the template once Harbor is there (:mod:`tuneplane.coordinator.execute`).

>>> plan = load_eval_plan("eval-plan.json")  # ImportRefused names every problem
>>> [(t.trial_id, t.task_path.name) for t in plan.trials]
[('hello-world-r0', 'hello-world')]
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tuneplane.contract.limits import IMPORT_PLAN_MAX_BYTES, IMPORT_TASK_CONFIG_MAX_BYTES
from tuneplane.importers.bounded import FileTooLarge, read_bounded
from tuneplane.importers.plan import Plan, PlannedTrial, example_plan, parse_plan
from tuneplane.importers.problems import ImportRefused, Problem

#: Trials one execution runs at most (the seed's limit: a small explicit cohort).
EVAL_TRIALS_MAX: Final = 128
#: The coordinator's per-trial deadline when the plan gives none (Harbor's own agent,
#: verifier and setup timeouts apply inside it).
DEADLINE_DEFAULT_SECONDS: Final = 3600.0
DEADLINE_MAX_SECONDS: Final = 7 * 24 * 3600.0
#: Where the trial directories go beneath the output directory; a trial's directory is
#: ``trials/<trial_id>`` (Harbor's ``trial_name``).
TRIALS_DIR: Final = "trials"
#: TrialConfig fields the coordinator sets per trial: a template must leave them out.
COORDINATOR_FIELDS: Final = ("task", "trial_name", "trials_dir", "job_id")
_FIELDS: Final = (
    "plan_version",
    "round",
    "benchmark",
    "checkpoint",
    "digests",
    "deadline_seconds",
    "trial_config",
    "trials",
)
#: Fields the import plan's rules do not check (the coordinator's own).
_OWN: Final = ("deadline_seconds", "trial_config", "trials")
#: The checkpoint's own fields of an evaluation plan (beyond the import plan's name and
#: digest): what the agent is given at run time, as Harbor's ``AgentConfig`` names them.
CHECKPOINT_AGENT_FIELDS: Final = ("model_name", "base_url")

EXAMPLE_EVAL_PLAN: Final = example_plan(
    """  "deadline_seconds": 1800,
  "trial_config": {
    "agent": {"name": "terminus-2"},
    "environment": {"type": "docker"},
    "timeout_multiplier": 1.0
  },
  "trials": [
    {"task": "hello-world", "repeat": 0, "path": "tasks/hello-world"},
    {"task": "hello-world", "repeat": 1, "path": "tasks/hello-world"}
  ]
}
""",
    checkpoint=',\n    "model_name": "hosted_vllm/step-1200",\n    "base_url": "http://model-service:8000/v1"',
)


@dataclass(frozen=True, slots=True)
class EvalTrial:
    trial_id: str
    task: str
    repeat: int
    #: The Harbor task directory, absolute (the plan's path is relative to the plan file).
    task_path: Path
    where: str

    @property
    def directory(self) -> str:
        """The trial's directory beneath the output directory."""
        return f"{TRIALS_DIR}/{self.trial_id}"


@dataclass(frozen=True, slots=True)
class EvalPlan:
    file: str
    #: The declarations (round, benchmark, checkpoint, digests), as an import plan.
    declared: Plan
    deadline_seconds: float
    #: The TrialConfig template, as the plan gives it (Harbor fills in its defaults).
    trial_config: dict[str, Any]
    #: The checkpoint's ``model_name`` and ``base_url`` (those given), set on the agent of
    #: every trial's TrialConfig at run time and kept out of the settings evidence.
    model: dict[str, str]
    #: In task / repeat order, as the snapshot lists them.
    trials: tuple[EvalTrial, ...]


def _harbor_task_name(task_dir: Path) -> tuple[str | None, str | None]:
    """The name Harbor records as the trial's ``task_name`` (``[task] name`` of
    task.toml, else the directory's name), or why the directory is no Harbor task."""
    config = task_dir / "task.toml"
    if not config.is_file():
        return None, f"{task_dir} has no task.toml (not a Harbor task directory)"
    try:
        data = read_bounded(config, IMPORT_TASK_CONFIG_MAX_BYTES, "a task's task.toml")
        parsed = tomllib.loads(data.decode())
    except FileTooLarge as exc:
        return None, f"{config} {exc.problem.rule}"
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return None, f"{config} is not TOML: {exc}"
    except OSError as exc:
        return None, f"{config} cannot be read: {exc.strerror}"
    section = parsed.get("task")
    name = section.get("name") if isinstance(section, dict) else None
    return (name if isinstance(name, str) and name else task_dir.name), None


def _task_path(base: Path, item: dict[str, Any], where: str, problems: list[Problem]) -> Path:
    raw = item.get("path")
    if not isinstance(raw, str) or not raw.strip():
        problems.append(Problem("", f"{where}.path", "required: the Harbor task directory"))
        return base
    path = (base / raw).resolve()
    if not path.is_dir():
        problems.append(Problem("", f"{where}.path", f"{raw!r} is not a directory ({path})"))
        return path
    name, problem = _harbor_task_name(path)
    if problem:
        problems.append(Problem("", f"{where}.path", problem))
    elif name != item.get("task"):
        problems.append(
            Problem(
                "",
                f"{where}.task",
                f"is {item.get('task')!r}, but Harbor names the task at {raw!r} {name!r} "
                "(its result.json will say so)",
            )
        )
    return path


def _deadline(raw: object, problems: list[Problem]) -> float:
    if raw is None:
        return DEADLINE_DEFAULT_SECONDS
    if (
        isinstance(raw, bool)
        or not isinstance(raw, int | float)
        or not math.isfinite(raw)
        or not 0 < raw <= DEADLINE_MAX_SECONDS
    ):
        problems.append(
            Problem(
                "",
                "deadline_seconds",
                f"must be a number of seconds greater than 0 and at most {DEADLINE_MAX_SECONDS:g}",
            )
        )
        return DEADLINE_DEFAULT_SECONDS
    return float(raw)


def _template(raw: object, problems: list[Problem]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        problems.append(
            Problem("", "trial_config", "required: a Harbor TrialConfig without its task")
        )
        return {}
    for key in COORDINATOR_FIELDS:
        if key in raw:
            problems.append(
                Problem(
                    "",
                    f"trial_config.{key}",
                    "is set by the coordinator for each trial: leave it out",
                )
            )
    agent = raw.get("agent")
    for key in CHECKPOINT_AGENT_FIELDS:
        if isinstance(agent, dict) and key in agent:
            problems.append(
                Problem(
                    "",
                    f"trial_config.agent.{key}",
                    f"is the checkpoint's: give it as checkpoint.{key} (the checkpoint is "
                    "no part of the settings digest, so two checkpoints' rounds compare)",
                )
            )
    return dict(raw)


def _model(raw: object, problems: list[Problem]) -> dict[str, str]:
    """The checkpoint's agent fields (the rest of ``checkpoint`` is the import plan's)."""
    if not isinstance(raw, dict):
        return {}
    model: dict[str, str] = {}
    for key in CHECKPOINT_AGENT_FIELDS:
        value = raw.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip() or len(value) > 1024:
            problems.append(
                Problem("", f"checkpoint.{key}", "must be a string of 1-1024 characters")
            )
        else:
            model[key] = value
    return model


def _declared(file: str, raw: dict[str, Any], problems: list[Problem]) -> Plan | None:
    """The declarations and the cohort checked as an import plan whose attempts are the
    trial directories this execution would write."""
    trials = raw.get("trials")
    shaped = [
        {**{k: v for k, v in item.items() if k != "path"}, "attempts": []}
        if isinstance(item, dict)
        else item
        for item in (trials if isinstance(trials, list) else [])
    ]
    as_import = {key: raw[key] for key in _FIELDS if key in raw and key not in _OWN}
    if isinstance(raw.get("checkpoint"), dict):
        checkpoint = raw["checkpoint"].items()
        as_import["checkpoint"] = {k: v for k, v in checkpoint if k not in CHECKPOINT_AGENT_FIELDS}
    if "trials" in raw:
        as_import["trials"] = shaped if isinstance(trials, list) else trials
    try:
        return parse_plan(file, as_import)
    except ImportRefused as refused:
        problems += refused.problems
        return None


def parse_eval_plan(file: str, raw: object) -> EvalPlan:
    """The plan in ``raw`` (parsed JSON; task paths relative to ``file``'s directory), or
    :class:`ImportRefused` naming every problem."""
    if not isinstance(raw, dict):
        raise ImportRefused([Problem(file, "", "must be a JSON object (see --example-plan)")])
    problems: list[Problem] = []
    for key in raw:
        if key not in _FIELDS:
            problems.append(Problem(file, key, f"unknown field (known: {', '.join(_FIELDS)})"))
    items = raw.get("trials")
    if isinstance(items, list) and len(items) > EVAL_TRIALS_MAX:
        problems.append(
            Problem(file, "trials", f"{len(items)} trials: one execution runs {EVAL_TRIALS_MAX}")
        )
    declared = _declared(file, raw, problems)
    local: list[Problem] = []
    deadline = _deadline(raw.get("deadline_seconds"), local)
    template = _template(raw.get("trial_config"), local)
    model = _model(raw.get("checkpoint"), local)
    paths: dict[str, Path] = {}
    base = Path(file).resolve().parent
    for index, item in enumerate(items if isinstance(items, list) else []):
        if not isinstance(item, dict):
            continue
        where = f"trials[{index}]"
        if "attempts" in item:
            local.append(Problem("", f"{where}.attempts", "is the coordinator's: leave it out"))
        paths[where] = _task_path(base, item, where, local)
    problems += [Problem(file, p.field, p.rule) for p in local]
    if problems or declared is None:
        raise ImportRefused(problems or [Problem(file, "", "is not a plan")])
    trials = tuple(_trial(t, paths[t.where]) for t in declared.trials)
    return EvalPlan(file, declared, deadline, template, model, trials)


def _trial(planned: PlannedTrial, path: Path) -> EvalTrial:
    return EvalTrial(planned.trial_id, planned.task, planned.repeat, path, planned.where)


def load_eval_plan(path: str) -> EvalPlan:
    """Read and check the plan file at ``path`` (no Harbor needed)."""
    try:
        raw = json.loads(read_bounded(path, IMPORT_PLAN_MAX_BYTES, "an evaluation plan"))
    except OSError as exc:
        raise ImportRefused([Problem(path, "", f"cannot be read: {exc.strerror}")]) from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ImportRefused([Problem(path, "", f"is not JSON: {exc}")]) from exc
    return parse_eval_plan(path, raw)


def import_plan(
    plan: EvalPlan,
    runs: Mapping[str, Sequence[tuple[int, str]]],
    settings: dict[str, Any],
    execution: str,
) -> dict[str, Any]:
    """The import plan of an execution: every planned trial (the declared denominator),
    with one attempt per run that was started (``runs``: trial ID -> its runs' retry and
    directory; a trial never started has none: missing coverage); ``settings`` is the
    protocol's evidence, ``execution`` the ID its round is named after."""
    declared = plan.declared
    document: dict[str, Any] = {
        "plan_version": 1,
        "round": declared.round,
        "execution": execution,
        "checkpoint": declared.checkpoint,
        "digests": declared.digests,
        "settings": settings,
        "trials": [
            {
                "task": trial.task,
                "repeat": trial.repeat,
                "trial_id": trial.trial_id,
                "attempts": [
                    {"retry": retry, "directory": directory}
                    for retry, directory in runs.get(trial.trial_id, ())
                ],
            }
            for trial in plan.trials
        ],
    }
    if declared.benchmark:
        document["benchmark"] = declared.benchmark
    return document
