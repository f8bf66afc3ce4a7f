"""Trajectories a blob store refused, counted on their round until a re-send stores them.

Revision ID: 0019
Revises: 0018
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "unstored_trajectories",
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("attempt", sa.Integer(), primary_key=True),
        sa.Column("identity", sa.String(400), primary_key=True),
        sa.Column("round_id", sa.String(128), nullable=True),
        sa.Column("step", sa.BigInteger(), nullable=True),
        sa.Column("failed_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("unstored_trajectories")
