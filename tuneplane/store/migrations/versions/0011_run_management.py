"""Managing runs: display names, groups, notes and tags; deletion marks.

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("display_name", sa.String(200), nullable=True))
    op.add_column("runs", sa.Column("run_group", sa.String(128), nullable=True))
    op.add_column("runs", sa.Column("note", sa.Text(), nullable=True))
    op.add_column("runs", sa.Column("deleted_at", sa.Float(), nullable=True))
    op.add_column("projects", sa.Column("deleted_at", sa.Float(), nullable=True))
    op.create_table(
        "run_tags",
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("tag", sa.String(64), primary_key=True),
    )
    op.create_index("ix_run_tags_tag", "run_tags", ["tag", "run_id"])
    op.create_index("ix_runs_project_created", "runs", ["project_id", "created_at"])
    op.create_index("ix_runs_project_group", "runs", ["project_id", "run_group"])


def downgrade() -> None:
    op.drop_index("ix_runs_project_group", "runs")
    op.drop_index("ix_runs_project_created", "runs")
    op.drop_index("ix_run_tags_tag", "run_tags")
    op.drop_table("run_tags")
    with op.batch_alter_table("projects") as batch:
        batch.drop_column("deleted_at")
    with op.batch_alter_table("runs") as batch:
        for column in ("deleted_at", "note", "run_group", "display_name"):
            batch.drop_column(column)
