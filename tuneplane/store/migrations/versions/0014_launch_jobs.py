"""Jobs launched through the server: one row per submission and its engine's state.

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "launch_jobs",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("recipe", sa.String(128), nullable=False),
        sa.Column("engine", sa.String(16), nullable=False),
        sa.Column("request_key", sa.String(128), nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(1024), nullable=False, server_default=""),
        sa.Column("engine_id", sa.String(128), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("cpus", sa.Integer(), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("created_by", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=True),
        sa.Column("ended_at", sa.Float(), nullable=True),
        sa.UniqueConstraint("project_id", "request_key", name="uq_launch_jobs_request_key"),
    )
    op.create_index("ix_launch_jobs_project_state", "launch_jobs", ["project_id", "state"])


def downgrade() -> None:
    op.drop_index("ix_launch_jobs_project_state", "launch_jobs")
    op.drop_table("launch_jobs")
