"""The migrations build exactly the schema declared in ``store/schema.py``."""

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from tuneplane.store.database import Database
from tuneplane.store.schema import metadata


def test_migrated_schema_matches_the_declared_schema(database: Database) -> None:
    with database.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        differences = compare_metadata(context, metadata)
    assert differences == []


def test_migrating_twice_changes_nothing(database: Database) -> None:
    database.migrate()
    with database.engine.connect() as connection:
        context = MigrationContext.configure(connection)
        assert context.get_current_revision() is not None
