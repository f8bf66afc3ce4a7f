"""The import snapshot: everything an import would upload, written to a file first.

A snapshot is JSON::

    {"format": "tuneplane-import-snapshot", "version": 1, "source": "harbor",
     "content_hash": "<sha256>", "round_id": "tbench-val-<16 hex digits of the hash>",
     "round": "tbench-val",
     "population": {"type": "population", "round_id": …, "expected": 3, "digests": {…},
                    "task": {…}, "text_samples": 1},
     "checkpoint": {"name": …, "digest": …},
     "trials": [{"type": "trial", "round_id": …, "trial_id": …, "trial_attempt": 1, …}],
     "trajectories": [{"scope": "evaluation", "round_id": …, "messages": […], …}],
     "evidence": [{"trial_id": …, "retry": 1, "directory": …, "reason": …, …}],
     "events": [{"type": "event", "name": "lm-eval/sample", "fields": {…}}]}

``events`` (free events with the round's evidence beside its outcomes, each naming its
``round_id`` in its fields) is optional: a source without any leaves it out.

The content hash covers everything but itself and the round ID (which is made from it):
importing the same inputs again gives the same round, whose outcomes the server already
has (duplicates that add nothing); changed inputs give a new round. Reading a snapshot
checks the hash, so a file edited by hand is refused rather than uploaded.

A snapshot of one execution of ``tuneplane eval run`` carries its ``execution`` ID, and its
round ID is made from the round's prefix and that ID instead (:func:`round_id_of`): the
snapshot saved when the execution was interrupted and the one written after ``--resume``
are one round, the later one adding the trials the earlier one lacked.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any, Final

from tuneplane.contract.declared import canonical_digest
from tuneplane.contract.ids import ID_RULE, id_characters, id_problem
from tuneplane.contract.limits import IMPORT_SNAPSHOT_MAX_BYTES
from tuneplane.contract.observations import CHECKPOINT_EVENT, parse_observation
from tuneplane.contract.trajectories import parse_trajectory
from tuneplane.importers.bounded import read_bounded
from tuneplane.importers.plan import ROUND_HASH_CHARS, ROUND_PREFIX_MAX_CHARS
from tuneplane.importers.problems import ImportRefused, Problem

SNAPSHOT_FORMAT: Final = "tuneplane-import-snapshot"
SNAPSHOT_VERSION: Final = 1
ROLLOUT_FORMAT: Final = "tuneplane-rollout-snapshot"
_BODY: Final = ("source", "round", "population", "checkpoint", "trials", "trajectories", "evidence")
#: Parts a snapshot may leave out (covered by the content hash when present).
_OPTIONAL: Final = ("events", "execution")


def round_prefix(name: str, fallback: str) -> str:
    """A round ID's prefix from a task's name: its characters outside IDs become ``-``."""
    return id_characters(name)[:ROUND_PREFIX_MAX_CHARS] or fallback


def round_id_of(round_prefix: str, content_hash: str, execution: object = None) -> str:
    """The round ID: the prefix and the content hash, or the execution's ID when the
    snapshot names one (so an execution's snapshots are one round, however many trials
    each holds)."""
    basis = content_hash
    if execution is not None:
        basis = canonical_digest({"round": round_prefix, "execution": execution})
    return f"{round_prefix}-{basis[:ROUND_HASH_CHARS]}"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A snapshot file's document: an evaluation round's, or a training step's rollouts
    (:mod:`tuneplane.importers.rollout_snapshot`), told apart by :attr:`is_rollouts`."""

    document: dict[str, Any]

    @property
    def is_rollouts(self) -> bool:
        return self.document.get("format") == ROLLOUT_FORMAT

    @property
    def step(self) -> int:
        """A rollout snapshot's training step."""
        return int(self.document["step"])

    @property
    def round_id(self) -> str:
        return str(self.document["round_id"])

    @property
    def content_hash(self) -> str:
        return str(self.document["content_hash"])

    @property
    def trials(self) -> list[dict[str, Any]]:
        return list(self.document["trials"])

    @property
    def trajectories(self) -> list[dict[str, Any]]:
        return list(self.document["trajectories"])

    @property
    def events(self) -> list[dict[str, Any]]:
        return list(self.document.get("events", ()))

    def observation_events(self, execution_attempt: int | None) -> list[dict[str, Any]]:
        """The declaration, the checkpoint event, the other events and the trial results,
        with event IDs made from their identity and the execution attempt: a replay of the
        same snapshot in the same execution repeats them exactly (duplicates); a restarted
        execution's events need IDs of their own."""
        population = dict(self.document["population"])
        checkpoint = {
            "type": "event",
            "name": CHECKPOINT_EVENT,
            "fields": {"round_id": self.round_id, **self._checkpoint_fields()},
        }
        events = [population, checkpoint, *self.events, *self.trials]
        return [{**event, "event_id": _event_id(event, execution_attempt)} for event in events]

    def _checkpoint_fields(self) -> dict[str, str]:
        checkpoint = self.document["checkpoint"]
        fields = {"checkpoint": checkpoint["name"]}
        if checkpoint.get("digest"):
            fields["checkpoint_digest"] = checkpoint["digest"]
        return fields


