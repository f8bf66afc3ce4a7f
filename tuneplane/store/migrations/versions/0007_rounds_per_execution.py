"""An evaluation round is (run, execution attempt, round_id): declarations, current outcomes
and tallies gain the execution attempt in their keys, so a restarted execution's round never
merges with or supersedes an earlier execution's.

How existing data is carried over (docs/evaluation.md, "Upgrading"):

- ``trial_results`` already held each terminal attempt with the execution attempt that
  reported it (its key is unchanged), so every attempt stays where it was.
- ``trial_current`` and ``round_tallies`` are derived data: rebuilt from ``trial_results``,
  per execution attempt (the highest trial attempt of each trial within its execution wins).
- ``eval_rounds``: a declaration belongs to the execution attempt whose token sent it, which
  the stored population event records. Each execution attempt's first population event of a
  round becomes that execution's declaration; this includes declarations a restarted
  execution sent before the upgrade, which were answered ``new`` but ignored. A declaration
  with no stored event (not written by this server) goes to the lowest execution attempt
  that reported results in its round, or to attempt 1.

Revision ID: 0007
Revises: 0006
"""

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_DIGESTS = ("dataset", "cohort", "verifier", "settings")
_OBSERVATIONS = sa.table(
    "observations",
    sa.column("id", sa.Integer()),
    sa.column("run_id", sa.Integer()),
    sa.column("attempt", sa.Integer()),
    sa.column("type", sa.String()),
    sa.column("body", sa.JSON()),
    sa.column("received_at", sa.Float()),
)


def _declaration_columns() -> list[sa.Column[Any]]:
    return [
        sa.Column("expected", sa.BigInteger(), nullable=False),
        *(sa.Column(name, sa.String(64), nullable=True) for name in _DIGESTS),
        sa.Column("task_name", sa.String(1024), nullable=True),
        sa.Column("task_version", sa.String(1024), nullable=True),
        sa.Column("declared_at", sa.Float(), nullable=False),
    ]


def _declarations(connection: sa.Connection) -> list[dict[str, Any]]:
    """Each execution attempt's first declaration of each round (see the module's text)."""
    found: dict[tuple[int, int, str], dict[str, Any]] = {}
    events = (
        sa.select(_OBSERVATIONS)
        .where(_OBSERVATIONS.c.type == "population")
        .order_by(_OBSERVATIONS.c.id)
    )
    for event in connection.execute(events):
        body = event.body or {}
        key = (int(event.run_id), int(event.attempt), str(body.get("round_id")))
        if key in found or not body.get("round_id"):
            continue
        digests = body.get("digests") or {}
        task = body.get("task") or {}
        found[key] = {
            "run_id": key[0],
            "execution_attempt": key[1],
            "round_id": key[2],
            "expected": int(body["expected"]),
            **{name: digests.get(name) for name in _DIGESTS},
            "task_name": task.get("name"),
            "task_version": task.get("version"),
            "declared_at": float(event.received_at),
        }
    declared = {(run, round_id) for run, _, round_id in found}
    old = connection.execute(sa.text("SELECT * FROM eval_rounds")).mappings().all()
    for old_row in old:
        row: dict[str, Any] = dict(old_row)
        if (row["run_id"], row["round_id"]) in declared:
            continue
        lowest = connection.execute(
            sa.text(
                "SELECT MIN(execution_attempt) FROM trial_results "
                "WHERE run_id = :run AND round_id = :round"
            ),
            {"run": row["run_id"], "round": row["round_id"]},
        ).scalar()
        found[(row["run_id"], lowest or 1, row["round_id"])] = {
            **row,
            "execution_attempt": lowest or 1,
        }
    return list(found.values())


def upgrade() -> None:
    connection = op.get_bind()
    declarations = _declarations(connection)
    op.drop_index("ix_trial_current_status", table_name="trial_current")
    for table in ("eval_rounds", "trial_current", "round_tallies"):
        op.drop_table(table)
    rounds = op.create_table(
        "eval_rounds",
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("execution_attempt", sa.Integer(), primary_key=True),
        sa.Column("round_id", sa.String(128), primary_key=True),
        *_declaration_columns(),
    )
    if declarations:
        op.bulk_insert(rounds, declarations)
    op.create_table(
        "trial_current",
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("execution_attempt", sa.Integer(), primary_key=True),
        sa.Column("round_id", sa.String(128), primary_key=True),
        sa.Column("trial_id", sa.String(128), primary_key=True),
        sa.Column("trial_attempt", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("eligible", sa.Boolean(), nullable=False),
        sa.Column("reward", sa.Float(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
    )
    op.create_index(
        "ix_trial_current_status",
        "trial_current",
        ["run_id", "execution_attempt", "round_id", "status", "trial_id"],
    )
    op.create_table(
        "round_tallies",
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("execution_attempt", sa.Integer(), primary_key=True),
        sa.Column("round_id", sa.String(128), primary_key=True),
        sa.Column("status", sa.String(16), primary_key=True),
        sa.Column("count", sa.BigInteger(), nullable=False),
    )
    _rebuild_current(connection)


def _rebuild_current(connection: sa.Connection) -> None:
    keys = "run_id, execution_attempt, round_id, trial_id"
    connection.execute(
        sa.text(
            f"INSERT INTO trial_current ({keys}, trial_attempt, status, eligible, reward, "
            "attempts) "
            "SELECT r.run_id, r.execution_attempt, r.round_id, r.trial_id, r.trial_attempt, "
            "r.status, r.eligible, r.reward, top.n FROM trial_results r JOIN ("
            f"SELECT {keys}, MAX(trial_attempt) AS best, COUNT(*) AS n FROM trial_results "
            f"GROUP BY {keys}) top ON r.run_id = top.run_id "
            "AND r.execution_attempt = top.execution_attempt AND r.round_id = top.round_id "
            "AND r.trial_id = top.trial_id AND r.trial_attempt = top.best"
        )
    )
    connection.execute(
        sa.text(
            "INSERT INTO round_tallies (run_id, execution_attempt, round_id, status, count) "
            "SELECT run_id, execution_attempt, round_id, status, COUNT(*) FROM trial_current "
            "GROUP BY run_id, execution_attempt, round_id, status"
        )
    )


def downgrade() -> None:
    raise NotImplementedError(
        "0007 cannot be undone: rounds of different execution attempts would merge"
    )
