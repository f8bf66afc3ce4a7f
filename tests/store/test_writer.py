"""The SQLite writer commits jobs in groups, each job isolated by its own savepoint."""

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import pytest
from sqlalchemy import Connection, text

from tuneplane.store.database import Database
from tuneplane.store.errors import StoreUnavailable
from tuneplane.store.statistics import StatisticsKeeper

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


def test_a_job_that_loses_a_deadlock_on_postgresql_is_run_again(pg_database_url: str) -> None:
    """Two writers lock the same two rows in opposite order; PostgreSQL aborts one of the
    jobs, which is rolled back to its savepoint and run again after the other commits."""
    database = Database(pg_database_url)
    database.migrate()

    def seed(connection: Connection) -> None:
        connection.execute(text("DELETE FROM projects WHERE name IN ('lock-a', 'lock-b')"))
        connection.execute(
            text("INSERT INTO projects (name, created_at) VALUES ('lock-a', 0), ('lock-b', 0)")
        )

    database.run_write(seed)
    both_hold_one = threading.Barrier(2, timeout=10)
    calls: list[str] = []

    def lock_in_order(connection: Connection, first: str, second: str) -> str:
        calls.append(first)
        touch = text("UPDATE projects SET created_at = created_at + 1 WHERE name = :n")
        connection.execute(touch, {"n": first})
        if calls.count(first) == 1:
            both_hold_one.wait()
        connection.execute(touch, {"n": second})
        return first

    async def scenario() -> list[str]:
        # Keys 0 and 1 go to two different writers.
        return list(
            await asyncio.gather(
                database.write(lock_in_order, "lock-a", "lock-b", key=0),
                database.write(lock_in_order, "lock-b", "lock-a", key=1),
            )
        )

    try:
        assert run_async(scenario) == ["lock-a", "lock-b"]
        assert len(calls) == 3  # one of the two ran again
        with database.connect() as connection:
            touched = connection.execute(
                text("SELECT created_at FROM projects WHERE name IN ('lock-a', 'lock-b')")
            ).scalars()
            assert sorted(touched) == [2, 2]
    finally:
        database.close()


def test_tables_that_changed_a_lot_are_analyzed_on_postgresql(pg_database_url: str) -> None:
    """The planner's statistics follow the data even where autovacuum is off."""
    database = Database(pg_database_url)
    keeper = StatisticsKeeper(database.engine, interval=3600)
    try:
        keeper.analyze_stale()  # whatever an earlier test left

        def grow(connection: Connection) -> None:
            connection.execute(
                text("INSERT INTO projects (name, created_at) VALUES (:name, 0)"),
                [{"name": f"stats-{index}"} for index in range(200)],
            )

        database.run_write(grow)
        # PostgreSQL publishes its change counters within about a second.
        deadline = time.monotonic() + 15
        while "projects" not in keeper.analyze_stale():
            assert time.monotonic() < deadline, "projects was never analyzed"
            time.sleep(0.2)
        assert "projects" not in keeper.analyze_stale()
        with database.connect() as connection:
            analyzed = connection.exec_driver_sql(
                "SELECT reltuples FROM pg_class WHERE relname = 'projects'"
            ).scalar_one()
        assert analyzed >= 200
    finally:
        keeper.close()
        database.close()


def test_a_writer_reconnects_after_its_postgresql_connection_is_lost(
    pg_database_url: str,
) -> None:
    database = Database(pg_database_url)

    def name_a_project(connection: Connection, name: str) -> str:
        connection.execute(
            text("INSERT INTO projects (name, created_at) VALUES (:n, 0)"), {"n": name}
        )
        return name

    async def write(name: str) -> str:
        return await database.write(name_a_project, name, key=0)

    try:
        assert run_async(lambda: write("before-loss")) == "before-loss"
        with database.connect() as connection:
            connection.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            )
        # The write that meets the dead connection fails as the store being unavailable
        # (503 to a client); the writer then starts afresh.
        with pytest.raises(StoreUnavailable, match="the database is unavailable"):
            run_async(lambda: write("lost"))
        assert run_async(lambda: write("after-loss")) == "after-loss"
        with database.connect() as connection:
            names = set(connection.execute(text("SELECT name FROM projects")).scalars())
        assert {"before-loss", "after-loss"} <= names
        assert "lost" not in names
    finally:
        database.close()


def test_batched_jobs_of_a_group_are_written_in_one_call(tmp_path: Path) -> None:
    """Queued together, a batched function's jobs reach it as one list, in order; when that
    call fails, each job runs again alone and only the failing one reports the error."""
    database = Database(f"sqlite:///{tmp_path / 'db.sqlite'}")
    database.migrate()
    gate = threading.Event()
    calls: list[list[str]] = []

    def blocker(connection: Connection) -> str:
        gate.wait(timeout=10)
        return "first"

    def insert_all(connection: Connection, names: list[str]) -> list[str]:
        calls.append(list(names))
        for name in names:
            connection.execute(
                text("INSERT INTO projects (name, created_at) VALUES (:n, 0)"), {"n": name}
            )
            if name.startswith("bad"):
                raise ValueError(f"{name} failed after writing")
        return [name.upper() for name in names]

    def insert_one(connection: Connection, name: str) -> str:
        return insert_all(connection, [name])[0].lower()

    async def group(names: list[str]) -> list[object]:
        held = asyncio.ensure_future(database.write(blocker))
        await asyncio.sleep(0.05)  # the writer is now held inside the blocker
        jobs = [
            asyncio.ensure_future(
                database.write(insert_one, name)
                if name.startswith("plain")
                else database.write_batched(insert_all, name)
            )
            for name in names
        ]
        await asyncio.sleep(0.05)
        gate.set()
        results = await asyncio.gather(held, *jobs, return_exceptions=True)
        gate.clear()
        return results[1:]

    try:
        assert run_async(lambda: group(["a", "plain-1", "b", "c"])) == ["A", "plain-1", "B", "C"]
        assert calls == [["a", "b", "c"], ["plain-1"]]

        calls.clear()
        results = run_async(lambda: group(["d", "bad", "plain-2", "e"]))
        assert results[0] == "D"
        assert isinstance(results[1], ValueError)
        assert results[2:] == ["plain-2", "E"]
        assert calls == [["d", "bad", "e"], ["d"], ["bad"], ["plain-2"], ["e"]]
        with database.connect() as connection:
            names = connection.execute(text("SELECT name FROM projects ORDER BY name")).scalars()
            assert list(names) == ["a", "b", "c", "d", "e", "plain-1", "plain-2"]
    finally:
        database.close()
