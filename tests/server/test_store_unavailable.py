"""A store that cannot answer: an unreachable PostgreSQL and a full disk under SQLite answer
503 with ``Retry-After``, readiness follows the store, and each outage is logged once."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url

from tests.conftest import INGEST_SECRET, PG_URL
from tests.helpers import log
from tuneplane.contract.limits import STORE_RETRY_AFTER_SECONDS
from tuneplane.server.app import create_app
from tuneplane.server.settings import Secret, Settings
from tuneplane.store.database import Database

AUTH = {"Authorization": f"Bearer {INGEST_SECRET}"}


def _batch(run: str, step: int, events: int = 1) -> dict[str, Any]:
    metrics = {f"m{index}": float(index) for index in range(32 if events > 1 else 1)}
    return {
        "logs": [
            log(f"{run}-{step}-{n}", step + n, metrics, project="p", run=run) for n in range(events)
        ]
    }


def _store_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("store ")]


def _assert_unavailable(answer: Any, reason: str) -> None:
    assert answer.status_code == 503, answer.text
    assert answer.headers["retry-after"] == str(STORE_RETRY_AFTER_SECONDS)
    error = answer.json()["error"]
    assert error["code"] == "store_unavailable"
    assert error["message"] == f"store unavailable: {reason}; retry later"


class _Postgres:
    """A database of its own, whose connections the test can refuse and cut."""

    def __init__(self) -> None:
        self.admin: Engine = create_engine(
            make_url(PG_URL).set(drivername="postgresql+psycopg"), isolation_level="AUTOCOMMIT"
        )
        self.name = f"tuneplane_outage_{uuid.uuid4().hex[:10]}"
        self.sql(f'CREATE DATABASE "{self.name}"')
        self.url = (
            make_url(PG_URL)
            .set(drivername="postgresql+psycopg", database=self.name)
            .render_as_string(hide_password=False)
        )

    def sql(self, statement: str) -> None:
        with self.admin.connect() as connection:
            connection.execute(text(statement))

    def stop(self) -> None:
        self.sql(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS false')
        self.sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{self.name}' AND pid <> pg_backend_pid()"
        )

    def start(self) -> None:
        self.sql(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS true')

    def drop(self) -> None:
        self.start()
        self.sql(f'DROP DATABASE "{self.name}" WITH (FORCE)')
        self.admin.dispose()


@pytest.fixture
def postgres() -> Iterator[_Postgres]:
    database = _Postgres()
    yield database
    database.drop()


def test_an_unreachable_postgresql_answers_503_and_is_logged_once(
    postgres: _Postgres, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(
        data_dir=tmp_path, database_url=postgres.url, ingest_secret=Secret(INGEST_SECRET)
    )
    caplog.set_level(logging.WARNING, logger="tuneplane")
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        assert client.post("/ingest", json=_batch("r", 0), headers=AUTH).status_code == 200
        assert client.get("/healthz").status_code == 200
        postgres.stop()
        reason = "the database is unavailable"
        for _ in range(3):
            _assert_unavailable(client.get("/api/v1/projects/p/runs"), reason)
            _assert_unavailable(client.post("/ingest", json=_batch("r", 1), headers=AUTH), reason)
        _assert_unavailable(client.get("/healthz"), reason)
        assert client.get("/livez").status_code == 200
        lines = _store_lines(caplog)
        assert len(lines) == 1, lines
        assert lines[0].startswith("store unavailable: the database is unavailable (")
        assert "Traceback" not in caplog.text
        postgres.start()
        assert client.get("/healthz").status_code == 200
        assert client.post("/ingest", json=_batch("r", 1), headers=AUTH).status_code == 200
        runs = client.get("/api/v1/projects/p/runs").json()
        assert [run["point_count"] for run in runs] == [2]
        lines = _store_lines(caplog)
        assert len(lines) == 2, lines
        assert lines[1].startswith("store recovered:")


def _limit_pages(engine: Engine, limit: dict[str, int]) -> None:
    """A disk that holds ``limit["pages"]`` database pages: SQLite's own page limit, applied
    to the connection before each statement (the world outside, not our code)."""

    @event.listens_for(engine, "before_cursor_execute")
    def apply(connection: Any, *_args: Any) -> None:
        connection.connection.dbapi_connection.execute(f"PRAGMA max_page_count={limit['pages']}")


def test_a_full_disk_answers_503_while_reads_go_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path / 'tuneplane.db'}"
    database = Database(url)
    database.migrate()
    with database.connect() as connection:
        pages = connection.exec_driver_sql("PRAGMA page_count").scalar_one()
    limit = {"pages": 1 << 30}
    _limit_pages(database.engine, limit)
    settings = Settings(data_dir=tmp_path, database_url=url, ingest_secret=Secret(INGEST_SECRET))
    caplog.set_level(logging.WARNING, logger="tuneplane")
    with TestClient(create_app(settings, database), raise_server_exceptions=False) as client:
        assert client.post("/ingest", json=_batch("a", 0), headers=AUTH).status_code == 200
        with database.connect() as connection:
            pages = connection.exec_driver_sql("PRAGMA page_count").scalar_one()
        limit["pages"] = pages
        big = 128  # events: thousands of points need new pages wherever they go
        for step in range(3):
            answer = client.post("/ingest", json=_batch(f"b{step}", 0, big), headers=AUTH)
            _assert_unavailable(answer, "the disk is full")
        # Reads still work, and do not count as the disk being free again.
        assert client.get("/api/v1/projects/p/runs").status_code == 200
        assert client.get("/healthz").status_code == 200
        _assert_unavailable(
            client.post("/ingest", json=_batch("c", 0, big), headers=AUTH), "the disk is full"
        )
        lines = _store_lines(caplog)
        assert len(lines) == 1, lines
        assert lines[0].startswith("store unavailable: the disk is full (OperationalError: ")
        limit["pages"] = 1 << 30
        assert client.post("/ingest", json=_batch("c", 0, big), headers=AUTH).status_code == 200
        assert [r["run"] for r in client.get("/api/v1/projects/p/runs").json()] == ["a", "c"]
        lines = _store_lines(caplog)
        assert len(lines) == 2, lines
        assert (
            lines[1] == "store recovered: it answers again (it was unavailable: the disk is full)"
        )
        assert "Traceback" not in caplog.text


def test_startup_on_an_unreachable_database_names_it(tmp_path: Path) -> None:
    from tests.serving import free_port
    from tuneplane.store.database import DatabaseUnavailable

    url = f"postgresql://postgres:hunter2@127.0.0.1:{free_port()}/nothing"
    database = Database(url)
    try:
        started = time.monotonic()
        with pytest.raises(DatabaseUnavailable) as raised:
            database.migrate()
        assert time.monotonic() - started < 10
    finally:
        database.close()
    message = raised.value.message
    assert message.startswith("cannot open postgresql://postgres:***@127.0.0.1:")
    assert "the database is unavailable" in message
    assert "hunter2" not in message
