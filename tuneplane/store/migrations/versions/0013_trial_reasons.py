"""Why a trial result has its status: a reason code and a sentence (both optional).

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("trial_results", sa.Column("reason_code", sa.String(128), nullable=True))
    op.add_column("trial_results", sa.Column("reason", sa.String(1024), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trial_results") as batch:
        for column in ("reason", "reason_code"):
            batch.drop_column(column)
