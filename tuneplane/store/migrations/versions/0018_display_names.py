"""Display names of up to 256 characters, and a project's display name.

Revision ID: 0018
Revises: 0017
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("projects", sa.Column("display_name", sa.String(256), nullable=True))
    _display_name_length(200, 256)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("UPDATE runs SET display_name = left(display_name, 200)")
    _display_name_length(256, 200)
    with op.batch_alter_table("projects") as batch:
        batch.drop_column("display_name")


def _display_name_length(old: int, new: int) -> None:
    """PostgreSQL changes the column in place. SQLite (3.35 or newer) adds a column of the
    new length, copies the names and drops the old one: rebuilding the runs table would
    trip the foreign keys of every table that refers to it."""
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column("runs", "display_name", type_=sa.String(new), existing_type=sa.String(old))
        return
    op.execute(f"ALTER TABLE runs ADD COLUMN display_name_new VARCHAR({new})")
    op.execute(f"UPDATE runs SET display_name_new = substr(display_name, 1, {new})")
    op.execute("ALTER TABLE runs DROP COLUMN display_name")
    op.execute("ALTER TABLE runs RENAME COLUMN display_name_new TO display_name")
