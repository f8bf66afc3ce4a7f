"""Reporting a Hugging Face ``Trainer`` (and so TRL's trainers, which subclass it)::

    from tuneplane.integrations.transformers import TuneplaneCallback

    trainer = Trainer(model, args, train_dataset=..., callbacks=[TuneplaneCallback()])

At train begin it starts the run (``tuneplane.init``: project from ``project=``, else the
training arguments' ``project``, else ``huggingface``; name from ``name=``, else
``run_name``), with the training arguments and the model's configuration as its config.
Every ``on_log`` is reported at the trainer's global step: ``eval_*`` as ``eval/*``,
``test_*`` as ``test/*``, the rest as ``train/*``; the end-of-training summary
(``train_runtime``, ``total_flos``, …) is one ``trainer/summary`` event. Only the world's
main process reports. The attempt ends with the trainer's outcome: succeeded at train end,
failed when the process exits without reaching it. Under ``tuneplane run``, or after your
own ``tuneplane.init()``, it reports into that run and leaves its end to its owner.

With TRL's ``GRPOConfig(log_completions=True)``, the completions TRL writes at each
training log become the run's training rollouts (see
:mod:`tuneplane.client.integrations.completions`).
"""

from __future__ import annotations

import atexit
import logging
import math
from collections.abc import Mapping
from typing import Any, Final

import orjson

from tuneplane.client import session
from tuneplane.client.integrations.completions import CompletionLog
from tuneplane.client.session import Run
from tuneplane.contract.limits import RUN_CONFIG_MAX_BYTES

try:
    from transformers import TrainerCallback
except ImportError as exc:  # pragma: no cover - the one line people need
    raise ImportError(
        "tuneplane.integrations.transformers needs transformers: pip install transformers"
    ) from exc

logger = logging.getLogger("tuneplane")
DEFAULT_PROJECT: Final = "huggingface"
#: Reported once at the end of training, not as one-point curves.
SUMMARY_KEYS: Final = frozenset(
    {"train_runtime", "train_samples_per_second", "train_steps_per_second", "train_loss",
     "total_flos"}
)  # fmt: skip


def metric_name(key: str) -> str:
    """The Trainer's log key as a series name (the Trainer's own reporters' convention)."""
    for prefix in ("eval", "test"):
        if key.startswith(prefix + "_"):
            return f"{prefix}/{key[len(prefix) + 1 :]}"
    return f"train/{key}"


def run_name(raw: str | None) -> str | None:
    """The run's name from ``run_name`` (often an output path): as given, since init() maps
    any name to its run's ID and keeps the name for people."""
    return raw or None


def _json_safe(value: Any) -> Any:
    return orjson.loads(orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS))


def run_config(args: Any, model: Any) -> dict[str, Any]:
    """The training arguments and the model's configuration, within the config limit (the
    model's configuration goes first when both do not fit)."""
    config: dict[str, Any] = {"training_args": _json_safe(args.to_dict())}
    model_config = getattr(model, "config", None)
    if model_config is not None and hasattr(model_config, "to_dict"):
        config["model_config"] = _json_safe(model_config.to_dict())
    if len(orjson.dumps(config)) > RUN_CONFIG_MAX_BYTES:
        config.pop("model_config", None)
    return config


def _numbers(logs: Mapping[str, Any]) -> tuple[dict[str, float], dict[str, Any]]:
    """(metrics, summary): numeric values by series name, and the end-of-training fields."""
    metrics: dict[str, float] = {}
    summary: dict[str, Any] = {}
    for key, value in logs.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if key in SUMMARY_KEYS:
            if math.isfinite(value):
                summary[key] = value
        else:
            metrics[metric_name(key)] = value
    return metrics, summary


class TuneplaneCallback(TrainerCallback):
    """Report the Trainer's run to tuneplane. ``project``, ``name`` and ``init_options``
    (``resume``, ``server``, ``tags``, …) go to :func:`tuneplane.init`."""

    def __init__(
        self, project: str | None = None, name: str | None = None, **init_options: Any
    ) -> None:
        self.project = project
        self.name = name
        self.init_options = init_options
        self._run: Run | None = None
        self._owns_run = False
        self._completions: CompletionLog | None = None

    @property
    def run(self) -> Run | None:
        return self._run

    def _start(self, args: Any, state: Any, model: Any) -> None:
        if self._run is not None or not state.is_world_process_zero:
            return
        self._completions = CompletionLog.of(args)
        existing = session.current()
        if existing is not None:
            self._run = existing
            return
        self._run = session.init(
            project=self.project or getattr(args, "project", None) or DEFAULT_PROJECT,
            name=self.name or run_name(getattr(args, "run_name", None)),
            config=run_config(args, model),
            **self.init_options,
        )
        self._owns_run = True
        atexit.register(self._end_unfinished)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._start(args, state, kwargs.get("model"))

    def on_log(
        self, args: Any, state: Any, control: Any, logs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        if not state.is_world_process_zero or not logs:
            return
        self._start(args, state, kwargs.get("model"))
        run = self._run
        if run is None:
            return
        metrics, summary = _numbers(logs)
        if metrics:
            run.log(metrics, step=state.global_step)
        reporter = run.reporter
        if summary and reporter is not None:
            reporter.event("trainer/summary", summary, step=state.global_step)
        self._collect()
        if self._completions is not None:
            self._completions.logged(state.global_step, logs)

    def _collect(self) -> None:
        """The rollouts of the completion files written since the last event."""
        completions = self._completions
        if completions is None or not completions.pending:
            return
        reporter = None if self._run is None else self._run.reporter
        if reporter is None:
            completions.pending.clear()  # a run that does not report (nowhere to send them)
            return
        completions.collect(reporter)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._collect()

    def on_predict(
        self, args: Any, state: Any, control: Any, metrics: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        self.on_log(args, state, control, logs=metrics, **kwargs)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._collect()
        if self._run is not None and self._owns_run:
            self._run.finish(0)
            atexit.unregister(self._end_unfinished)

    def _end_unfinished(self) -> None:
        """At exit, a run whose training never reached its end failed."""
        if self._run is not None and self._owns_run:
            self._run.finish(1)
