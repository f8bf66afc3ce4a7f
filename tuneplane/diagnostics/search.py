"""The lines of a whole log that a rule could cite, found fast enough to read every line
of a long log: every pattern names words (anchors) of which each line it matches holds
one, one regular expression built from all of them finds the lines that hold any, and only
those lines are matched against the patterns. A pure function over a page of lines; the
store pages through the log and keeps what it returns."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate
from typing import Final, NamedTuple

from tuneplane.diagnostics.patterns import NEAR_LINES, PATTERNS, Pattern
from tuneplane.diagnostics.tracebacks import FRAME_WORD, spans

#: Lines kept before and after a line that matches, for the reader and for the rules that
#: look around a line (``with_context``).
CONTEXT_LINES: Final = 2
#: Lines of a traceback kept before its exception line (its innermost frames); a longer
#: one keeps its header too.
TRACEBACK_LINES: Final = 40


def _trie(words: Sequence[str]) -> str:
    """One alternation of ``words`` sharing their prefixes, so that the regular expression
    engine tries few branches at each position of a page."""
    root: dict[str, dict] = {}  # type: ignore[type-arg]
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def build(node: dict) -> str:  # type: ignore[type-arg]
        branches = [re.escape(char) + build(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return build(root)


_WORDS: Final = sorted({word for pattern in PATTERNS for word in pattern.anchors})
#: The engine tries the expression at every position whose character may begin it: words
#: that begin with a capital (rarer in a log) are searched at once, the others one by one
#: (a plain substring search is several times faster than the expression per character),
#: as is a traceback's frame word (its "F" begins many words).
_CAPITALISED: Final = re.compile(_trie([word for word in _WORDS if not word[0].islower()]))
_LOWER: Final = (FRAME_WORD, *(word for word in _WORDS if word[0].islower()))
_PER_PATTERN: Final = tuple((p, re.compile(_trie(sorted(p.anchors)))) for p in PATTERNS)


#: The code a traceback's lines are kept under.
PYTHON_EXCEPTION: Final = "python_exception"


class Hit(NamedTuple):
    """A line of the page (its place in it) that a pattern matches, the patterns' codes,
    and how many lines around it the rules may look at."""

    at: int
    codes: tuple[str, ...]
    context: int


def _matches(pattern: Pattern, text: str) -> bool:
    if pattern.unless is not None and pattern.unless.search(text):
        return False
    if pattern.shows.search(text):
        return True
    return pattern.with_context is not None and bool(pattern.with_context[0].search(text))


def find_hits(texts: Sequence[str]) -> list[Hit]:
    """The lines of ``texts`` (a page of a log, in order) a pattern may cite."""
    page = "\n".join(texts)
    starts = [0, *accumulate(map((1).__add__, map(len, texts)))]
    lines: set[int] = set()
    position = 0
    while (found := _CAPITALISED.search(page, position)) is not None:
        at = bisect_right(starts, found.start()) - 1
        lines.add(at)
        position = starts[at + 1]  # on from the next line: one is enough
    for word in _LOWER:
        position = page.find(word)
        while position != -1:
            at = bisect_right(starts, position) - 1
            lines.add(at)
            position = page.find(word, starts[at + 1])
    hits: list[Hit] = []
    for at in sorted(lines):
        text = texts[at]
        matched = [p for p, anchors in _PER_PATTERN if anchors.search(text) and _matches(p, text)]
        if matched:
            near = any(p.with_context is not None for p in matched)
            codes = tuple(p.code for p in matched)
            hits.append(Hit(at, codes, NEAR_LINES if near else CONTEXT_LINES))
    frames = sorted(at for at in lines if FRAME_WORD in texts[at])
    return sorted(hits + _traceback_hits(texts, frames))


def _traceback_hits(texts: Sequence[str], frames: list[int]) -> list[Hit]:
    """Each traceback's exception line with the frames before it, and its start when it
    is longer than that."""
    hits = []
    for start, exception in spans(texts, frames):
        hits.append(Hit(exception, (PYTHON_EXCEPTION,), min(exception - start, TRACEBACK_LINES)))
        if exception - start > TRACEBACK_LINES:
            hits.append(Hit(start, (PYTHON_EXCEPTION,), 0))
    return hits
