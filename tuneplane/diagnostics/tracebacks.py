"""Python tracebacks in a log tail: the exception's type and message, and the innermost
frame of the user's own code (not the interpreter's library, not an installed package).

Real tails are untidy: launchers put a prefix before every line (``[rank0]:``, a worker's
name and a timestamp), a tail may begin in the middle of a traceback or end inside the
next one, and a paste may lose its indentation. So frames are found anywhere in a line,
and the exception is the first line after a group of frames that is not their code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tuneplane.diagnostics.evidence import LogLine

_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+)(?:, in (?P<function>.*))?')
_TYPED = re.compile(
    r"(?:^|(?<=[\s\]>)|:]))(?P<type>(?:[A-Za-z_]\w*\.)*[A-Z]\w*"
    r"(?:Error|Exception|Exit|Interrupt|Failure|Warning|Full|Timeout|Fault))"
    r"(?::\s?(?P<message>.*))?$"
)
_LIBRARY = re.compile(r"(site-packages|dist-packages|[/\\]lib[/\\]python3\.\d+[/\\]|<frozen |^<)")
_CARETS = re.compile(r"^[\s~^]+$")
#: What comes right after an exception line, or right before it, in a traceback whose
#: frames the tail does not hold.
_CHAINED = re.compile(r"The above exception was the direct cause|During handling of the above")
_RAISE = re.compile(r"^\s+raise\b")
#: Lines between two frames of one traceback at most (code, and two caret lines).
_FRAME_GAP = 4
#: Lines after a traceback's last frame in which its exception line must come.
_EXCEPTION_WITHIN = 6


@dataclass(frozen=True, slots=True)
class Frame:
    path: str
    line: int
    function: str


@dataclass(frozen=True, slots=True)
class ParsedTraceback:
    exception_type: str
    message: str
    frames: tuple[Frame, ...]
    #: The tail's lines: where the traceback starts (its header, or its first frame when
    #: the tail holds no header), and the exception line.
    start: LogLine
    exception_line: LogLine

    @property
    def user_frame(self) -> Frame | None:
        """The innermost frame outside the standard library and installed packages."""
        for frame in reversed(self.frames):
            if not _LIBRARY.search(frame.path):
                return frame
        return None


def _groups(lines: Sequence[LogLine]) -> list[list[int]]:
    """Indexes of frame lines, grouped into tracebacks."""
    groups: list[list[int]] = []
    for position, line in enumerate(lines):
        if _FRAME.search(line.text) is None:
            continue
        if groups and position - groups[-1][-1] <= _FRAME_GAP:
            groups[-1].append(position)
        else:
            groups.append([position])
    return groups


def _exception_after(lines: Sequence[LogLine], last_frame: int) -> tuple[int, str, str] | None:
    """(position, type, message) of the exception line after a group's last frame."""
    frame_line = lines[last_frame].text
    found = _FRAME.search(frame_line)
    assert found is not None
    prefix = frame_line[: found.start()].rstrip()
    end = min(len(lines), last_frame + 1 + _EXCEPTION_WITHIN)
    for position in range(last_frame + 1, end):
        text = lines[position].text.rstrip()
        typed = _TYPED.search(text)
        if typed is not None:
            return position, typed["type"], (typed["message"] or "").strip()
        content = text[len(prefix) :] if prefix and text.startswith(prefix) else text
        if not content.strip() or _CARETS.match(content) or content.startswith("    "):
            continue  # the frame's code, its carets, a blank line
        if position > last_frame + 1:
            # Not indented, not a type: a message printed without its type.
            return position, "an exception", content.strip()
    return None


def _lone_exception(lines: Sequence[LogLine]) -> ParsedTraceback | None:
    """An exception line whose frames were cut off by the tail's start: it is followed by
    the sentence chaining it to the next, or preceded by its ``raise``."""
    for position in range(len(lines) - 1, -1, -1):
        typed = _TYPED.search(lines[position].text.rstrip())
        if typed is None:
            continue
        after = " ".join(line.text for line in lines[position + 1 : position + 3])
        before = lines[position - 1].text if position else ""
        if _CHAINED.search(after) or _RAISE.search(before):
            message = (typed["message"] or "").strip()
            return ParsedTraceback(typed["type"], message, (), lines[position], lines[position])
    return None


def last_traceback(lines: Sequence[LogLine]) -> ParsedTraceback | None:
    """The last traceback of the tail that has its exception line (the one that ended the
    process, when exceptions were chained or several ranks printed theirs)."""
    found = _last_with_frames(lines)
    return found if found is not None else _lone_exception(lines)


def _last_with_frames(lines: Sequence[LogLine]) -> ParsedTraceback | None:
    for group in reversed(_groups(lines)):
        after = _exception_after(lines, group[-1])
        if after is None:
            continue
        position, kind, message = after
        frames = []
        for index in group:
            found = _FRAME.search(lines[index].text)
            assert found is not None
            frames.append(Frame(found["path"], int(found["line"]), found["function"] or "?"))
        first = group[0]
        if first and "Traceback (most recent call last)" in lines[first - 1].text:
            first -= 1  # cite the traceback from its header
        return ParsedTraceback(kind, message, tuple(frames), lines[first], lines[position])
    return None
