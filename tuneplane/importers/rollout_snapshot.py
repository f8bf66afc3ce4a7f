"""The rollout snapshot: one training step's sampled rollouts, written to a file before
any upload (the training-scope twin of :mod:`tuneplane.importers.snapshot`)::

    {"format": "tuneplane-rollout-snapshot", "version": 1, "source": "nemo-rl",
     "content_hash": "<sha256>", "step": 12, "file": "train_data_step12.jsonl",
     "lines": 512, "categories": {"low_reward": 128, "invalid_reward": 0,
                                  "representative": 384},
     "trajectories": [{"scope": "training", "step": 12, "trajectory_id": "idx-7", …}]}

``lines`` and ``categories`` describe the whole step file (every rollout it held, by
category); ``trajectories`` are the ones kept, in the order they were chosen. A training
rollout's identity is ``(step, trajectory_id)``, so sending a snapshot again adds nothing.
The content hash covers everything but itself; reading a snapshot checks it, so a file
edited by hand is refused rather than uploaded.
"""

from __future__ import annotations

from typing import Any, Final

from tuneplane.contract.declared import canonical_digest
from tuneplane.contract.trajectories import parse_trajectory
from tuneplane.importers.problems import ImportRefused, Problem
from tuneplane.importers.snapshot import (
    ROLLOUT_FORMAT,
    Snapshot,
    check_snapshot,
    read_document,
    snapshot_files,
)

ROLLOUT_VERSION: Final = 1
_BODY: Final = ("source", "step", "file", "lines", "categories", "trajectories")


def assemble_rollouts(
    *,
    source: str,
    step: int,
    file: str,
    lines: int,
    categories: dict[str, int],
    trajectories: list[dict[str, Any]],
) -> Snapshot:
    body: dict[str, Any] = {
        "source": source,
        "step": step,
        "file": file,
        "lines": lines,
        "categories": categories,
        "trajectories": trajectories,
    }
    document = {
        "format": ROLLOUT_FORMAT,
        "version": ROLLOUT_VERSION,
        "content_hash": canonical_digest(body),
        **body,
    }
    return Snapshot(document)


def check_rollouts(file: str, document: object) -> Snapshot:
    """``document`` as a rollout snapshot, or :class:`ImportRefused` naming what is wrong."""
    if not isinstance(document, dict) or document.get("format") != ROLLOUT_FORMAT:
        raise ImportRefused([Problem(file, "format", f"must be {ROLLOUT_FORMAT!r}")])
    if document.get("version") != ROLLOUT_VERSION:
        raise ImportRefused([Problem(file, "version", f"must be {ROLLOUT_VERSION}")])
    missing = [key for key in _BODY if key not in document]
    if missing:
        raise ImportRefused([Problem(file, key, "required") for key in missing])
    body = {key: document[key] for key in _BODY}
    if document.get("content_hash") != canonical_digest(body):
        raise ImportRefused(
            [Problem(file, "content_hash", "does not match the content: the file was changed")]
        )
    items = document["trajectories"]
    if not isinstance(items, list):
        raise ImportRefused([Problem(file, "trajectories", "must be a list")])
    problems: list[Problem] = []
    for index, item in enumerate(items):
        parsed, violations = parse_trajectory(f"trajectories[{index}]", item)
        problems += [Problem(file, v.field, v.rule) for v in violations]
        if parsed is not None and (parsed.scope != "training" or parsed.step != document["step"]):
            problems.append(
                Problem(file, f"trajectories[{index}]", "must be a rollout of the file's step")
            )
    if problems:
        raise ImportRefused(problems)
    return Snapshot(document)


def read_rollouts(path: str) -> Snapshot:
    return check_rollouts(path, read_document(path))


def read_all(paths: list[str]) -> tuple[list[Snapshot], list[Snapshot]]:
    """Every evaluation and rollout snapshot the paths name (a directory stands for its
    ``*.json`` files, in name order), each read and checked; :class:`ImportRefused` naming
    every problem of all."""
    files, problems = snapshot_files(paths)
    rounds: list[Snapshot] = []
    rollouts: list[Snapshot] = []
    for file in files:
        try:
            document = read_document(file)
            if isinstance(document, dict) and document.get("format") == ROLLOUT_FORMAT:
                rollouts.append(check_rollouts(file, document))
            else:
                rounds.append(check_snapshot(file, document))
        except ImportRefused as refused:
            problems += refused.problems
    if problems:
        raise ImportRefused(problems)
    return rounds, rollouts
