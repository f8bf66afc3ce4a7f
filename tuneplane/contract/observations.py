"""Observation events: free events, distributions (histograms), health snapshots, and the
evaluation contract (population declarations and trial results).

Every observation has an ``event_id`` unique within its run: reusing it retries the same
immutable event, across execution attempts too. Wire format (``POST /api/v1/ingest/
observations``, at most 32 per request, each at most 16 KiB)::

    {"events": [
      {"event_id": "e1", "type": "event", "name": "rollout/done", "step": 7,
       "fields": {"tokens": 512, "env": "math"}},
      {"event_id": "e2", "type": "distribution", "name": "rollout/reward", "step": 7,
       "histogram": {"bounds": [0, 1, 2, 4, 8], "counts": [3, 5, 9, 2, 0, 1]}},
      {"event_id": "e3", "type": "health", "step": 7, "fields": {"gpu_mem_gb": 61.5}},
      {"event_id": "e4", "type": "population", "round_id": "val-7", "expected": 500,
       "digests": {"dataset": "<sha256>", "cohort": "…", "verifier": "…", "settings": "…"},
       "task": {"name": "gsm8k", "version": "1.0"}},
      {"event_id": "e5", "type": "trial", "round_id": "val-7", "trial_id": "q17-s0",
       "trial_attempt": 0, "status": "success", "eligible": false, "reward": 1.0}]}

A histogram's n bounds give n+1 buckets: (-inf, b0], (b0, b1], …, (bn-1, +inf).

Outcomes (population declarations and trial results) are immutable by their content key,
whatever their ``event_id``: a round is (run, execution attempt, round_id), the execution
attempt being the ingest token's, so a declaration's key is (execution attempt, round_id)
and a trial result's (execution attempt, round_id, trial_id, trial_attempt). An identical
re-send is a duplicate; a changed one is an :class:`OutcomeConflict` (409) that stores
nothing of its batch.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import orjson

from tuneplane.contract.declared import (
    content_mark,
    planned_problem,
    protocol_problem,
    redacted,
)
from tuneplane.contract.errors import Conflict, InvalidInput, Violation
from tuneplane.contract.ids import ID_RULE, id_problem, metric_name_problem
from tuneplane.contract.json_body import NotFinite, key_path, malformed
from tuneplane.contract.limits import (
    HISTOGRAM_MAX_BOUNDS,
    OBSERVATION_BATCH_MAX,
    OBSERVATION_MAX_BYTES,
    OBSERVATION_MAX_FIELDS,
    OBSERVATION_STRING_MAX_CHARS,
)
from tuneplane.contract.validation import (
    DEPTH_RULE,
    STEP_RULE,
    FieldCheck,
    finite_float,
    is_count,
    is_number,
    is_step,
    number_rule,
)

ObservationType = Literal["event", "distribution", "health", "population", "trial"]
#: The free event that records a round's checkpoint beside it (``round_id``,
#: ``checkpoint``, ``checkpoint_digest``): a population declaration has no place for it,
#: and it is no part of the protocol fingerprint.
CHECKPOINT_EVENT: Final = "evaluation/checkpoint"
#: The free event a run's summary is sent as (``run.summary``); the run's read merges them.
SUMMARY_EVENT: Final = "summary"
#: The free event a registered export is sent as (``register_export``): ``uri``,
#: ``format``, ``digest`` and ``digest_method`` at its step; ``GET …/exports`` lists them.
EXPORT_EVENT: Final = "export"
EXPORT_FORMATS: Final = ("hf", "safetensors", "gguf", "torch", "other")
OBSERVATION_TYPES: Final[tuple[ObservationType, ...]] = (
    "event",
    "distribution",
    "health",
    "population",
    "trial",
)
TrialStatus = Literal["success", "failure", "infra_error", "unscored"]
TRIAL_STATUSES: Final[tuple[TrialStatus, ...]] = ("success", "failure", "infra_error", "unscored")
DIGEST_NAMES: Final = ("dataset", "cohort", "verifier", "settings")
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class Population:
    round_id: str
    expected: int
    digests: dict[str, str]
    task_name: str | None
    task_version: str | None
    #: How many trials of the round keep their text (the job's
    #: ``TUNEPLANE_JOB_VAL_UPLOAD_SAMPLES``); None: the default rule
    #: (``contract.trajectories.evaluation_text_cap``).
    text_samples: int | None = None
    #: False when the producer gives no success or failure verdict, only rewards (a
    #: NeMo-RL validation log): the round's success rate and scoring coverage are then
    #: withheld (``no_verdicts``), never shown as 0%.
    verdicts: bool = True
    #: The settings the settings digest was taken over, redacted (contract/declared.py):
    #: what names the keys that differ when two rounds' settings digests do.
    protocol: dict[str, Any] | None = None
    #: Every planned trial ID, so those never reported are named, not only counted.
    planned_trials: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class TrialResult:
    round_id: str
    trial_id: str
    trial_attempt: int
    status: TrialStatus
    eligible: bool
    reward: float | None
    error_type: str | None
    #: Why the trial has this status, as a code (``reward_mismatch``) and a sentence: what
    #: an importer or job knew, kept so an unscored or errored trial says why to the end.
    reason_code: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Observation:
    event_id: str
    type: ObservationType
    name: str | None
    step: int | None
    body: dict[str, Any]
    population: Population | None = None
    trial: TrialResult | None = None


#: What an outcome's content is, by wire field: the values a re-send must repeat.
POPULATION_FIELDS: Final = (
    "expected",
    *(f"digests.{name}" for name in DIGEST_NAMES),
    "task.name",
    "task.version",
    "text_samples",
    "verdicts",
    "protocol",
    "planned_trials",
)
TRIAL_FIELDS: Final = ("status", "eligible", "reward", "error_type", "reason_code", "reason")


def outcome_content(observation: Observation) -> dict[str, object]:
    """An outcome event's content by wire field (:data:`POPULATION_FIELDS` or
    :data:`TRIAL_FIELDS`); empty for other events."""
    if observation.population is not None:
        p = observation.population
        return {
            "expected": p.expected,
            **{f"digests.{name}": p.digests.get(name) for name in DIGEST_NAMES},
            "task.name": p.task_name,
            "task.version": p.task_version,
            "text_samples": p.text_samples,
            "verdicts": p.verdicts,
            **declared_content(p.protocol, p.planned_trials),
        }
    if observation.trial is not None:
        t = observation.trial
        return {
            "status": t.status,
            "eligible": t.eligible,
            "reward": t.reward,
            "error_type": t.error_type,
            "reason_code": t.reason_code,
            "reason": t.reason,
        }
    return {}


def declared_content(
    protocol: dict[str, Any] | None, planned: Sequence[str] | None
) -> dict[str, str | None]:
    """The recorded parts of a declaration as its content compares them."""
    return {
        "protocol": content_mark(protocol),
        "planned_trials": content_mark(None if planned is None else list(planned)),
    }


#: ("population", attempt, round) or ("trial", attempt, round, trial, trial attempt).
OutcomeKey = tuple[Any, ...]


def outcome_key(observation: Observation, execution_attempt: int) -> OutcomeKey | None:
    if observation.population is not None:
        return ("population", execution_attempt, observation.population.round_id)
    if observation.trial is not None:
        t = observation.trial
        return ("trial", execution_attempt, t.round_id, t.trial_id, t.trial_attempt)
    return None


def describe_key(key: OutcomeKey) -> dict[str, object]:
    """The key as the answers spell it."""
    named: dict[str, object] = {"execution_attempt": key[1], "round_id": key[2]}
    if key[0] == "trial":
        named |= {"trial_id": key[3], "trial_attempt": key[4]}
    return named


def differing_fields(stored: dict[str, object], sent: dict[str, object]) -> list[str]:
    return [name for name, value in sent.items() if stored.get(name) != value]


@dataclass(frozen=True, slots=True)
class OutcomeClash:
    """One refused outcome event: its place in the batch, its key, the fields that differ
    (``event_id`` when the ID already names another stored event)."""

    index: int
    event_id: str
    key: OutcomeKey
    fields: tuple[str, ...]
    stored: dict[str, object]
    sent: dict[str, object]


def _clash_rule(clash: OutcomeClash, name: str) -> str:
    if name == "event_id":
        return (
            f"already names {clash.stored['event_id']}; a different outcome needs an event_id "
            "of its own (a restarted execution too)"
        )
    return (
        f"differs from the stored outcome: stored {clash.stored.get(name)!r}, sent "
        f"{clash.sent.get(name)!r}"
    )


class OutcomeConflict(Conflict):
    """A changed re-send of an immutable outcome: the whole batch is refused (a batch is one
    transaction) and nothing of it is stored, not even its other events."""

    code = "outcome_conflict"

    def __init__(self, clashes: list[OutcomeClash]) -> None:
        first = clashes[0]
        what = "population declaration" if first.key[0] == "population" else "trial result"
        named = ", ".join(f"{k} {v}" for k, v in describe_key(first.key).items())
        more = f" (and {len(clashes) - 1} more)" if len(clashes) > 1 else ""
        if first.fields == ("event_id",):
            clash = f"comes under an event_id that {_clash_rule(first, 'event_id')[8:]}"
        else:
            clash = f"was already stored with different {', '.join(first.fields)}"
        super().__init__(
            f"events[{first.index}]: the {what} ({named}) {clash}{more}; nothing of this "
            "batch was stored (an outcome is immutable: use a new trial_attempt or round_id "
            "for a different outcome)",
            tuple(
                Violation(f"events[{c.index}].{name}", _clash_rule(c, name))
                for c in clashes
                for name in c.fields
            ),
        )
        self.clashes = clashes

    def to_json(self) -> dict[str, object]:
        body = super().to_json()
        error = body["error"]
        assert isinstance(error, dict)
        error["conflicts"] = [
            {
                "index": c.index,
                "event_id": c.event_id,
                "type": c.key[0],
                "key": describe_key(c.key),
                "fields": list(c.fields),
            }
            for c in self.clashes
        ]
        return body


class _Check(FieldCheck):
    def text(self, item: dict[str, Any], key: str, *, required: bool) -> str | None:
        value = item.get(key)
        if value is None:
            if required:
                self.add(key, "required")
            return None
        if not isinstance(value, str) or not 1 <= len(value) <= OBSERVATION_STRING_MAX_CHARS:
            self.add(key, f"must be a string of 1-{OBSERVATION_STRING_MAX_CHARS} characters")
            return None
        return value


def _fields(check: _Check, item: dict[str, Any], *, required: bool) -> dict[str, Any]:
    fields = item.get("fields")
    if fields is None:
        if required:
            check.add("fields", "required")
        return {}
    if not isinstance(fields, dict) or len(fields) > OBSERVATION_MAX_FIELDS:
        check.add("fields", f"must be an object of at most {OBSERVATION_MAX_FIELDS} fields")
        return {}
    for key, value in fields.items():
        field = key_path("fields", key)
        if metric_name_problem(key):
            check.add(field, "field names are 1-128 printable characters")
        elif isinstance(value, str):
            if len(value) > OBSERVATION_STRING_MAX_CHARS:
                check.add(field, f"strings are at most {OBSERVATION_STRING_MAX_CHARS} chars")
        elif isinstance(value, bool):
            continue
        elif isinstance(value, NotFinite) or is_number(value):
            if finite_float(value) is None:
                check.add(field, number_rule(value))
        else:
            check.add(field, "must be a finite number, a boolean or a string")
    return fields


def bounds_problem(bounds: object) -> str | None:
    """Why ``bounds`` cannot be a histogram's bucket bounds, or None when it can."""
    if (
        not isinstance(bounds, list)
        or not 1 <= len(bounds) <= HISTOGRAM_MAX_BOUNDS
        or any(finite_float(b) is None for b in bounds)
    ):
        return f"must be 1-{HISTOGRAM_MAX_BOUNDS} finite numbers"
    if any(a >= b for a, b in itertools.pairwise(bounds)):
        return "must be strictly increasing"
    return None


