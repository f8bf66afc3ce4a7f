"""Who may see what: accounts, sessions, personal API keys, project visibility and
members, share links, and failed sign-ins for rate limiting. Existing projects become
public, so a dashboard that served them keeps serving them.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("projects") as batch:
        batch.add_column(
            sa.Column("visibility", sa.String(8), nullable=False, server_default="public")
        )
        batch.add_column(sa.Column("public_logs", sa.Boolean(), nullable=False, server_default="0"))
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("login", sa.String(320), nullable=False, unique=True),
        sa.Column("email", sa.String(320), nullable=True),
        sa.Column("display_name", sa.String(200), nullable=True),
        sa.Column("password_hash", sa.String(256), nullable=True),
        sa.Column("is_admin", sa.Boolean(), nullable=False, server_default="0"),
        sa.Column("disabled_at", sa.Float(), nullable=True),
        sa.Column("oidc_issuer", sa.String(512), nullable=True),
        sa.Column("oidc_subject", sa.String(255), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.UniqueConstraint("oidc_issuer", "oidc_subject", name="uq_users_oidc_identity"),
    )
    op.create_table(
        "sessions",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("user_id", sa.Integer(), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("revoked_at", sa.Float(), nullable=True),
    )
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("user_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("scope", sa.String(8), nullable=False, server_default="write"))
        batch.add_column(sa.Column("revoked_at", sa.Float(), nullable=True))
        batch.create_foreign_key("fk_api_keys_user_id_users", "users", ["user_id"], ["id"])
    op.create_table(
        "memberships",
        sa.Column("project_id", sa.Integer(), sa.ForeignKey("projects.id"), primary_key=True),
        sa.Column("user_id", sa.Integer(), sa.ForeignKey("users.id"), primary_key=True),
        sa.Column("role", sa.String(8), nullable=False),
        sa.Column("content", sa.Boolean(), nullable=False, server_default="0"),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "share_links",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_by", sa.Integer(), sa.ForeignKey("users.id"), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=True),
        sa.Column("revoked_at", sa.Float(), nullable=True),
    )
    op.create_table(
        "sign_in_failures",
        sa.Column("id", _ID, primary_key=True),
        sa.Column("subject", sa.String(400), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
    )
    op.create_index("ix_sign_in_failures_subject", "sign_in_failures", ["subject", "at"])


def downgrade() -> None:
    op.drop_index("ix_sign_in_failures_subject", "sign_in_failures")
    for table in ("sign_in_failures", "share_links", "memberships"):
        op.drop_table(table)
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_constraint("fk_api_keys_user_id_users", type_="foreignkey")
        batch.drop_column("revoked_at")
        batch.drop_column("scope")
        batch.drop_column("user_id")
    op.drop_table("sessions")
    op.drop_table("users")
    with op.batch_alter_table("projects") as batch:
        batch.drop_column("public_logs")
        batch.drop_column("visibility")
