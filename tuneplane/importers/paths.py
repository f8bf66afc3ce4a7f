"""Where a planned attempt's files are, checked before anything is read.

A directory is the plan's relative path beneath ``--root``: a symbolic link anywhere on
that path, or anywhere inside the trial directory, could make an import read another
trial's (or another machine's) evidence, so it is refused rather than followed.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from tuneplane.importers.plan import Plan, PlannedAttempt, PlannedTrial
from tuneplane.importers.problems import ImportRefused, Problem


@dataclass(frozen=True, slots=True)
class Located:
    """A planned attempt and its directory: ``path`` is None when nothing is there."""

    trial: PlannedTrial
    attempt: PlannedAttempt
    path: Path | None


def _symlink_inside(top: Path) -> Path | None:
    for parent, dirs, files in os.walk(top, followlinks=False):
        for name in sorted(dirs + files):
            candidate = Path(parent, name)
            if candidate.is_symlink():
                return candidate
    return None


def _locate(
    root: Path, trial: PlannedTrial, attempt: PlannedAttempt
) -> tuple[Path | None, str | None]:
    """The attempt's directory (None when it does not exist), or why it is refused."""
    current = root
    for part in PurePosixPath(attempt.directory).parts:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            return None, None
        except OSError as exc:
            return None, f"{current} cannot be read: {exc.strerror}"
        if stat.S_ISLNK(mode):
            return None, f"{current} is a symbolic link; links are never followed"
    if not current.is_dir():
        return None, f"{current} is not a directory"
    link = _symlink_inside(current)
    if link is not None:
        return (
            None,
            f"{link} inside the trial directory is a symbolic link; links are never followed",
        )
    return current, None


def locate_attempts(plan: Plan, root: str) -> list[Located]:
    """Every planned attempt in task / repeat / retry order with its directory beneath
    ``root``, or :class:`ImportRefused` naming each plan entry whose directory breaks a rule."""
    base = Path(root)
    if not base.is_dir():
        raise ImportRefused([Problem(root, "", "--root must be a directory")])
    located: list[Located] = []
    problems: list[Problem] = []
    for trial in plan.trials:
        for attempt in trial.attempts:
            path, problem = _locate(base, trial, attempt)
            if problem:
                problems.append(
                    Problem(
                        plan.file,
                        f"{attempt.where}.directory",
                        f"{trial.describe()}, retry {attempt.retry}: {problem}",
                    )
                )
            located.append(Located(trial, attempt, path))
    if problems:
        raise ImportRefused(problems)
    return located
