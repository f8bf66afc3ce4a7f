"""The SQL schema, in SQLAlchemy Core. Migrations in ``store/migrations`` build exactly this.

Times are UNIX seconds (float); steps are signed 64-bit integers.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

projects = Table(
    "projects",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(128), nullable=False, unique=True),
    Column("created_at", Float, nullable=False),
)

runs = Table(
    "runs",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("project_id", Integer, ForeignKey("projects.id"), nullable=False),
    Column("name", String(128), nullable=False),
    Column("config", JSON, nullable=True),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
    Column("last_step", BigInteger, nullable=True),
    Column("point_count", BigInteger, nullable=False, server_default="0"),
    Column("alert_count", Integer, nullable=False, server_default="0"),
    UniqueConstraint("project_id", "name", name="uq_runs_project_name"),
)

# One row per series and run, its summary maintained during ingest.
metrics = Table(
    "metrics",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, ForeignKey("runs.id"), nullable=False),
    Column("name", String(128), nullable=False),
    Column("count", BigInteger, nullable=False),
    Column("invalid_count", BigInteger, nullable=False, server_default="0"),
    Column("min_value", Float, nullable=True),
    Column("max_value", Float, nullable=True),
    Column("last_value", Float, nullable=True),
    Column("first_step", BigInteger, nullable=False),
    Column("last_step", BigInteger, nullable=False),
    UniqueConstraint("run_id", "name", name="uq_metrics_run_name"),
)

# Arena log events: immutable, keyed by log_id within a run.
events = Table(
    "events",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("run_id", Integer, ForeignKey("runs.id"), nullable=False),
    Column("log_id", String(128), nullable=False),
    Column("step", BigInteger, nullable=False),
    Column("received_at", Float, nullable=False),
    UniqueConstraint("run_id", "log_id", name="uq_events_run_log"),
)

# One row per point; the primary key clusters a series by step (SQLite WITHOUT ROWID).
# No foreign keys: per-row checks would double the cost of the hottest insert, and only
# store/points.py writes here, with ids it has just read from metrics and events.
points = Table(
    "points",
    metadata,
    Column("metric_id", Integer, primary_key=True),
    Column("step", BigInteger, primary_key=True),
    Column("event_id", BigInteger, primary_key=True),
    Column("value", Float, nullable=False),
    Column("time", Float, nullable=False),
    sqlite_with_rowid=False,
)

alerts = Table(
    "alerts",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("run_id", Integer, ForeignKey("runs.id"), nullable=False),
    Column("alert_id", String(128), nullable=False),
    Column("title", String(200), nullable=False),
    Column("text", Text, nullable=True),
    Column("level", String(8), nullable=False),
    Column("step", BigInteger, nullable=True),
    Column("received_at", Float, nullable=False),
    UniqueConstraint("run_id", "alert_id", name="uq_alerts_run_alert"),
)

Index("ix_alerts_run_received", alerts.c.run_id, alerts.c.id)
