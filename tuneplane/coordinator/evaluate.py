"""``tuneplane eval run``: check the plan, run its trials, write the same snapshot the
importer writes (docs/import.md, "The fixed-checkpoint evaluation coordinator").

Order of work: the plan and every trial's Harbor ``TrialConfig`` are checked before the
output directory is made (it must be new); then the trials run one at a time; then the
metadata is saved (``execution.json``, ``execution-errors.json``, ``import-plan.json``)
before the optional text is converted and the snapshot written by the importer itself from
the trial directories Harbor wrote, so an import of the same directories gives the same
snapshot. Delivery, when asked for, is the CLI's (after all of this).

``--resume`` continues an execution in its existing directory, with the plan it started
with and the same Harbor: the trials it completed are not run again, a trial a signal or
a dead process cut short runs again as its next retry (the cut-short run stays in the
evidence), and the snapshot names the same execution, so it is the same round.

Exit status: 0 when every planned trial has an outcome, whatever it is (a model's failures,
an agent's timeout or crash, a verifier error: each is its trial's outcome); 1 when a
planned trial has none (a trial was cut short, or no snapshot could be made); 2 for a plan
or flags that break a rule (nothing started); 128 + the signal's number after SIGTERM or
SIGINT.
"""

from __future__ import annotations

import fcntl
import shutil
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tuneplane.coordinator.journal import (
    EXECUTION_FILE,
    IMPORT_PLAN_FILE,
    PLAN_COPY_FILE,
    SNAPSHOT_FILE,
    Journal,
    JournalUnreadable,
    TrialRecord,
    trial_directory,
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
EXIT_INCOMPLETE: Final = 1
EXIT_REFUSED: Final = 2
#: Held by the process running an execution, so two never run in one directory at once.
LOCK_FILE: Final = ".execution.lock"


@dataclass(frozen=True, slots=True)
class EvalOptions:
    plan: str
    out: str | None
    trace_limit: int = 0
    redactor: str | None = None
    #: Continue the execution in ``out`` instead of starting one in a new directory.
    resume: bool = False


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
        "already exists: an execution writes a new directory; name another one, or add "
        "--resume to continue the execution in it",
    )


def _out_problems(options: EvalOptions, out: str) -> list[Problem]:
    """A new execution's directory must not exist; a resumed one's must hold an
    execution started with this very plan (task paths are relative to the plan file, so
    the plan is named again rather than read from the copy)."""
    if not options.resume:
        return [_exists(out)] if Path(out).exists() else []
    if not (Path(out) / EXECUTION_FILE).is_file():
        return [
            Problem(
                out,
                "",
                f"--resume: holds no {EXECUTION_FILE}, so no execution to continue "
                "(without --resume an execution writes a new directory)",
            )
        ]
    try:
        same = (Path(out) / PLAN_COPY_FILE).read_bytes() == Path(options.plan).read_bytes()
    except OSError as exc:
        return [Problem(out, "", f"--resume: the plan cannot be compared: {exc}")]
    if not same:
        return [
            Problem(
                options.plan,
                "",
                f"--resume: differs from {Path(out) / PLAN_COPY_FILE}, the plan the execution "
                "started with: resume with that plan, or run this one into a new directory",
            )
        ]
    return []


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
    if options.out is not None and plan is not None:
        problems += _out_problems(options, options.out)
    elif options.out is not None and not options.resume and Path(options.out).exists():
        problems.append(_exists(options.out))
    if problems or plan is None:
        raise ImportRefused(problems)
    return plan, redactor


def refused(options: EvalOptions, say: Say) -> bool:
    """Whether the plan, the flags or the output directory break a rule (each problem
    said): checked before Harbor is looked for, so a bad plan needs no Harbor."""
    if options.out is None:
        say("--out: required: the new directory the execution writes (or, with --resume, wrote)")
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
    counts: dict[str, int] = {}
    for status in current.values():
        counts[status] = counts.get(status, 0) + 1
    outcomes = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    unfinished = journal.unfinished()
    if journal.state == "complete" and len(current) == journal.planned:
        planned = journal.planned
        say(f"evaluation complete: all {planned} planned trials have an outcome ({outcomes})")
        return 0
    not_run = journal.planned - len(journal.started)
    cut = len(unfinished) - not_run
    why = [f"{cut} trials cut short"] if cut else []
    if not_run:
        why.append(f"{not_run} of {journal.planned} planned trials not run")
    say(
        f"evaluation incomplete: {'; '.join(why) or 'trials without an outcome'}; "
        "`tuneplane eval run --resume` with the same plan and --out continues it"
    )
    return EXIT_INCOMPLETE


