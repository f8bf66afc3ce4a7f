"""Server-side alert rules, their watches and episodes; webhooks and their deliveries.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_ROW_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "alert_rules",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_alert_rules_project", "alert_rules", ["project_id", "id"])
    op.create_table(
        "alert_rule_versions",
        sa.Column("project_id", sa.Integer(), primary_key=True),
        sa.Column("version", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "alert_watches",
        sa.Column("rule_id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Integer(), primary_key=True),
        sa.Column("subject", sa.String(128), primary_key=True),
        sa.Column("episode_id", sa.BigInteger(), nullable=True),
        sa.Column("changed_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "alert_episodes",
        sa.Column("id", _ROW_ID, primary_key=True),
        sa.Column("rule_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("subject", sa.String(128), nullable=False),
        sa.Column("alert_id", sa.String(128), nullable=False),
        sa.Column("title", sa.String(200), nullable=False),
        sa.Column("opened_at", sa.Float(), nullable=False),
        sa.Column("opened_step", sa.BigInteger(), nullable=True),
        sa.Column("resolved_at", sa.Float(), nullable=True),
        sa.Column("resolved_step", sa.BigInteger(), nullable=True),
    )
    op.create_index("ix_alert_episodes_run", "alert_episodes", ["run_id", "id"])
    op.create_table(
        "webhooks",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("format", sa.String(8), nullable=False),
        sa.Column("secret", sa.String(64), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_webhooks_project", "webhooks", ["project_id"])
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", _ROW_ID, primary_key=True),
        sa.Column("webhook_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("alert_id", sa.String(128), nullable=False),
        sa.Column("event", sa.String(16), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("state", sa.String(10), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_at", sa.Float(), nullable=False),
        sa.Column("last_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.String(1024), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("finished_at", sa.Float(), nullable=True),
    )
    op.create_index("ix_webhook_deliveries_due", "webhook_deliveries", ["state", "next_at"])
    op.create_index("ix_webhook_deliveries_webhook", "webhook_deliveries", ["webhook_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_webhook_deliveries_webhook", "webhook_deliveries")
    op.drop_index("ix_webhook_deliveries_due", "webhook_deliveries")
    op.drop_table("webhook_deliveries")
    op.drop_index("ix_webhooks_project", "webhooks")
    op.drop_table("webhooks")
    op.drop_index("ix_alert_episodes_run", "alert_episodes")
    op.drop_table("alert_episodes")
    op.drop_table("alert_watches")
    op.drop_table("alert_rule_versions")
    op.drop_index("ix_alert_rules_project", "alert_rules")
    op.drop_table("alert_rules")
