"""Starting an attempt is idempotent under the caller's ``Idempotency-Key``; each series
counts the points it had corrected or removed (live views reload a series when it moves).

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("attempts") as batch:
        batch.add_column(sa.Column("request_key", sa.String(128), nullable=True))
        batch.create_unique_constraint("uq_attempts_run_request_key", ["run_id", "request_key"])
    with op.batch_alter_table("metrics") as batch:
        batch.add_column(
            sa.Column("corrected", sa.BigInteger(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("metrics") as batch:
        batch.drop_column("corrected")
    with op.batch_alter_table("attempts") as batch:
        batch.drop_constraint("uq_attempts_run_request_key", type_="unique")
        batch.drop_column("request_key")
