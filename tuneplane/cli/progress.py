"""Progress lines on stderr for long imports and uploads."""

from __future__ import annotations

import sys
from typing import Any


def progress(what: str) -> Any:
    """A progress line on stderr for long imports: redrawn on a terminal, every tenth
    otherwise."""
    shown = {"last": -1}

    def show(done: int, total: int) -> None:
        tenth = done * 10 // max(total, 1)
        if sys.stderr.isatty():
            end = "\n" if done == total else ""
            print(f"\rtuneplane: {what} {done}/{total}", end=end, file=sys.stderr, flush=True)
        elif total >= 100 and tenth != shown["last"]:
            shown["last"] = tenth
            print(f"tuneplane: {what} {done}/{total}", file=sys.stderr, flush=True)

    return show


def upload_progress() -> Any:
    """One progress line per kind of item delivered (events, then trajectories)."""
    lines: dict[str, Any] = {}

    def show(what: str, done: int, total: int) -> None:
        lines.setdefault(what, progress(what))(done, total)

    return show
