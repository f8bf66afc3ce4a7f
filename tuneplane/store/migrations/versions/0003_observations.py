"""Observation events and evaluation outcomes: declarations, trial attempts and each
trial's current outcome.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "observations",
        sa.Column("id", _ID, primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("event_id", sa.String(128), nullable=False),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("name", sa.String(128), nullable=True),
        sa.Column("step", sa.BigInteger(), nullable=True),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("received_at", sa.Float(), nullable=False),
        sa.UniqueConstraint("run_id", "event_id", name="uq_observations_run_event"),
    )
    op.create_index("ix_observations_run_type", "observations", ["run_id", "type", "id"])
    op.create_table(
        "eval_rounds",
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("round_id", sa.String(128), primary_key=True),
        sa.Column("expected", sa.BigInteger(), nullable=False),
        sa.Column("dataset", sa.String(64), nullable=True),
        sa.Column("cohort", sa.String(64), nullable=True),
        sa.Column("verifier", sa.String(64), nullable=True),
        sa.Column("settings", sa.String(64), nullable=True),
        sa.Column("task_name", sa.String(1024), nullable=True),
        sa.Column("task_version", sa.String(1024), nullable=True),
        sa.Column("declared_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "trial_results",
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("round_id", sa.String(128), primary_key=True),
        sa.Column("trial_id", sa.String(128), primary_key=True),
        sa.Column("execution_attempt", sa.Integer(), primary_key=True),
        sa.Column("trial_attempt", sa.BigInteger(), primary_key=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("eligible", sa.Boolean(), nullable=False),
        sa.Column("reward", sa.Float(), nullable=True),
        sa.Column("error_type", sa.String(1024), nullable=True),
        sa.Column("received_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "trial_current",
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("round_id", sa.String(128), primary_key=True),
        sa.Column("trial_id", sa.String(128), primary_key=True),
        sa.Column("execution_attempt", sa.Integer(), nullable=False),
        sa.Column("trial_attempt", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("eligible", sa.Boolean(), nullable=False),
        sa.Column("reward", sa.Float(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
    )
    op.create_table(
        "round_tallies",
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("round_id", sa.String(128), primary_key=True),
        sa.Column("status", sa.String(16), primary_key=True),
        sa.Column("count", sa.BigInteger(), nullable=False),
    )
    op.create_index(
        "ix_trial_current_status",
        "trial_current",
        ["run_id", "round_id", "status", "trial_id"],
    )


def downgrade() -> None:
    for table in (
        "round_tallies",
        "trial_current",
        "trial_results",
        "eval_rounds",
        "observations",
    ):
        op.drop_table(table)