def _event_id(event: dict[str, Any], execution_attempt: int | None) -> str:
    fields = event.get("fields") or {}
    identity = json.dumps(
        [
            event["type"],
            event.get("name"),
            event.get("round_id") or fields["round_id"],
            event.get("trial_id") or fields.get("trial_id"),
            event.get("trial_attempt"),
        ]
    )
    prefix = f"a{execution_attempt}-" if execution_attempt is not None else ""
    return f"{prefix}import-{hashlib.sha256(identity.encode()).hexdigest()[:32]}"


def _with_round(items: list[dict[str, Any]], round_id: str) -> list[dict[str, Any]]:
    return [{**item, "round_id": round_id} for item in items]


def assemble(
    *,
    source: str,
    round_prefix: str,
    population: dict[str, Any],
    checkpoint: dict[str, str],
    trials: list[dict[str, Any]],
    trajectories: list[dict[str, Any]],
    evidence: list[dict[str, Any]],
    events: list[dict[str, Any]] | None = None,
    execution: str | None = None,
) -> Snapshot:
    """The snapshot of these parts (each without ``round_id``: it comes from the hash, or
    from ``execution`` when given; ``events`` carry it in their fields, added here)."""
    body: dict[str, Any] = {
        "source": source,
        "round": round_prefix,
        "population": population,
        "checkpoint": checkpoint,
        "trials": trials,
        "trajectories": trajectories,
        "evidence": evidence,
    }
    if events is not None:
        body["events"] = events
    if execution is not None:
        body["execution"] = execution
    content_hash = canonical_digest(body)
    round_id = round_id_of(round_prefix, content_hash, execution)
    document = {
        "format": SNAPSHOT_FORMAT,
        "version": SNAPSHOT_VERSION,
        "content_hash": content_hash,
        "round_id": round_id,
        **body,
        "population": {**population, "round_id": round_id},
        "trials": _with_round(trials, round_id),
        "trajectories": _with_round(trajectories, round_id),
    }
    if events is not None:
        document["events"] = [
            {**event, "fields": {**event.get("fields", {}), "round_id": round_id}}
            for event in events
        ]
    return Snapshot(document)


