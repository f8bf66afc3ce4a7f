"""The reward functions that gave a training rollout no reward (TRL sums the others).

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("trajectories", sa.Column("reward_missing", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trajectories") as batch:
        batch.drop_column("reward_missing")
