"""What an importer says about bad input: every problem names its file, field and rule.

Readers collect problems instead of stopping at the first, so the CLI can print them all
at once before anything is written or uploaded.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Problem:
    """One broken rule of one input file (``field`` may be empty for the whole file)."""

    file: str
    field: str
    rule: str

    def __str__(self) -> str:
        return (
            f"{self.file}: {self.field}: {self.rule}" if self.field else f"{self.file}: {self.rule}"
        )


class ImportRefused(Exception):
    """The inputs break rules: nothing was written and nothing may be uploaded."""

    def __init__(self, problems: list[Problem]) -> None:
        assert problems, "ImportRefused needs at least one problem"
        self.problems = list(problems)
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(f"{problems[0]}{more}")
