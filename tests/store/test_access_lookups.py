"""The project and run lookups the access guard asks the store for, on both engines."""

from __future__ import annotations

from tuneplane.store import access
from tuneplane.store.database import Database
from tuneplane.store.runs import create_or_resume


def test_a_project_exists_once_a_run_creates_it(database: Database) -> None:
    with database.connect() as connection:
        assert not access.project_exists(connection, "p")
    database.run_write(create_or_resume, "p", "r", None)
    with database.connect() as connection:
        assert access.project_exists(connection, "p")
        assert not access.project_exists(connection, "P")  # IDs are case-sensitive
        assert not access.project_exists(connection, "q")


def test_a_run_is_found_by_its_project_and_name(database: Database) -> None:
    database.run_write(create_or_resume, "p", "r", None)
    database.run_write(create_or_resume, "p", "s", None)
    database.run_write(create_or_resume, "q", "r", None)
    with database.connect() as connection:
        ids = {
            (project, run): access.run_id_by_name(connection, project, run)
            for project, run in (("p", "r"), ("p", "s"), ("q", "r"))
        }
        assert None not in ids.values()
        assert len(set(ids.values())) == 3  # the same run name in two projects: two runs
        assert access.run_id_by_name(connection, "p", "t") is None
        assert access.run_id_by_name(connection, "none", "r") is None
