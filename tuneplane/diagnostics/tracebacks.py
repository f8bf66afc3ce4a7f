"""Python tracebacks anywhere in a log: the exception's type and message, and the innermost
frame of the user's own code (not the interpreter's library, not an installed package).

Real logs are untidy: launchers put a prefix before every line (``[rank0]:``, a worker's
name and a timestamp), the lines read may begin in the middle of a traceback or end inside
the next one, and a paste may lose its indentation. So frames are found anywhere in a line,
and the exception is the first line after a group of frames that is not their code.

A job that fails prints its cause first and then its fallout: a cleanup that raises again
("During handling of the above exception"), the other ranks' errors, the launcher's
``ChildFailedError``. So the traceback that names the failure is the first one, passing
over those that are only ever fallout.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
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
_HEADER = "Traceback (most recent call last)"
_RAISE = re.compile(r"^\s+raise\b")
#: Exceptions that only ever follow a failure elsewhere: a launcher's report of its child
#: (torchrun, torch.multiprocessing, accelerate launch's subprocess), the other ranks losing
#: their peer, a stop signal.
_FALLOUT = re.compile(
    r"(ChildFailedError|ProcessRaisedException|ProcessExitedException|CalledProcessError|"
    r"DistBackendError|"
    r"DistNetworkError|DistStoreError|SignalException|KeyboardInterrupt|BrokenPipeError|"
    r"ConnectionResetError|SystemExit)$"
)
#: What the interpreter prints before a traceback it ignores (an error in a finaliser).
_IGNORED = "Exception ignored in"
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
    #: The interpreter printed it and went on (an error in a finaliser).
    ignored: bool = False

    @property
    def user_frame(self) -> Frame | None:
        """The innermost frame outside the standard library and installed packages."""
        for frame in reversed(self.frames):
            if not _LIBRARY.search(frame.path):
                return frame
        return None


def _groups(lines: Sequence[LogLine]) -> list[list[int]]:
    """Positions of frame lines, grouped into tracebacks (the lines read may skip parts of
    the log: two frames are of one traceback only when close in the log too)."""
    groups: list[list[int]] = []
    for position, line in enumerate(lines):
        if _FRAME.search(line.text) is None:
            continue
        last = groups[-1][-1] if groups else None
        headed = position > 0 and _HEADER in lines[position - 1].text
        if last is not None and not headed and 0 < line.index - lines[last].index <= _FRAME_GAP:
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
    code_before = False
    for position in range(last_frame + 1, end):
        if lines[position].index - lines[last_frame].index > _EXCEPTION_WITHIN:
            break  # the lines read skip the rest of this traceback
        text = lines[position].text.rstrip()
        typed = _TYPED.search(text)
        if typed is not None:
            return position, typed["type"], (typed["message"] or "").strip()
        content = text[len(prefix) :] if prefix and text.startswith(prefix) else text
        if not content.strip() or _CARETS.match(content) or content.startswith("    "):
            code_before = True
            continue  # the frame's code, its carets, a blank line
        if position > last_frame + 1 and code_before:
            # Not indented, not a type, after the frame's code: a message printed without
            # its type.
            return position, "an exception", content.strip()
        code_before = False
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


def tracebacks(lines: Sequence[LogLine]) -> list[ParsedTraceback]:
    """Every traceback of ``lines`` that has its exception line, in log order; when none
    has its frames, an exception line whose frames the lines do not hold."""
    found = list(_with_frames(lines))
    if not found:
        lone = _lone_exception(lines)
        found = [] if lone is None else [lone]
    return found


def first_cause(found: Sequence[ParsedTraceback]) -> ParsedTraceback | None:
    """The traceback that names the failure: the first that is not only fallout (or the
    first, when all of them are)."""
    causes = [parsed for parsed in found if not _is_fallout(parsed)]
    return next(iter(causes or found), None)


def _is_fallout(parsed: ParsedTraceback) -> bool:
    return bool(_FALLOUT.search(parsed.exception_type)) or parsed.ignored


def _with_frames(lines: Sequence[LogLine]) -> Iterator[ParsedTraceback]:
    for group in _groups(lines):
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
        if first and _HEADER in lines[first - 1].text:
            first -= 1  # cite the traceback from its header
        ignored = first > 0 and _IGNORED in lines[first - 1].text
        yield ParsedTraceback(kind, message, tuple(frames), lines[first], lines[position], ignored)


#: What every frame line of a traceback holds.
FRAME_WORD = 'File "'


def spans(texts: Sequence[str], frames: Iterable[int]) -> list[tuple[int, int]]:
    """(start, exception line) of each traceback of a page of a log (texts in order), by
    place in the page, given the places of the page's lines that hold ``FRAME_WORD``."""
    near: set[int] = set()
    for at in frames:
        near.update(range(max(0, at - 1), min(len(texts), at + _EXCEPTION_WITHIN + 1)))
    lines = [LogLine(i, "stderr", texts[i]) for i in sorted(near)]
    return [(found.start.index, found.exception_line.index) for found in _with_frames(lines)]
