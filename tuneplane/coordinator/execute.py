"""Running a plan's trials through Harbor's Python API (``Trial.create(config).run()``),
one at a time. Imported only once Harbor is known to be importable
(:mod:`tuneplane.coordinator.runtime`): nothing else of tuneplane imports Harbor.

Harbor owns the sandbox: it creates and cleans it up, and its own timeouts (agent,
verifier, setup) are recorded in the trial's result. The coordinator's deadline is a
backstop around the whole trial: when it passes, the trial's task is cancelled and the
coordinator waits for Harbor's own cleanup (cooperative, not a hard kill). SIGTERM and
SIGINT cancel the current trial the same way. There are no automatic retries.

Whatever ends a trial — an agent timeout or crash, a verifier error, the deadline, Harbor's
API raising — is that trial's outcome, and the next trial runs: only a signal stops the
execution. ``--resume`` runs again what a signal or a dead process cut short (as the
trial's next retry, in a directory of its own) and the trials never started.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tuneplane.coordinator.journal import (
    DEADLINE,
    HARBOR_ERROR,
    INTERRUPTED,
    TRIAL_EXCEPTION,
    Journal,
    TrialRecord,
    now,
)
from tuneplane.coordinator.plan import (
    CHECKPOINT_AGENT_FIELDS,
    COORDINATOR_FIELDS,
    TRIALS_DIR,
    EvalPlan,
)
from tuneplane.importers.harbor import read_attempt
from tuneplane.importers.problems import ImportRefused, Problem

#: Characters of an exception's message kept in the journal.
MESSAGE_MAX_CHARS: Final = 2000
_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)

#: ``on_trial(record)`` after each trial that was started.
OnTrial = Callable[[TrialRecord], None]


def trial_configs(plan: EvalPlan, out: Path) -> list[Any]:
    """Each trial's Harbor ``TrialConfig`` (the template with its task, name and
    directory), validated by Harbor's own model before anything starts; the agent and
    environment classes named by import path are resolved too. :class:`ImportRefused`
    names each problem once (the template is shared, so it would repeat per trial)."""
    from harbor.models.trial.config import TrialConfig
    from pydantic import ValidationError

    configs: list[Any] = []
    problems: dict[tuple[str, str], Problem] = {}
    for trial in plan.trials:
        agent = plan.trial_config.get("agent")
        raw = {
            **plan.trial_config,
            # The checkpoint's model, given to the agent here and nowhere else.
            "agent": {**(agent if isinstance(agent, dict) else {}), **plan.model},
            "task": {"path": str(trial.task_path)},
            "trial_name": trial.trial_id,
            "trials_dir": str(out / TRIALS_DIR),
        }
        try:
            configs.append(TrialConfig.model_validate(raw))
        except ValidationError as exc:
            for error in exc.errors():
                where = ".".join(str(part) for part in error["loc"])
                rule = f"{error['msg']} (Harbor's TrialConfig, {trial.where})"
                field_name = f"trial_config.{where}" if where else "trial_config"
                problems.setdefault(
                    (field_name, error["msg"]), Problem(plan.file, field_name, rule)
                )
    if not problems and configs:
        problems.update(_unresolved(plan.file, configs[0]))
    if problems:
        raise ImportRefused(list(problems.values()))
    return configs


def _unresolved(file: str, config: Any) -> dict[tuple[str, str], Problem]:
    """The agent and environment classes, imported as Harbor will import them."""
    from harbor.agents.factory import AgentFactory
    from harbor.utils.import_path import import_class

    problems: dict[tuple[str, str], Problem] = {}
    checks: list[tuple[str, Callable[[], object]]] = [
        ("trial_config.agent", lambda: AgentFactory.get_agent_class_from_config(config.agent)),
    ]
    if config.environment.import_path is not None:
        path = config.environment.import_path
        checks.append(
            (
                "trial_config.environment.import_path",
                lambda: import_class(path, label="environment"),
            )
        )
    for field_name, check in checks:
        try:
            check()
        except Exception as exc:  # whatever Harbor raises for a class it cannot load
            rule = f"Harbor cannot load it: {type(exc).__name__}: {exc}"
            problems[(field_name, rule)] = Problem(file, field_name, rule)
    return problems


def settings_evidence(configs: Sequence[Any], plan: EvalPlan, harbor: str) -> dict[str, Any]:
    """The protocol's evaluation settings, from the trial configuration actually run
    (Harbor's model with its defaults filled in and secrets in ``env`` templated), not
    from a declaration. The checkpoint's model and endpoint are left out: they are the
    checkpoint's identity, which the settings digest must not depend on."""
    exclude: dict[str, Any] = {key: True for key in COORDINATOR_FIELDS}
    exclude["agent"] = {key: True for key in CHECKPOINT_AGENT_FIELDS}
    template = configs[0].model_dump(mode="json", exclude=exclude)
    return {
        "coordinator": "tuneplane eval run",
        "harbor": harbor,
        "trial_config": template,
        "deadline_seconds": plan.deadline_seconds,
        "automatic_retries": 0,
    }


@dataclass(slots=True)
class _Control:
    """The trial being run, and the signal that asked the execution to stop."""

    current: asyncio.Task[Any] | None = None
    signal: int | None = None
    cancelling: bool = False

    def interrupt(self, signum: int) -> None:
        self.signal = self.signal or signum
        self.cancel()

    def cancel(self) -> None:
        # Once: a second cancellation would cut Harbor's cleanup short.
        if self.current is not None and not self.cancelling:
            self.cancelling = True
            self.current.cancel()


async def _attempt(config: Any) -> Any:
    from harbor.trial.trial import Trial

    trial = await Trial.create(config)
    return await trial.run()


def _recorded_exception(config: Any) -> str | None:
    """The exception type Harbor wrote in the trial's result.json, when the trial was
    cancelled (and so returned no result) or raised after writing it."""
    evidence, _ = read_attempt(Path(config.trials_dir) / config.trial_name, "", "")
    return evidence.exception_type


def _message(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:MESSAGE_MAX_CHARS]


async def _run_one(
    config: Any, record: TrialRecord, journal: Journal, deadline: float, control: _Control
) -> None:
    record.execution = "running"
    record.started_at = now()
    # Saved before Harbor makes the trial's directory: a process killed during the trial
    # leaves it "running", and --resume runs it again in a directory of its own.
    journal.save()
    control.current = asyncio.ensure_future(_attempt(config))
    control.cancelling = False
    done, _ = await asyncio.wait({control.current}, timeout=deadline)
    timed_out = not done and control.signal is None
    if timed_out:
        control.cancel()
    result: Any = None
    try:
        result = await control.current  # after a cancellation: Harbor's cleanup, waited for
    except asyncio.CancelledError:
        pass
    except Exception as exc:  # Harbor's API raised: the trial's outcome, recorded
        record.error_type, record.message = HARBOR_ERROR, _message(exc)
    finally:
        control.current = None
        record.finished_at = now()
    info = getattr(result, "exception_info", None)
    record.exception_type = _recorded_exception(config) if info is None else info.exception_type
    if control.signal is not None:
        record.error_type = INTERRUPTED
        record.message = f"cancelled by signal {signal.Signals(control.signal).name}"
    elif timed_out:
        record.error_type = DEADLINE
        record.message = f"the trial passed the coordinator's deadline of {deadline:g} s"
    elif record.error_type is None and record.exception_type is not None:
        record.error_type = TRIAL_EXCEPTION
        detail = f": {info.exception_message}" if info is not None else ""
        record.message = f"{record.exception_type}{detail}"[:MESSAGE_MAX_CHARS]
    record.execution = "interrupted" if control.signal is not None else "completed"


def _config(config: Any, record: TrialRecord, out: Path) -> Any:
    """The trial's configuration for this run: a resumed run writes its own directory."""
    if record.retry == 0:
        return config
    return config.model_copy(update={"trials_dir": out / Path(record.directory).parent})


async def _run_all(
    plan: EvalPlan, configs: Sequence[Any], journal: Journal, on_trial: OnTrial
) -> int | None:
    # Imported before the first deadline starts: a module import is not the trial's time.
    from harbor.trial.trial import Trial  # noqa: F401

    control = _Control()
    loop = asyncio.get_running_loop()
    for signum in _SIGNALS:
        loop.add_signal_handler(signum, control.interrupt, signum)
    try:
        for trial, config in zip(plan.trials, configs, strict=True):
            if control.signal is not None:
                break
            record = journal.next_run(trial.trial_id)
            if record is None:  # completed before a resume
                continue
            run = _config(config, record, journal.out)
            await _run_one(run, record, journal, plan.deadline_seconds, control)
            journal.save()
            on_trial(record)
    finally:
        for signum in _SIGNALS:
            loop.remove_signal_handler(signum)
    return control.signal


def run_trials(
    plan: EvalPlan, configs: Sequence[Any], journal: Journal, on_trial: OnTrial
) -> int | None:
    """Run the trials in plan order that have no completed run yet, saving the journal
    as each starts and ends; the signal that stopped them, if one did. The journal's
    state says how the execution ended."""
    journal.state = "running"
    journal.save()
    stopped_by = asyncio.run(_run_all(plan, configs, journal, on_trial))
    if stopped_by is not None:
        journal.state = "interrupted"
    else:
        journal.state = "complete" if not journal.unfinished() else "running"
    journal.finished_at = now()
    journal.save()
    return stopped_by
