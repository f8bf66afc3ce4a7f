"""The SQLite writer commits jobs in groups, each job isolated by its own savepoint."""

import asyncio
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import pytest
from sqlalchemy import Connection, text

from tuneplane.store.database import Database

T = TypeVar("T")


def run_async(scenario: Callable[[], Awaitable[T]]) -> T:
    """Run a scenario in an event loop of its own, on a fresh thread: independent of any
    loop another test tool keeps in the main thread."""

    async def main() -> T:
        return await scenario()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, main()).result()


def test_a_failing_job_in_a_group_rolls_back_alone(tmp_path: Path) -> None:
    database = Database(f"sqlite:///{tmp_path / 'db.sqlite'}")
    database.migrate()
    gate = threading.Event()

    def blocker(connection: Connection) -> str:
        gate.wait(timeout=10)
        return "first"

    def insert(connection: Connection, name: str, fail: bool) -> str:
        connection.execute(
            text("INSERT INTO projects (name, created_at) VALUES (:n, 0)"), {"n": name}
        )
        if fail:
            raise ValueError(f"{name} failed after writing")
        return name

    async def scenario() -> list[object]:
        first = asyncio.ensure_future(database.write(blocker))
        await asyncio.sleep(0.05)  # the writer is now held inside the first job
        jobs = [
            asyncio.ensure_future(database.write(insert, "good-1", False)),
            asyncio.ensure_future(database.write(insert, "bad", True)),
            asyncio.ensure_future(database.write(insert, "good-2", False)),
        ]
        await asyncio.sleep(0.05)
        gate.set()
        return await asyncio.gather(first, *jobs, return_exceptions=True)

    try:
        results = run_async(scenario)
        assert results[0] == "first"
        assert results[1] == "good-1"
        assert isinstance(results[2], ValueError)
        assert results[3] == "good-2"
        with database.connect() as connection:
            names = connection.execute(text("SELECT name FROM projects ORDER BY name")).scalars()
            assert list(names) == ["good-1", "good-2"]
    finally:
        database.close()


def test_results_arrive_only_after_commit(tmp_path: Path) -> None:
    """A reader on another connection sees a job's write as soon as its result arrives."""
    database = Database(f"sqlite:///{tmp_path / 'db.sqlite'}")
    database.migrate()

    def insert(connection: Connection, n: int) -> int:
        connection.execute(
            text("INSERT INTO projects (name, created_at) VALUES (:n, 0)"), {"n": f"p{n}"}
        )
        return n

    async def scenario() -> None:
        async def one(n: int) -> None:
            await database.write(insert, n)
            with database.connect() as connection:
                found = connection.execute(
                    text("SELECT count(*) FROM projects WHERE name = :n"), {"n": f"p{n}"}
                ).scalar_one()
            assert found == 1

        await asyncio.gather(*(one(n) for n in range(200)))

    try:
        run_async(scenario)
    finally:
        database.close()


@pytest.mark.parametrize("jobs", [1, 300])
def test_close_finishes_queued_work(tmp_path: Path, jobs: int) -> None:
    database = Database(f"sqlite:///{tmp_path / 'db.sqlite'}")
    database.migrate()

    def insert(connection: Connection, n: int) -> None:
        connection.execute(
            text("INSERT INTO projects (name, created_at) VALUES (:n, 0)"), {"n": f"p{n}"}
        )

    async def scenario() -> None:
        await asyncio.gather(*(database.write(insert, n) for n in range(jobs)))

    run_async(scenario)
    database.close()
    reopened = Database(f"sqlite:///{tmp_path / 'db.sqlite'}")
    with reopened.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM projects")).scalar_one() == jobs
    reopened.close()
