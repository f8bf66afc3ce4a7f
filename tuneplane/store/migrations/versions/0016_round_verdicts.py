"""Whether a round's producer gives success or failure verdicts, or only rewards.

Revision ID: 0016
Revises: 0015
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("eval_rounds", sa.Column("verdicts", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("eval_rounds") as batch:
        batch.drop_column("verdicts")
