"""Points move into per-series blocks: rollups in ``point_blocks``, packed arrays in
``point_block_data``; the row-per-point table is converted and dropped.

Revision ID: 0004
Revises: 0003
"""

from array import array
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

# The layout of tuneplane/store/blocks.py as of this revision, written out so that later
# changes there cannot change what this migration does.
_BLOCK_POINTS = 512


def _pack(typecode: str, items: list[Any]) -> bytes:
    packed = array(typecode, items)
    if array("H", [1]).tobytes() != b"\x01\x00":
        packed.byteswap()
    return packed.tobytes()


def _blocks(
    rows: list[tuple[int, int, float, float]],
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    start = 0
    while start < len(rows):
        end = min(start + _BLOCK_POINTS, len(rows))
        while end < len(rows) and rows[end][0] == rows[end - 1][0]:
            end += 1
        part = rows[start:end]
        values = [row[2] for row in part]
        rollup = {
            "first_step": part[0][0],
            "last_step": part[-1][0],
            "count": len(part),
            "min_value": min(values),
            "max_value": max(values),
            "sum_value": sum(values),
            "last_value": values[-1],
            "last_time": part[-1][3],
        }
        data = {
            "first_step": part[0][0],
            "steps": _pack("q", [row[0] for row in part]),
            "events": _pack("q", [row[1] for row in part]),
            "vals": _pack("d", values),
            "times": _pack("d", [row[3] for row in part]),
        }
        yield rollup, data
        start = end


def upgrade() -> None:
    blocks = op.create_table(
        "point_blocks",
        sa.Column("metric_id", sa.Integer(), primary_key=True),
        sa.Column("first_step", sa.BigInteger(), primary_key=True),
        sa.Column("last_step", sa.BigInteger(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("min_value", sa.Float(), nullable=False),
        sa.Column("max_value", sa.Float(), nullable=False),
        sa.Column("sum_value", sa.Float(), nullable=False),
        sa.Column("last_value", sa.Float(), nullable=False),
        sa.Column("last_time", sa.Float(), nullable=False),
        sqlite_with_rowid=False,
    )
    block_data = op.create_table(
        "point_block_data",
        sa.Column("metric_id", sa.Integer(), primary_key=True),
        sa.Column("first_step", sa.BigInteger(), primary_key=True),
        sa.Column("steps", sa.LargeBinary(), nullable=False),
        sa.Column("events", sa.LargeBinary(), nullable=False),
        sa.Column("vals", sa.LargeBinary(), nullable=False),
        sa.Column("times", sa.LargeBinary(), nullable=False),
    )
    connection = op.get_bind()
    if connection.dialect.name == "postgresql":
        # Packed numbers hardly compress, and compressing them again on every append costs
        # PostgreSQL more CPU than the rest of the write: store them out of line, as they are.
        for column in ("steps", "events", "vals", "times"):
            op.execute(f"ALTER TABLE point_block_data ALTER COLUMN {column} SET STORAGE EXTERNAL")
    points = sa.table(
        "points",
        sa.column("metric_id", sa.Integer()),
        sa.column("step", sa.BigInteger()),
        sa.column("event_id", sa.BigInteger()),
        sa.column("value", sa.Float()),
        sa.column("time", sa.Float()),
    )
    series = connection.execute(sa.select(points.c.metric_id).distinct()).scalars().all()
    for metric_id in series:
        rows = connection.execute(
            sa.select(points.c.step, points.c.event_id, points.c.value, points.c.time)
            .where(points.c.metric_id == metric_id)
            .order_by(points.c.step, points.c.event_id)
        ).all()
        converted = list(_blocks(list(rows)))
        if converted:
            connection.execute(
                blocks.insert(), [{"metric_id": metric_id, **rollup} for rollup, _ in converted]
            )
            connection.execute(
                block_data.insert(), [{"metric_id": metric_id, **data} for _, data in converted]
            )
    op.drop_table("points")


def _unpack(typecode: str, data: bytes) -> list[Any]:
    items = array(typecode)
    items.frombytes(data)
    if array("H", [1]).tobytes() != b"\x01\x00":
        items.byteswap()
    return items.tolist()


def downgrade() -> None:
    points = op.create_table(
        "points",
        sa.Column("metric_id", sa.Integer(), primary_key=True),
        sa.Column("step", sa.BigInteger(), primary_key=True),
        sa.Column("event_id", sa.BigInteger(), primary_key=True),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("time", sa.Float(), nullable=False),
        sqlite_with_rowid=False,
    )
    connection = op.get_bind()
    blocks = connection.exec_driver_sql(
        "SELECT metric_id, steps, events, vals, times FROM point_block_data"
    ).all()
    for metric_id, steps, events, values, times in blocks:
        rows = zip(
            _unpack("q", steps),
            _unpack("q", events),
            _unpack("d", values),
            _unpack("d", times),
            strict=True,
        )
        connection.execute(
            points.insert(),
            [
                {"metric_id": metric_id, "step": s, "event_id": e, "value": v, "time": t}
                for s, e, v, t in rows
            ],
        )
    op.drop_table("point_block_data")
    op.drop_table("point_blocks")