def _histogram(check: _Check, item: dict[str, Any]) -> dict[str, list[Any]]:
    histogram = item.get("histogram")
    if not isinstance(histogram, dict):
        check.add("histogram", "required: {bounds, counts}")
        return {}
    bounds, counts = histogram.get("bounds"), histogram.get("counts")
    problem = bounds_problem(bounds)
    if problem is not None:
        check.add("histogram.bounds", problem)
        return {}
    assert isinstance(bounds, list)
    if (
        not isinstance(counts, list)
        or len(counts) != len(bounds) + 1
        or not all(is_count(c) for c in counts)
    ):
        check.add(
            "histogram.counts",
            "must be one nonnegative integer per bucket: len(bounds) + 1 "
            "(a distribution is counted, never estimated from a mean)",
        )
        return {}
    return {"bounds": bounds, "counts": counts}


def _population(check: _Check, item: dict[str, Any]) -> Population | None:
    round_id = check.ident(item, "round_id")
    expected = item.get("expected")
    if not is_count(expected):
        check.add("expected", "must be the nonnegative number of trials in the population")
    digests: dict[str, str] = {}
    raw = item.get("digests") or {}
    if not isinstance(raw, dict):
        check.add("digests", "must be an object")
        raw = {}
    for name, value in raw.items():
        if name not in DIGEST_NAMES:
            check.add(f"digests.{name}", f"unknown digest (known: {', '.join(DIGEST_NAMES)})")
        elif not isinstance(value, str) or _SHA256.fullmatch(value) is None:
            check.add(f"digests.{name}", "must be a lowercase hex SHA-256")
        else:
            digests[name] = value
    task = item.get("task") or {}
    if not isinstance(task, dict):
        check.add("task", "must be an object with name and version")
        task = {}
    task_name = _Check.text(check, task, "name", required=False) if task else None
    task_version = _Check.text(check, task, "version", required=False) if task else None
    text_samples = item.get("text_samples")
    if text_samples is not None and not is_count(text_samples):
        check.add("text_samples", "must be the nonnegative number of trials that keep their text")
    verdicts = item.get("verdicts", True)
    if not isinstance(verdicts, bool):
        check.add(
            "verdicts",
            "must be true or false (false: the producer gives rewards, no success or "
            "failure verdict)",
        )
    protocol, planned = _declared(check, item, expected)
    if round_id is None or not isinstance(expected, int) or not is_count(expected):
        return None
    return Population(
        round_id,
        expected,
        digests,
        task_name,
        task_version,
        text_samples,
        verdicts is not False,
        protocol,
        planned,
    )


