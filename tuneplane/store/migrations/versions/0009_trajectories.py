"""Trajectories: the index of their bodies (kept in blob storage), bodies written whose
index rows have not committed yet, the sweeps that removed expired bodies, and the text
cap an evaluation round may declare.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("eval_rounds") as batch:
        batch.add_column(sa.Column("text_samples", sa.BigInteger(), nullable=True))
    op.create_table(
        "trajectories",
        sa.Column("id", _ID, primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("identity", sa.String(400), nullable=False),
        sa.Column("scope", sa.String(10), nullable=False),
        sa.Column("round_id", sa.String(128), nullable=True),
        sa.Column("trial_id", sa.String(128), nullable=True),
        sa.Column("trial_attempt", sa.BigInteger(), nullable=True),
        sa.Column("selection_rank", sa.BigInteger(), nullable=True),
        sa.Column("step", sa.BigInteger(), nullable=True),
        sa.Column("trajectory_id", sa.String(128), nullable=True),
        sa.Column("category", sa.String(16), nullable=True),
        sa.Column("diagnostic", sa.String(16), nullable=True),
        sa.Column("reward", sa.Float(), nullable=True),
        sa.Column("reward_invalid", sa.Boolean(), nullable=False),
        sa.Column("collection_policy", sa.String(1024), nullable=True),
        sa.Column("consumption_policy", sa.String(1024), nullable=True),
        sa.Column("message_count", sa.Integer(), nullable=False),
        sa.Column("total_messages", sa.BigInteger(), nullable=False),
        sa.Column("complete", sa.Boolean(), nullable=False),
        sa.Column("capture_policy", sa.String(8), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("bytes", sa.Integer(), nullable=False),
        sa.Column("body_state", sa.String(16), nullable=False),
        sa.Column("body_key", sa.String(256), nullable=True),
        sa.Column("received_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("removed_at", sa.Float(), nullable=True),
        sa.UniqueConstraint("run_id", "attempt", "identity", name="uq_trajectories_identity"),
    )
    op.create_index(
        "ix_trajectories_rollouts",
        "trajectories",
        ["run_id", "scope", "category", "step", "id"],
    )
    op.create_index("ix_trajectories_steps", "trajectories", ["run_id", "scope", "step", "id"])
    op.create_index(
        "ix_trajectories_categories", "trajectories", ["run_id", "scope", "category", "id"]
    )
    op.create_index(
        "ix_trajectories_round",
        "trajectories",
        ["run_id", "attempt", "round_id", "selection_rank"],
    )
    op.create_index("ix_trajectories_expiry", "trajectories", ["body_state", "expires_at"])
    op.create_table(
        "pending_bodies",
        sa.Column("body_key", sa.String(256), primary_key=True),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "body_sweeps",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("expired", sa.Integer(), nullable=False),
        sa.Column("deleted_bodies", sa.Integer(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("body_sweeps")
    op.drop_table("pending_bodies")
    op.drop_index("ix_trajectories_expiry", "trajectories")
    op.drop_index("ix_trajectories_round", "trajectories")
    op.drop_index("ix_trajectories_categories", "trajectories")
    op.drop_index("ix_trajectories_steps", "trajectories")
    op.drop_index("ix_trajectories_rollouts", "trajectories")
    op.drop_table("trajectories")
    with op.batch_alter_table("eval_rounds") as batch:
        batch.drop_column("text_samples")
