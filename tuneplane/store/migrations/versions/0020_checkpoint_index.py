"""A partial index of the ``evaluation/checkpoint`` events by run: the runs list finds each
run's latest evaluated checkpoint with one seek, however many other events the run has.

Revision ID: 0020
Revises: 0019
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

#: contract.observations.CHECKPOINT_EVENT, as it was when this migration was written.
_WHERE = sa.text("name = 'evaluation/checkpoint'")


def upgrade() -> None:
    op.create_index(
        "ix_observations_checkpoints",
        "observations",
        ["run_id", "id"],
        sqlite_where=_WHERE,
        postgresql_where=_WHERE,
    )


def downgrade() -> None:
    op.drop_index("ix_observations_checkpoints", table_name="observations")
