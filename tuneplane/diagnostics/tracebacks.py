"""Python tracebacks in a log tail: the exception's type and message, and the innermost
frame of the user's own code (not the interpreter's library, not an installed package)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tuneplane.diagnostics.evidence import LogLine

_START = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<function>.+)$')
# The first unindented line after the frames: "module.Type: message", or "Type" alone
# (torch prints "torch.OutOfMemoryError: …").
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(: (?P<message>.*))?$")
_LIBRARY = re.compile(r"(site-packages|dist-packages|/lib/python3\.\d+/|<frozen |^<)")
#: Lines a traceback may have before its exception line that are not frames.
_NOISE = re.compile(r"^\s*(\^+|~+|[~^ ]+)$")


@dataclass(frozen=True, slots=True)
class Frame:
    path: str
    line: int
    function: str
    code: str | None


@dataclass(frozen=True, slots=True)
class ParsedTraceback:
    exception_type: str
    message: str
    frames: tuple[Frame, ...]
    #: The tail's lines: where the traceback starts and its exception line.
    start: LogLine
    exception_line: LogLine

    @property
    def user_frame(self) -> Frame | None:
        """The innermost frame outside the standard library and installed packages."""
        for frame in reversed(self.frames):
            if not _LIBRARY.search(frame.path):
                return frame
        return None


def _strip(text: str) -> str:
    """A line without the prefixes launchers add (``[rank0]: ``, ``[default0]:``)."""
    return re.sub(r"^(\[[\w:-]+\]:?\s?)+", "", text.rstrip("\n"))


def _parse_from(lines: Sequence[LogLine], start: int) -> ParsedTraceback | None:
    frames: list[Frame] = []
    index = start + 1
    while index < len(lines):
        text = _strip(lines[index].text)
        frame = _FRAME.match(text)
        if frame:
            code = None
            following = _strip(lines[index + 1].text) if index + 1 < len(lines) else ""
            if following.startswith("    ") and not _FRAME.match(following):
                code = following.strip()
                index += 1
            frames.append(Frame(frame["path"], int(frame["line"]), frame["function"], code))
        elif text.startswith(" ") or not text or _NOISE.match(text):
            pass  # a code line, a caret line or a blank: still inside the traceback
        else:
            found = _EXCEPTION.match(text.strip())
            if found is None:
                return None
            return ParsedTraceback(
                found["type"], (found["message"] or "").strip(), tuple(frames),
                lines[start], lines[index],
            )  # fmt: skip
        index += 1
    return None


def last_traceback(lines: Sequence[LogLine]) -> ParsedTraceback | None:
    """The last complete traceback of the tail (the one that ended the process, when
    exceptions were chained or several ranks printed theirs)."""
    for position in range(len(lines) - 1, -1, -1):
        if _strip(lines[position].text).strip() == _START:
            parsed = _parse_from(lines, position)
            if parsed is not None:
                return parsed
    return None
