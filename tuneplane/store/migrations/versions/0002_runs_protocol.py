"""API keys, execution attempts with ingest tokens, run lifecycle and health, live log
lines, and invalid (NaN/inf) points.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("status", sa.String(16), nullable=True))
        batch.add_column(sa.Column("exit_code", sa.Integer(), nullable=True))
        batch.add_column(
            sa.Column("attempt_count", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(sa.Column("health", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("health_at", sa.Float(), nullable=True))
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "attempts",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("ended_at", sa.Float(), nullable=True),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("token_expires_at", sa.Float(), nullable=False),
        sa.UniqueConstraint("run_id", "attempt", name="uq_attempts_run_attempt"),
    )
    op.create_table(
        "log_lines",
        sa.Column("id", _ID, primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("stream", sa.String(8), nullable=False),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=True),
        sa.UniqueConstraint("run_id", "attempt", "seq", name="uq_log_lines_run_attempt_seq"),
    )
    op.create_index("ix_log_lines_run_cursor", "log_lines", ["run_id", "id"])
    op.create_table(
        "invalid_points",
        sa.Column("metric_id", sa.Integer(), primary_key=True),
        sa.Column("step", sa.BigInteger(), primary_key=True),
        sa.Column("kind", sa.String(4), nullable=False),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    for table in ("invalid_points", "log_lines", "attempts", "api_keys"):
        op.drop_table(table)
    with op.batch_alter_table("runs") as batch:
        for column in ("health_at", "health", "attempt_count", "exit_code", "status"):
            batch.drop_column(column)