def _declared(
    check: _Check, item: dict[str, Any], expected: object
) -> tuple[dict[str, Any] | None, tuple[str, ...] | None]:
    """The declaration's recorded protocol settings (redacted here too, whatever the
    producer did) and planned trial IDs, each optional."""
    protocol, planned = item.get("protocol"), item.get("planned_trials")
    if protocol is not None and (problem := protocol_problem(protocol)):
        check.add("protocol", problem)
        protocol = None
    if planned is not None and (problem := planned_problem(planned, expected)):
        check.add("planned_trials", problem)
        planned = None
    return (
        None if protocol is None else redacted(protocol),
        None if planned is None else tuple(sorted(planned)),
    )


def _trial(check: _Check, item: dict[str, Any]) -> TrialResult | None:
    round_id = check.ident(item, "round_id")
    trial_id = check.ident(item, "trial_id")
    attempt = item.get("trial_attempt")
    if not is_count(attempt):
        check.add("trial_attempt", "must be a nonnegative integer")
    status = item.get("status")
    if status not in TRIAL_STATUSES:
        check.add("status", f"must be one of {', '.join(TRIAL_STATUSES)}")
    eligible = item.get("eligible")
    if not isinstance(eligible, bool):
        check.add("eligible", "must be true or false (the producer's training decision)")
    elif eligible and status in ("infra_error", "unscored"):
        check.add("eligible", f"a {status} trial cannot be eligible for training")
    reward = item.get("reward")
    if reward is not None and finite_float(reward) is None:
        check.add("reward", "must be a finite number or null")
    error_type = check.text(item, "error_type", required=False)
    reason_code = item.get("reason_code")
    if reason_code is not None and id_problem(reason_code):
        check.add("reason_code", f"{ID_RULE}, or null")
    reason = check.text(item, "reason", required=False)
    if check.violations:
        return None
    return TrialResult(
        round_id,  # type: ignore[arg-type]
        trial_id,  # type: ignore[arg-type]
        attempt,  # type: ignore[arg-type]
        status,  # type: ignore[arg-type]
        eligible,  # type: ignore[arg-type]
        None if reward is None else float(reward),
        error_type,
        reason_code,
        reason,
    )