def out_problems(path: str) -> list[Problem]:
    """Why a snapshot cannot be written to the file ``path`` (none when it can be tried):
    checked before the import, so it is said with the inputs' problems and with status 2,
    never as a failed write after the whole cohort was read."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        return [Problem(path, "", "is a directory: --out names the snapshot file to write")]
    if not os.path.exists(directory):
        return [Problem(path, "", f"its directory {directory} does not exist: make it first")]
    if not os.path.isdir(directory):
        return [Problem(path, "", f"{directory} is not a directory")]
    return []


def write_snapshot(snapshot: Snapshot, path: str) -> None:
    """Written whole (a temporary file, then a rename): a failed write leaves no half
    snapshot for ``tuneplane import upload`` to find, and no temporary file either."""
    temporary = f"{path}.tmp-{os.getpid()}"
    try:
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(snapshot.document, handle, ensure_ascii=False, indent=1, sort_keys=True)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        # Also on KeyboardInterrupt: the temporary file is ours alone (its name holds our
        # process ID), so nothing else would ever remove it.
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise


def write_snapshot_files(named: dict[str, Snapshot], out: str) -> list[str]:
    """Each snapshot as ``OUT/<its file name>`` (``OUT`` is made if needed), the paths
    written. A directory holding other ``.json`` files is refused before anything is
    written: ``tuneplane import upload OUT`` would send them too."""
    problems: list[Problem] = []
    if os.path.exists(out) and not os.path.isdir(out):
        problems.append(Problem(out, "", "must be a directory (one snapshot per round)"))
    elif os.path.isdir(out):
        others = sorted(n for n in os.listdir(out) if n.endswith(".json") and n not in named)
        if others:
            problems.append(
                Problem(
                    out, "", f"holds other snapshots ({', '.join(others[:3])}): use a new directory"
                )
            )
    if problems:
        raise ImportRefused(problems)
    os.makedirs(out, exist_ok=True)
    written = []
    for name, snapshot in named.items():
        path = os.path.join(out, name)
        write_snapshot(snapshot, path)
        written.append(path)
    return written


def _problems(file: str, document: dict[str, Any]) -> list[Problem]:
    """Whether every event and trajectory is one the server takes."""
    problems: list[Problem] = []
    for index, event in enumerate([document["population"], *document["trials"]]):
        where = "population" if index == 0 else f"trials[{index - 1}]"
        _, violations = parse_observation(where, {**event, "event_id": "check"})
        problems += [Problem(file, v.field, v.rule) for v in violations]
    for index, trajectory in enumerate(document["trajectories"]):
        _, violations = parse_trajectory(f"trajectories[{index}]", trajectory)
        problems += [Problem(file, v.field, v.rule) for v in violations]
    for index, event in enumerate(document.get("events", ())):
        _, violations = parse_observation(f"events[{index}]", {**event, "event_id": "check"})
        problems += [Problem(file, v.field, v.rule) for v in violations]
        if event.get("type") != "event":
            problems.append(Problem(file, f"events[{index}].type", "must be 'event'"))
    return problems


def check_snapshot(file: str, document: object) -> Snapshot:
    """``document`` as a snapshot, or :class:`ImportRefused` naming what is wrong."""
    if not isinstance(document, dict) or document.get("format") != SNAPSHOT_FORMAT:
        raise ImportRefused([Problem(file, "format", f"must be {SNAPSHOT_FORMAT!r}")])
    if document.get("version") != SNAPSHOT_VERSION:
        raise ImportRefused([Problem(file, "version", f"must be {SNAPSHOT_VERSION}")])
    missing = [key for key in _BODY if key not in document]
    if missing:
        raise ImportRefused([Problem(file, key, "required") for key in missing])
    lists = ("trials", "trajectories", "evidence", *(k for k in ("events",) if k in document))
    shaped = isinstance(document["population"], dict) and all(
        isinstance(document[key], list) and all(isinstance(item, dict) for item in document[key])
        for key in lists
    )
    shaped = shaped and all(
        isinstance(event.get("fields"), dict) for event in document.get("events", ())
    )
    if not shaped:
        raise ImportRefused(
            [Problem(file, "", "is not a snapshot: its parts have the wrong shape")]
        )
    body = {key: document[key] for key in (*_BODY, *_OPTIONAL) if key in document}
    for key in ("population",):
        body[key] = {k: v for k, v in body[key].items() if k != "round_id"}
    for key in ("trials", "trajectories"):
        body[key] = [{k: v for k, v in item.items() if k != "round_id"} for item in body[key]]
    if "events" in body:
        body["events"] = [
            {**e, "fields": {k: v for k, v in e["fields"].items() if k != "round_id"}}
            for e in body["events"]
        ]
    execution = document.get("execution")
    if execution is not None and id_problem(execution):
        raise ImportRefused([Problem(file, "execution", f"an execution's ID: {ID_RULE}")])
    content_hash = canonical_digest(body)
    if document.get("content_hash") != content_hash:
        raise ImportRefused(
            [Problem(file, "content_hash", "does not match the content: the file was changed")]
        )
    round_id = round_id_of(document["round"], content_hash, execution)
    carried = {document.get("round_id"), document["population"].get("round_id")}
    carried |= {item.get("round_id") for item in document["trials"] + document["trajectories"]}
    carried |= {event["fields"].get("round_id") for event in document.get("events", ())}
    if carried != {round_id}:
        raise ImportRefused([Problem(file, "round_id", f"must be {round_id!r} throughout")])
    problems = _problems(file, document)
    if problems:
        raise ImportRefused(problems)
    return Snapshot(document)


def read_document(path: str) -> object:
    """A snapshot file's JSON, either kind, not yet checked."""
    try:
        return json.loads(read_bounded(path, IMPORT_SNAPSHOT_MAX_BYTES, "a snapshot"))
    except OSError as exc:
        raise ImportRefused([Problem(path, "", f"cannot be read: {exc.strerror}")]) from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ImportRefused([Problem(path, "", f"is not JSON: {exc}")]) from exc


