"""Reading a file another program, a job or a person wrote, never past its limit.

Every importer reads its files through :func:`read_bounded` (a document parsed whole) or
:func:`bounded_lines` (JSON lines, one at a time), with the limit of that kind of file from
``contract/limits.py``. The size the opened file reports is checked first, so an oversized
file is refused without reading it; then at most one byte beyond the limit is read, so a
file that grows meanwhile, or one whose size says nothing (a pipe, a ``/proc`` file), is
still never read further. Memory is bounded by the limit, whatever the file's size.

>>> read_bounded(Path("verifier/reward.txt"), 4096, "a reward file")
b'1\\n'
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Final

from tuneplane.importers.problems import ImportRefused, Problem

#: Bytes read at a time from a long line.
_PART: Final = 1 << 20


def describe(limit: int) -> str:
    """A limit as people read it: ``4 KiB``, ``32 MiB``, or bytes when it is neither."""
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if limit >= size and limit % size == 0:
            return f"{limit // size} {unit}"
    return f"{limit} bytes"


class FileTooLarge(ImportRefused):
    """A file, or a line of one, is larger than its kind's limit: nothing of it is used."""

    def __init__(self, problem: Problem) -> None:
        super().__init__([problem])
        self.problem = problem


def too_large(path: str, limit: int, what: str, size: int | None = None) -> Problem:
    """The problem of a file over its limit (``size`` when the file said it)."""
    found = f"is {size} bytes" if size is not None else "holds more"
    return Problem(path, "", f"{found}: {what} is read up to {describe(limit)}; it was not read")


def read_bounded(path: str | Path, limit: int, what: str) -> bytes:
    """The whole content of ``path``, at most ``limit`` bytes: :class:`FileTooLarge` naming
    the file and the limit when there is more (``what`` names the kind of file), and
    ``OSError`` when it cannot be read."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > limit:
            raise FileTooLarge(too_large(str(path), limit, what, size))
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise FileTooLarge(too_large(str(path), limit, what))
    return data


def bounded_lines(path: str | Path, limit: int, what: str) -> Iterator[tuple[int, bytes, bool]]:
    """``(number, line, ended)`` of each line of ``path``, one in memory at a time,
    ``ended`` False for a last line without its end of line. A line longer than ``limit``
    bytes (its end of line aside) raises :class:`FileTooLarge` naming the file, the line
    and the limit, and nothing after it is read; ``OSError`` when it cannot be read."""
    with open(path, "rb") as handle:
        number = 0
        while parts := _line_parts(handle, limit):
            number += 1
            ended = parts[-1].endswith(b"\n")
            if not ended and sum(map(len, parts)) > limit:
                rule = (
                    f"is longer than {describe(limit)}, the most {what} may hold; the file "
                    "is not read further"
                )
                raise FileTooLarge(Problem(str(path), f"line {number}", rule))
            yield number, parts[0] if len(parts) == 1 else b"".join(parts), ended


def _line_parts(handle: BinaryIO, limit: int) -> list[bytes]:
    """The next line in parts of at most ``_PART`` bytes, at most ``limit + 1`` bytes in
    all: a line over the limit is refused without being joined (which would hold it
    twice), and a short line, the usual one, is a single part."""
    parts: list[bytes] = []
    size = 0
    while size <= limit:
        part = handle.readline(min(_PART, limit + 1 - size))
        if not part:
            break
        parts.append(part)
        size += len(part)
        if part.endswith(b"\n"):
            break
    return parts
