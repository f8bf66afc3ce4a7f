"""Where the real fixtures are, and what a test that reads one says when they are not.

The real fixtures (other projects' files, kept in ``../shared/fixtures`` beside the
repository, never copied into it) are read where they exist, as CI has them. A clone
anywhere else still runs every rule on the project's own twin fixtures
(``tests/fixtures/``: the same formats, content of their own); the real-fixture tests are
skipped there with :data:`MISSING`, and the run says how many (tests/conftest.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO.parent / "shared" / "fixtures"
#: The project's own fixtures, twins of the real ones.
TWINS = REPO / "tests" / "fixtures"
MISSING = "../shared/fixtures is missing: this test reads a real fixture"

#: Marks a test that reads a real fixture.
real_fixture = pytest.mark.skipif(not FIXTURES.is_dir(), reason=MISSING)
