"""``tuneplane eval run``: check the plan, run its trials, write the same snapshot the
importer writes (docs/import.md, "The fixed-checkpoint evaluation coordinator").

Order of work: the plan and every trial's Harbor ``TrialConfig`` are checked before the
output directory is made (it must be new: an uncertain earlier execution is never
resumed); then the trials run one at a time; then the metadata is saved (``execution.json``,
``execution-errors.json``, ``import-plan.json``) before the optional text is converted and
the snapshot written by the importer itself from the trial directories Harbor wrote, so an
import of the same directories gives the same snapshot. Delivery, when asked for, is the
CLI's (after all of this).

Exit status: 0 for a complete execution whose every planned trial is scored (success or
failure: a model's failures are a completed evaluation); 1 when a trial is unscored or an
infrastructure error, or the execution stopped before the last trial; 2 for a plan that
breaks a rule (nothing started); 128 + the signal's number after SIGTERM or SIGINT.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tuneplane.coordinator.journal import (
    IMPORT_PLAN_FILE,
    PLAN_COPY_FILE,
    SNAPSHOT_FILE,
    Journal,
    TrialRecord,
    write_json,
)
from tuneplane.coordinator.plan import EvalPlan, import_plan, load_eval_plan
from tuneplane.importers.harbor import map_outcome, read_attempt
from tuneplane.importers.harbor_import import import_harbor
from tuneplane.importers.problems import ImportRefused, Problem
from tuneplane.importers.snapshot import Snapshot, summary, write_snapshot
from tuneplane.importers.text import TRACE_LIMIT_MAX, Redactor, load_redactor

#: Prints one line for people (on stderr, by the CLI).
Say = Callable[[str], None]
SCORED: Final = frozenset({"success", "failure"})
EXIT_INCOMPLETE: Final = 1
EXIT_REFUSED: Final = 2


@dataclass(frozen=True, slots=True)
class EvalOptions:
    plan: str
    out: str | None
    trace_limit: int = 0
    redactor: str | None = None


@dataclass(frozen=True, slots=True)
class Evaluated:
    code: int
    #: Written to ``OUT/snapshot.json`` (None when the execution never started or the
    #: trial directories could not be read into one).
    snapshot: Snapshot | None = None
    #: The signal that stopped the execution (nothing is delivered after one).
    signal: int | None = None


def _refused(refused: ImportRefused, say: Say) -> None:
    for problem in refused.problems:
        say(str(problem))


def _exists(out: str) -> Problem:
    return Problem(
        out,
        "",
        "already exists: an execution writes a new directory (an earlier, uncertain "
        "execution is never resumed); name another one",
    )


def _checked(options: EvalOptions) -> tuple[EvalPlan, Redactor | None]:
    """The plan, the redactor and the output directory, checked without Harbor."""
    problems: list[Problem] = []
    if not 0 <= options.trace_limit <= TRACE_LIMIT_MAX:
        problems.append(Problem("--trace-limit", "", f"must be 0-{TRACE_LIMIT_MAX}"))
    plan: EvalPlan | None = None
    redactor: Redactor | None = None
    try:
        plan = load_eval_plan(options.plan)
    except ImportRefused as refused:
        problems += refused.problems
    try:
        redactor = load_redactor(options.redactor) if options.redactor else None
    except ImportRefused as refused:
        problems += refused.problems
    if options.out is not None and Path(options.out).exists():
        problems.append(_exists(options.out))
    if problems or plan is None:
        raise ImportRefused(problems)
    return plan, redactor


def refused(options: EvalOptions, say: Say) -> bool:
    """Whether the plan, the flags or the output directory break a rule (each problem
    said): checked before Harbor is looked for, so a bad plan needs no Harbor."""
    if options.out is None:
        say("--out: required: the new directory the execution writes")
        return True
    try:
        _checked(options)
    except ImportRefused as refusal:
        _refused(refusal, say)
        say("the plan was refused: nothing was started")
        return True
    return False


def check_plan(options: EvalOptions, say: Say) -> int:
    """``--check-plan``: local paths and declarations, without Harbor or a sandbox."""
    try:
        plan, _ = _checked(options)
    except ImportRefused as refused:
        _refused(refused, say)
        say("the plan was refused: nothing was started")
        return EXIT_REFUSED
    tasks = len({trial.task for trial in plan.trials})
    say(
        f"plan {options.plan}: {len(plan.trials)} trials of {tasks} tasks, round "
        f"{plan.declared.round!r}, deadline {plan.deadline_seconds:g} s per trial; the "
        "trial configurations are validated by Harbor when the execution starts"
    )
    return 0


def _progress(out: Path, say: Say) -> Callable[[TrialRecord], None]:
    def show(record: TrialRecord) -> None:
        evidence, _ = read_attempt(out / record.directory, record.task, record.trial_id)
        outcome = map_outcome(evidence)
        stopped = f"; {record.error_type}: {record.message}" if record.error_type else ""
        say(f"trial {record.trial_id}: {outcome.status} ({outcome.reason}){stopped}")

    return show


def _verdict(journal: Journal, snapshot: Snapshot, say: Say) -> int:
    current = {t["trial_id"]: t["status"] for t in snapshot.trials}
    unscored = [trial for trial, status in current.items() if status not in SCORED]
    not_run = len(journal.trials) - len(journal.started)
    errors = journal.errors()
    if journal.state == "complete" and not unscored:
        say(f"evaluation complete: all {len(journal.trials)} planned trials scored")
        return 0
    why = [f"{len(unscored)} trials not scored"] if unscored else []
    if errors:
        first = errors[0]
        why.append(f"stopped at trial {first['trial_id']} ({first['error_type']})")
    if not_run:
        why.append(f"{not_run} of {len(journal.trials)} planned trials not run")
    say(f"evaluation incomplete: {'; '.join(why)}")
    return EXIT_INCOMPLETE


def _execute(plan: EvalPlan, out: Path, say: Say) -> tuple[Journal, int | None]:
    from tuneplane.coordinator.execute import run_trials, settings_evidence, trial_configs
    from tuneplane.coordinator.runtime import harbor_version

    configs = trial_configs(plan, out)
    try:
        out.mkdir(parents=True)
    except FileExistsError:  # made by another process since it was checked
        raise ImportRefused([_exists(str(out))]) from None
    shutil.copyfile(plan.file, out / PLAN_COPY_FILE)
    version = harbor_version()
    records = [TrialRecord(t.trial_id, t.task, t.repeat, t.directory) for t in plan.trials]
    python = ".".join(str(part) for part in sys.version_info[:3])
    journal = Journal(out, plan.deadline_seconds, version, python, records)
    say(f"running {len(records)} trials with Harbor {version} into {out}")
    stopped_by = run_trials(plan, configs, journal, _progress(out, say))
    evidence = settings_evidence(configs, plan, version)
    write_json(out / IMPORT_PLAN_FILE, import_plan(plan, journal.started, evidence))
    return journal, stopped_by


def evaluate(options: EvalOptions, say: Say) -> Evaluated:
    """Run the plan's trials into ``options.out`` and write its snapshot there."""
    if options.out is None:
        say("--out: required: the new directory the execution writes")
        return Evaluated(EXIT_REFUSED)
    out = Path(options.out).absolute()
    try:
        plan, redactor = _checked(options)
        journal, stopped_by = _execute(plan, out, say)
    except ImportRefused as refused:
        _refused(refused, say)
        say("the plan was refused: nothing was started")
        return Evaluated(EXIT_REFUSED)
    say(f"metadata saved: {out / 'execution.json'}, {out / 'execution-errors.json'}")
    try:
        snapshot = import_harbor(
            str(out / IMPORT_PLAN_FILE),
            str(out),
            trace_limit=options.trace_limit,
            redactor=redactor,
        )
    except ImportRefused as refused:
        _refused(refused, say)
        say(f"no snapshot was written; the trial directories and metadata are in {out}")
        code = EXIT_INCOMPLETE if stopped_by is None else 128 + stopped_by
        return Evaluated(code, None, stopped_by)
    write_snapshot(snapshot, str(out / SNAPSHOT_FILE))
    for line in summary(snapshot):
        say(line)
    say(f"snapshot written to {out / SNAPSHOT_FILE}")
    code = _verdict(journal, snapshot, say)
    if stopped_by is not None:
        code = 128 + stopped_by
    return Evaluated(code, snapshot, stopped_by)
