"""Projects, runs, metric summaries, Arena events, points and alerts.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "projects",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False, unique=True),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("project_id", sa.Integer(), sa.ForeignKey("projects.id"), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("config", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("last_step", sa.BigInteger(), nullable=True),
        sa.Column("point_count", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("alert_count", sa.Integer(), nullable=False, server_default="0"),
        sa.UniqueConstraint("project_id", "name", name="uq_runs_project_name"),
    )
    op.create_table(
        "metrics",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("invalid_count", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("min_value", sa.Float(), nullable=True),
        sa.Column("max_value", sa.Float(), nullable=True),
        sa.Column("last_value", sa.Float(), nullable=True),
        sa.Column("first_step", sa.BigInteger(), nullable=False),
        sa.Column("last_step", sa.BigInteger(), nullable=False),
        sa.UniqueConstraint("run_id", "name", name="uq_metrics_run_name"),
    )
    op.create_table(
        "events",
        sa.Column("id", _ID, primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("log_id", sa.String(128), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=False),
        sa.Column("received_at", sa.Float(), nullable=False),
        sa.UniqueConstraint("run_id", "log_id", name="uq_events_run_log"),
    )
    op.create_table(
        "points",
        sa.Column("metric_id", sa.Integer(), primary_key=True),
        sa.Column("step", sa.BigInteger(), primary_key=True),
        sa.Column("event_id", sa.BigInteger(), primary_key=True),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("time", sa.Float(), nullable=False),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "alerts",
        sa.Column("id", _ID, primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("alert_id", sa.String(128), nullable=False),
        sa.Column("title", sa.String(200), nullable=False),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("level", sa.String(8), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=True),
        sa.Column("received_at", sa.Float(), nullable=False),
        sa.UniqueConstraint("run_id", "alert_id", name="uq_alerts_run_alert"),
    )
    op.create_index("ix_alerts_run_received", "alerts", ["run_id", "id"])


def downgrade() -> None:
    for table in ("alerts", "points", "events", "metrics", "runs", "projects"):
        op.drop_table(table)
