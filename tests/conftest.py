"""Shared fixtures: every storage and API test runs on a real SQLite file and a real
PostgreSQL database. PostgreSQL is required: when it cannot be reached the tests fail."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from tests.s3 import CREDENTIALS, s3_server
from tests.shared_fixtures import MISSING
from tuneplane.server.app import create_app
from tuneplane.server.settings import Secret, Settings
from tuneplane.store.database import Database
from tuneplane.store.schema import metadata

# The suite's runs carry no system/ series unless a test asks for them (tests/client/
# test_system_metrics.py): a sample arriving mid-test would change what others count.
os.environ.setdefault("TUNEPLANE_SYSTEM_METRICS_SECONDS", "0")

#: Test files that take minutes (pytest --durations, on 2 cores): collected first, so that
#: the workers (one file each at a time) do not end with one of them alone on a long file.
SLOW_FIRST = (
    "tests/server/test_access.py",
    "tests/server/test_fuzz_routes.py",
    "tests/server/test_credential_caps.py",
    "tests/coordinator/test_eval_run.py",
    "tests/launch/test_preview.py",
    "tests/launch/test_submit.py",
    "tests/launch/test_slurm.py",
    "tests/launch/test_ray.py",
    # Real lm-eval jobs, two per matched pair (local and Slurm; local in Chromium).
    "tests/launch/test_matched_launch.py",
    "tests/dashboard/test_matched_launch.py",
)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """How many tests did not run because the real fixtures are not beside the clone."""
    skipped = terminalreporter.stats.get("skipped", [])
    missing = [report for report in skipped if MISSING in str(report.longrepr)]
    if missing:
        terminalreporter.write_sep("-", "real fixtures")
        terminalreporter.write_line(f"{len(missing)} tests did not run: {MISSING}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: index for index, path in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], len(rank)))


PG_URL = os.environ.get("TUNEPLANE_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
INGEST_SECRET = "test-ingest-secret"


@contextmanager
def scratch_postgres() -> Iterator[str]:
    """A new, empty PostgreSQL database, dropped afterwards."""
    admin_url = make_url(PG_URL).set(drivername="postgresql+psycopg")
    name = f"tuneplane_test_{uuid.uuid4().hex[:10]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # pragma: no cover - the environment is broken
        pytest.fail(f"PostgreSQL is required for the test suite ({PG_URL}): {exc}")
    try:
        yield admin_url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def pg_database_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session, dropped at the end."""
    with scratch_postgres() as url:
        database = Database(url)
        database.migrate()
        database.close()
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with no tables yet, on each engine (for upgrades from old revisions)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'old.db'}"
        return
    with scratch_postgres() as url:
        yield url


def _truncate_postgres(url: str) -> None:
    engine = create_engine(url)
    tables = ", ".join(table.name for table in metadata.sorted_tables)
    with engine.begin() as connection:
        connection.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A clean, migrated database on each engine."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'data' / 'tuneplane.db'}"
    url: str = request.getfixturevalue("pg_database_url")
    _truncate_postgres(url)
    return url


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        ingest_secret=Secret(INGEST_SECRET),
    )


@pytest.fixture
def database(settings: Settings) -> Iterator[Database]:
    db = Database(settings.database_url)
    db.migrate()
    yield db
    db.close()


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    """The real app, in-process, with the ingest secret set."""
    with TestClient(create_app(settings), raise_server_exceptions=False) as test_client:
        test_client.headers["Authorization"] = f"Bearer {INGEST_SECRET}"
        yield test_client


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """One real S3-compatible server process for the whole session."""
    with s3_server() as endpoint:
        yield endpoint


@pytest.fixture
def s3_bucket(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A new bucket on the S3 test server, and the variables boto3 reads to reach it."""
    import boto3

    for name, value in {**CREDENTIALS, "AWS_ENDPOINT_URL": s3_endpoint}.items():
        monkeypatch.setenv(name, value)
    bucket = f"tp-{uuid.uuid4().hex[:20]}"
    boto3.client("s3").create_bucket(Bucket=bucket)
    return bucket
