"""How much of the attempt's log a diagnosis read, and whether that was all of it.

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("diagnoses", sa.Column("log", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("diagnoses") as batch:
        batch.drop_column("log")
