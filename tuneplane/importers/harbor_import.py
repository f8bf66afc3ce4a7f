"""``tuneplane import harbor``: a plan and the trial directories beneath a root, read into
one snapshot (nothing is uploaded here).

Every input is read and checked before the snapshot exists: a problem anywhere refuses the
whole import with every problem named, so nothing is ever uploaded from a failed one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tuneplane.contract.declared import recorded
from tuneplane.contract.limits import OBSERVATION_STRING_MAX_CHARS
from tuneplane.importers.atif import read_conversation
from tuneplane.importers.harbor import Evidence, map_outcome, read_attempt
from tuneplane.importers.paths import Located, locate_attempts
from tuneplane.importers.plan import Plan, load_plan
from tuneplane.importers.problems import ImportRefused, Problem
from tuneplane.importers.snapshot import Snapshot, assemble, check_snapshot
from tuneplane.importers.text import TRACE_LIMIT_MAX, Redactor, RedactorFailed, kept_text

#: ``progress(done, total)`` after each attempt read.
Progress = Callable[[int, int], None]


def _outcome(located: Located) -> tuple[dict[str, Any], dict[str, Any], list[Problem]]:
    """One attempt's trial result and its evidence record."""
    trial, attempt = located.trial, located.attempt
    where = f"{trial.describe()}, retry {attempt.retry}"
    problems: list[Problem] = []
    if located.path is None:
        evidence = Evidence(False, notes=("the directory does not exist",))
    else:
        evidence, problems = read_attempt(located.path, trial.task, where)
    outcome = map_outcome(evidence)
    result = {
        "type": "trial",
        "trial_id": trial.trial_id,
        "trial_attempt": attempt.retry,
        "status": outcome.status,
        # The producer's training decision: imported evaluation evidence is never it.
        "eligible": False,
        "reward": outcome.reward,
        "error_type": outcome.error_type,
    }
    if outcome.status in ("unscored", "infra_error"):
        # Why it has no verdict travels with it, up to the server's trial answer.
        result["reason_code"] = outcome.code
        result["reason"] = outcome.reason[:OBSERVATION_STRING_MAX_CHARS]
    record = {
        "trial_id": trial.trial_id,
        "task": trial.task,
        "repeat": trial.repeat,
        "retry": attempt.retry,
        "directory": attempt.directory,
        "status": outcome.status,
        "reason": outcome.reason,
        "notes": list(evidence.notes),
        **evidence.facts,
    }
    return result, record, problems


def _text(
    located: Located, record: dict[str, Any], redactor: Redactor | None, keep: bool
) -> tuple[dict[str, Any] | None, list[Problem]]:
    """The attempt's trajectory document (without round_id), if it has an ATIF one and
    ``keep`` is true; its problems either way."""
    if located.path is None:
        return None, []
    conversation, problems = read_conversation(located.path)
    if conversation is None or not keep:
        return None, problems
    try:
        fields = kept_text(conversation.messages, redactor)
    except RedactorFailed as exc:
        file = str(located.path / conversation.files[0])
        return None, [Problem(file, "", f"{located.trial.describe()}: {exc}")]
    record["text"] = {
        "files": list(conversation.files),
        "schema_versions": list(conversation.schema_versions),
        "unknown_fields": list(conversation.unknown_fields),
        "subagent_refs_not_followed": conversation.subagent_refs,
        "messages_kept": len(fields["messages"]),
        "messages_total": fields["total_messages"],
    }
    document = {
        "scope": "evaluation",
        "trial_id": located.trial.trial_id,
        "trial_attempt": located.attempt.retry,
        **fields,
    }
    if conversation.metrics is not None:
        document["metrics"] = conversation.metrics
    return document, []


def _population(plan: Plan, text_samples: int) -> dict[str, Any]:
    population: dict[str, Any] = {
        "type": "population",
        "expected": len(plan.trials),
        "digests": plan.population_digests(),
        "text_samples": text_samples,
        **recorded(plan.protocol(), (t.trial_id for t in plan.trials), len(plan.trials)),
    }
    if plan.benchmark:
        population["task"] = dict(plan.benchmark)
    return population


def import_harbor(
    plan_path: str,
    root: str,
    *,
    trace_limit: int = 0,
    redactor: Redactor | None = None,
    progress: Progress | None = None,
) -> Snapshot:
    """The snapshot of a Harbor cohort, or :class:`ImportRefused` naming every problem.
    ``trace_limit`` trajectories at most keep their text (0, the default: none), taken in
    task / repeat / retry order."""
    if not 0 <= trace_limit <= TRACE_LIMIT_MAX:
        raise ImportRefused([Problem("--trace-limit", "", f"must be 0-{TRACE_LIMIT_MAX}")])
    plan = load_plan(plan_path)
    attempts = locate_attempts(plan, root)
    trials: list[dict[str, Any]] = []
    evidence: list[dict[str, Any]] = []
    trajectories: list[dict[str, Any]] = []
    problems: list[Problem] = []
    for done, located in enumerate(attempts, 1):
        result, record, found = _outcome(located)
        problems += found
        if trace_limit:
            # Every attempt's trajectory is read once text is asked for, also past the
            # limit: whether a broken one stops the import must not depend on where the
            # limit falls, and every problem is named in one pass.
            document, found = _text(located, record, redactor, len(trajectories) < trace_limit)
            problems += found
            if document is not None:
                trajectories.append(document)
        trials.append(result)
        evidence.append(record)
        if progress is not None:
            progress(done, len(attempts))
    if problems:
        raise ImportRefused(problems)
    snapshot = assemble(
        source="harbor",
        round_prefix=plan.round,
        population=_population(plan, len(trajectories)),
        checkpoint=plan.checkpoint,
        trials=trials,
        trajectories=trajectories,
        evidence=evidence,
        execution=plan.execution,
    )
    # What is written is exactly what the server takes: checked as the upload will be.
    return check_snapshot("snapshot", snapshot.document)