def parse_observation(path: str, item: object) -> tuple[Observation | None, list[Violation]]:
    if not isinstance(item, dict):
        return None, [Violation(path, "must be an object")]
    check = _Check(path)
    try:
        # NaN/Infinity markers count as the null they will never be stored as.
        size = len(orjson.dumps(item, default=lambda _marker: None))
    except TypeError:  # nested deeper than orjson writes: far past the stored JSON's limit
        check.add("", DEPTH_RULE)
        return None, check.violations
    if size > OBSERVATION_MAX_BYTES:
        check.add("", f"an observation is at most {OBSERVATION_MAX_BYTES // 1024} KiB")
        return None, check.violations
    event_id = check.ident(item, "event_id")
    kind = item.get("type")
    if kind not in OBSERVATION_TYPES:
        check.add("type", f"must be one of {', '.join(OBSERVATION_TYPES)}")
        return None, check.violations
    step = item.get("step")
    if step is not None and not is_step(step):
        check.add("step", f"{STEP_RULE}, or null")
    name = None
    if kind in ("event", "distribution"):
        name = check.text(item, "name", required=True)
        if name is not None and metric_name_problem(name):
            check.add("name", "must be 1-128 printable characters")
    body: dict[str, Any] = {}
    population = trial = None
    if kind in ("event", "health"):
        body["fields"] = _fields(check, item, required=kind == "health")
    elif kind == "distribution":
        body["histogram"] = _histogram(check, item)
        body["fields"] = _fields(check, item, required=False)
    elif kind == "population":
        population = _population(check, item)
    else:
        trial = _trial(check, item)
    if check.violations or event_id is None:
        return None, check.violations
    if population is not None:
        body = {
            "round_id": population.round_id,
            "expected": population.expected,
            "digests": population.digests,
            "task": {"name": population.task_name, "version": population.task_version},
            "text_samples": population.text_samples,
            "verdicts": population.verdicts,
        }
        if population.protocol is not None:
            body["protocol"] = population.protocol
        if population.planned_trials is not None:
            body["planned_trials"] = list(population.planned_trials)
    if trial is not None:
        body = {
            "round_id": trial.round_id,
            "trial_id": trial.trial_id,
            "trial_attempt": trial.trial_attempt,
            "status": trial.status,
            "eligible": trial.eligible,
            "reward": trial.reward,
            "error_type": trial.error_type,
            "reason_code": trial.reason_code,
            "reason": trial.reason,
        }
    return Observation(event_id, kind, name, step, body, population, trial), []


def parse_observations(body: object) -> list[Observation]:
    if not isinstance(body, dict):
        raise malformed("must be a JSON object with an 'events' list")
    events = body.get("events")
    if not isinstance(events, list) or not 1 <= len(events) <= OBSERVATION_BATCH_MAX:
        raise InvalidInput((Violation("events", f"must be a list of 1-{OBSERVATION_BATCH_MAX}"),))
    parsed: list[Observation] = []
    violations: list[Violation] = []
    for index, item in enumerate(events):
        observation, problems = parse_observation(f"events[{index}]", item)
        violations += problems
        if observation is not None:
            parsed.append(observation)
    if violations:
        raise InvalidInput(tuple(violations[:20]))
    return parsed