def read_snapshot(path: str) -> Snapshot:
    return check_snapshot(path, read_document(path))


def snapshot_files(paths: list[str]) -> tuple[list[str], list[Problem]]:
    """The files the paths name (a directory stands for its ``*.json`` files, in name
    order), and the problem of each directory that holds none."""
    files: list[str] = []
    problems: list[Problem] = []
    for path in paths:
        if os.path.isdir(path):
            found = sorted(name for name in os.listdir(path) if name.endswith(".json"))
            if not found:
                problems.append(Problem(path, "", "is a directory without snapshot files"))
            files += [os.path.join(path, name) for name in found]
        else:
            files.append(path)
    return files, problems


def read_snapshots(paths: list[str]) -> list[Snapshot]:
    """Every snapshot the paths name (:func:`snapshot_files`), each read and checked;
    :class:`ImportRefused` naming every problem of all."""
    files, problems = snapshot_files(paths)
    snapshots: list[Snapshot] = []
    for file in files:
        try:
            snapshots.append(read_snapshot(file))
        except ImportRefused as refused:
            problems += refused.problems
    if problems:
        raise ImportRefused(problems)
    return snapshots


def summary(snapshot: Snapshot) -> list[str]:
    """What a snapshot holds, for people: a line for the round, one per status; for a
    training step, one line of what it held and what was kept."""
    document = snapshot.document
    if snapshot.is_rollouts:
        held = ", ".join(f"{n} {name}" for name, n in document["categories"].items() if n)
        return [
            f"step {snapshot.step}: {document['lines']} rollouts ({held or 'none'}), "
            f"{len(document['trajectories'])} kept"
        ]
    counts: dict[str, int] = {}
    for trial in document["trials"]:
        counts[trial["status"]] = counts.get(trial["status"], 0) + 1
    current = {t["trial_id"]: t for t in document["trials"]}  # in retry order: last wins
    reported = len(current)
    expected = document["population"]["expected"]
    lines = [
        f"round {snapshot.round_id}: {expected} planned trials, {reported} with results "
        f"({expected - reported} not yet reported), {len(document['trials'])} attempts "
        f"({', '.join(f'{n} {status}' for status, n in sorted(counts.items())) or 'none'})",
        f"text: {len(document['trajectories'])} trajectories (sampled, incomplete)",
    ]
    missing = [e for e in document["evidence"] if "the directory does not exist" in e["notes"]]
    if missing:
        lines.append(
            f"{len(missing)} planned attempt directories do not exist (unscored), e.g. "
            f"{missing[0]['directory']!r}"
        )
    return lines