@contextmanager
def _locked(out: Path) -> Iterator[None]:
    """The execution's directory, held by this process until it is done with it."""
    with open(out / LOCK_FILE, "a") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            problem = Problem(str(out), "", "another process is running this execution")
            raise ImportRefused([problem]) from None
        yield


def _new_journal(plan: EvalPlan, out: Path, version: str) -> Journal:
    try:
        out.mkdir(parents=True)
    except FileExistsError:  # made by another process since it was checked
        raise ImportRefused([_exists(str(out))]) from None
    shutil.copyfile(plan.file, out / PLAN_COPY_FILE)
    records = [
        TrialRecord(t.trial_id, t.task, t.repeat, 0, trial_directory(t.trial_id, 0))
        for t in plan.trials
    ]
    python = ".".join(str(part) for part in sys.version_info[:3])
    return Journal(out, plan.deadline_seconds, version, python, uuid.uuid4().hex, records)


def _resumed_journal(plan: EvalPlan, out: Path, version: str) -> Journal:
    """The journal of the execution in ``out``, if this plan and Harbor may continue it."""
    where = str(out / EXECUTION_FILE)
    try:
        journal = Journal.load(out)
    except JournalUnreadable as exc:
        raise ImportRefused([Problem(where, "", f"--resume: {exc}")]) from None
    if journal.harbor_version != version:
        rule = (
            f"--resume: the execution ran with Harbor {journal.harbor_version} and this is "
            f"Harbor {version}: its settings evidence would change; resume it with Harbor "
            f"{journal.harbor_version}"
        )
        raise ImportRefused([Problem(where, "harbor_version", rule)])
    if list(journal.current()) != [t.trial_id for t in plan.trials]:
        rule = "--resume: its trials are not the plan's"
        raise ImportRefused([Problem(where, "trials", rule)])
    journal.resumes += 1
    return journal


def _execute(
    plan: EvalPlan, out: Path, say: Say, resume: bool, held: ExitStack
) -> tuple[Journal, int | None]:
    """Run the trials; the directory stays locked by ``held`` until it is closed."""
    from tuneplane.coordinator.execute import run_trials, settings_evidence, trial_configs
    from tuneplane.coordinator.runtime import harbor_version

    configs = trial_configs(plan, out)
    version = harbor_version()
    if resume:
        held.enter_context(_locked(out))
        journal = _resumed_journal(plan, out, version)
        left = len(journal.unfinished())
        say(f"resuming: {left} of {journal.planned} trials to run with Harbor {version} in {out}")
    else:
        journal = _new_journal(plan, out, version)
        held.enter_context(_locked(out))
        say(f"running {journal.planned} trials with Harbor {version} into {out}")
    stopped_by = run_trials(plan, configs, journal, _progress(out, say))
    evidence = settings_evidence(configs, plan, version)
    runs: dict[str, list[tuple[int, str]]] = {}
    for record in journal.trials:
        if record.execution != "not_started":
            runs.setdefault(record.trial_id, []).append((record.retry, record.directory))
    document = import_plan(plan, runs, evidence, journal.execution_id)
    write_json(out / IMPORT_PLAN_FILE, document)
    return journal, stopped_by


def evaluate(options: EvalOptions, say: Say) -> Evaluated:
    """Run the plan's trials into ``options.out`` and write its snapshot there."""
    if options.out is None:
        say("--out: required: the new directory the execution writes")
        return Evaluated(EXIT_REFUSED)
    out = Path(options.out).absolute()
    with ExitStack() as held:
        try:
            plan, redactor = _checked(options)
            journal, stopped_by = _execute(plan, out, say, options.resume, held)
        except ImportRefused as refused:
            _refused(refused, say)
            say("the plan was refused: nothing was started")
            return Evaluated(EXIT_REFUSED)
        return _snapshot(options, out, journal, stopped_by, redactor, say)


def _snapshot(
    options: EvalOptions,
    out: Path,
    journal: Journal,
    stopped_by: int | None,
    redactor: Redactor | None,
    say: Say,
) -> Evaluated:
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
