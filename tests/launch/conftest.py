"""The launch tests' world: the server tests' accounts and credentials, with recipes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.conftest import INGEST_SECRET
from tests.launch.jobs import write_recipes
from tests.server.conftest import world  # noqa: F401 (a fixture of these tests too)
from tuneplane.server.settings import Secret, Settings


@pytest.fixture
def recipes_dir(tmp_path: Path) -> Path:
    return write_recipes(tmp_path / "recipes")


@pytest.fixture
def settings(database_url: str, tmp_path: Path, recipes_dir: Path) -> Settings:
    plain = Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        ingest_secret=Secret(INGEST_SECRET),
    )
    return dataclasses.replace(plain, recipes_dir=recipes_dir)
