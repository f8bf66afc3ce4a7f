"""The SQL schema, in SQLAlchemy Core. Migrations in ``store/migrations`` build exactly this.

Times are UNIX seconds (float); steps are signed 64-bit integers.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
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
    # Points replaced or removed by SDK corrections: a live view that sees it move reloads.
    Column("corrected", BigInteger, nullable=False, server_default="0"),
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

# A series' points in blocks (store/blocks.py): the rollups of each block here, dense so a
# chart scans many to a page, and its packed arrays in point_block_data under the same key.
# No foreign keys: only store/points.py writes here, with ids it has just read from metrics.
point_blocks = Table(
    "point_blocks",
    metadata,
    Column("metric_id", Integer, primary_key=True),
    Column("first_step", BigInteger, primary_key=True),
    Column("last_step", BigInteger, nullable=False),
    Column("count", Integer, nullable=False),
    Column("min_value", Float, nullable=False),
    Column("max_value", Float, nullable=False),
    Column("sum_value", Float, nullable=False),
    Column("last_value", Float, nullable=False),
    Column("last_time", Float, nullable=False),
    sqlite_with_rowid=False,
)

point_block_data = Table(
    "point_block_data",
    metadata,
    Column("metric_id", Integer, primary_key=True),
    Column("first_step", BigInteger, primary_key=True),
    Column("steps", LargeBinary, nullable=False),
    Column("events", LargeBinary, nullable=False),
    Column("vals", LargeBinary, nullable=False),
    Column("times", LargeBinary, nullable=False),
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

# Run lifecycle and transport health (SDK runs); Arena runs leave them null: unknown.
runs.append_column(Column("status", String(16), nullable=True))
runs.append_column(Column("exit_code", Integer, nullable=True))
runs.append_column(Column("attempt_count", Integer, nullable=False, server_default="0"))
runs.append_column(Column("health", JSON, nullable=True))
runs.append_column(Column("health_at", Float, nullable=True))

# User API keys; only the SHA-256 of a key is stored.
api_keys = Table(
    "api_keys",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(128), nullable=False),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("created_at", Float, nullable=False),
)

# One execution attempt of a run, with the hash of its ingest token.
attempts = Table(
    "attempts",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, ForeignKey("runs.id"), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("status", String(16), nullable=True),
    Column("exit_code", Integer, nullable=True),
    Column("started_at", Float, nullable=False),
    Column("ended_at", Float, nullable=True),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("token_expires_at", Float, nullable=False),
    # The caller's Idempotency-Key: a retried start returns the same attempt.
    Column("request_key", String(128), nullable=True),
    # The attempt's own config, when its init() gave one: a resumed run keeps the run's.
    Column("config", JSON, nullable=True),
    UniqueConstraint("run_id", "attempt", name="uq_attempts_run_attempt"),
    UniqueConstraint("run_id", "request_key", name="uq_attempts_run_request_key"),
)

# Live log lines; ``id`` is the run's read cursor, (attempt, seq) makes retries harmless.
log_lines = Table(
    "log_lines",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("run_id", Integer, ForeignKey("runs.id"), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("stream", String(8), nullable=False),
    Column("time", Float, nullable=False),
    Column("text", Text, nullable=False),
    Column("data", LargeBinary, nullable=True),
    UniqueConstraint("run_id", "attempt", "seq", name="uq_log_lines_run_attempt_seq"),
)

Index("ix_log_lines_run_cursor", log_lines.c.run_id, log_lines.c.id)

# Steps at which a series reported NaN or an infinity: shown and counted, never a number.
invalid_points = Table(
    "invalid_points",
    metadata,
    Column("metric_id", Integer, primary_key=True),
    Column("step", BigInteger, primary_key=True),
    Column("kind", String(4), nullable=False),
    sqlite_with_rowid=False,
)

# Observation events: immutable, keyed by event_id within a run (across attempts).
observations = Table(
    "observations",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("run_id", Integer, ForeignKey("runs.id"), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("event_id", String(128), nullable=False),
    Column("type", String(16), nullable=False),
    Column("name", String(128), nullable=True),
    Column("step", BigInteger, nullable=True),
    Column("body", JSON, nullable=False),
    Column("received_at", Float, nullable=False),
    UniqueConstraint("run_id", "event_id", name="uq_observations_run_event"),
)

# Health snapshots stay findable whatever the recent-event window holds.
Index("ix_observations_run_type", observations.c.run_id, observations.c.type, observations.c.id)
# Each run's latest evaluation/checkpoint event in one seek (the runs list's checkpoint).
_CHECKPOINTS = text("name = 'evaluation/checkpoint'")
Index(
    "ix_observations_checkpoints",
    observations.c.run_id,
    observations.c.id,
    sqlite_where=_CHECKPOINTS,
    postgresql_where=_CHECKPOINTS,
)

# Evaluation population declarations: the first accepted wins. A round is (run, execution
# attempt, round_id): a restarted execution declares and reports its own round.
eval_rounds = Table(
    "eval_rounds",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id"), primary_key=True),
    Column("execution_attempt", Integer, primary_key=True),
    Column("round_id", String(128), primary_key=True),
    Column("expected", BigInteger, nullable=False),
    Column("dataset", String(64), nullable=True),
    Column("cohort", String(64), nullable=True),
    Column("verifier", String(64), nullable=True),
    Column("settings", String(64), nullable=True),
    Column("task_name", String(1024), nullable=True),
    Column("task_version", String(1024), nullable=True),
    # Trials of the round that keep their text, when the job set its own cap.
    Column("text_samples", BigInteger, nullable=True),
    Column("declared_at", Float, nullable=False),
    # False: the producer gives rewards, no verdicts (NULL, as before 0016: it gives them).
    Column("verdicts", Boolean, nullable=True),
)

# Every terminal trial attempt, immutable.
trial_results = Table(
    "trial_results",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id"), primary_key=True),
    Column("round_id", String(128), primary_key=True),
    Column("trial_id", String(128), primary_key=True),
    Column("execution_attempt", Integer, primary_key=True),
    Column("trial_attempt", BigInteger, primary_key=True),
    Column("status", String(16), nullable=False),
    Column("eligible", Boolean, nullable=False),
    Column("reward", Float, nullable=True),
    Column("error_type", String(1024), nullable=True),
    Column("received_at", Float, nullable=False),
    # Why the attempt has its status (an importer's mapping rule): code and sentence.
    Column("reason_code", String(128), nullable=True),
    Column("reason", String(1024), nullable=True),
)

# Each trial's current outcome in its round: its highest trial attempt, maintained at ingest
# so counts and filtered pages over 100,000 trials stay index reads.
trial_current = Table(
    "trial_current",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id"), primary_key=True),
    Column("execution_attempt", Integer, primary_key=True),
    Column("round_id", String(128), primary_key=True),
    Column("trial_id", String(128), primary_key=True),
    Column("trial_attempt", BigInteger, nullable=False),
    Column("status", String(16), nullable=False),
    Column("eligible", Boolean, nullable=False),
    Column("reward", Float, nullable=True),
    Column("attempts", Integer, nullable=False),
)

Index(
    "ix_trial_current_status",
    trial_current.c.run_id,
    trial_current.c.execution_attempt,
    trial_current.c.round_id,
    trial_current.c.status,
    trial_current.c.trial_id,
)

# Current outcomes per status of each round, kept at ingest: counts are read, never scanned.
round_tallies = Table(
    "round_tallies",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id"), primary_key=True),
    Column("execution_attempt", Integer, primary_key=True),
    Column("round_id", String(128), primary_key=True),
    Column("status", String(16), primary_key=True),
    Column("count", BigInteger, nullable=False),
)

# --- who may see what (docs/access.md) ----------------------------------------------------

# A project is public or private; existing projects became public on upgrade.
projects.append_column(Column("visibility", String(8), nullable=False, server_default="public"))
# Whether a public project shows its runs' stdout/stderr to non-members.
projects.append_column(Column("public_logs", Boolean, nullable=False, server_default="0"))
# The name people gave the project (any printable text; its ID is derived from it by
# contract.ids.id_for_name), kept from its creation; None when the name was its ID.
projects.append_column(Column("display_name", String(256), nullable=True))

# People: local accounts (a password hash) or single sign-on (issuer and subject).
users = Table(
    "users",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("login", String(320), nullable=False, unique=True),
    Column("email", String(320), nullable=True),
    Column("display_name", String(200), nullable=True),
    # argon2id, in the library's own encoded form (algorithm, parameters, salt, hash).
    Column("password_hash", String(256), nullable=True),
    Column("is_admin", Boolean, nullable=False, server_default="0"),
    Column("disabled_at", Float, nullable=True),
    Column("oidc_issuer", String(512), nullable=True),
    Column("oidc_subject", String(255), nullable=True),
    Column("created_at", Float, nullable=False),
    UniqueConstraint("oidc_issuer", "oidc_subject", name="uq_users_oidc_identity"),
)

# Signed-in browser sessions, revocable on the server: only the token's hash is kept.
sessions = Table(
    "sessions",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("user_id", Integer, ForeignKey("users.id"), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
    Column("revoked_at", Float, nullable=True),
)

# A user's personal API keys (the admin key has no user: it is the site administrator's).
api_keys.append_column(Column("user_id", Integer, ForeignKey("users.id"), nullable=True))
# "read", or "write" (read and write).
api_keys.append_column(Column("scope", String(8), nullable=False, server_default="write"))
api_keys.append_column(Column("revoked_at", Float, nullable=True))

# Who belongs to a project, in which role; ``content`` lets them read trajectory bodies.
memberships = Table(
    "memberships",
    metadata,
    Column("project_id", Integer, ForeignKey("projects.id"), primary_key=True),
    Column("user_id", Integer, ForeignKey("users.id"), primary_key=True),
    Column("role", String(8), nullable=False),
    Column("content", Boolean, nullable=False, server_default="0"),
    Column("created_at", Float, nullable=False),
)

# Read-only links to one run: the token's hash, who made it, until when.
share_links = Table(
    "share_links",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, ForeignKey("runs.id"), nullable=False),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("created_by", Integer, ForeignKey("users.id"), nullable=True),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=True),
    Column("revoked_at", Float, nullable=True),
)

# Failed sign-ins, by account and by address, for rate limiting across server processes.
sign_in_failures = Table(
    "sign_in_failures",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("subject", String(400), nullable=False),
    Column("at", Float, nullable=False),
)

Index("ix_sign_in_failures_subject", sign_in_failures.c.subject, sign_in_failures.c.at)

# The trajectory index: one row per trajectory identity of a run's execution attempt,
# whatever happened to its body. ``body_state``: ``stored`` (in blob storage under
# ``body_key``), ``not_retained`` (the round's text cap chose other trials), ``expired``
# or ``deleted`` (``removed_at`` says when). A row whose state is not ``stored`` but
# still has a ``body_key`` has a body waiting for physical deletion.
trajectories = Table(
    "trajectories",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("run_id", Integer, ForeignKey("runs.id"), nullable=False),
    Column("attempt", Integer, nullable=False),
    # "evaluation/<round>/<trial>/<trial attempt>" or "training/<step>/<trajectory id>".
    Column("identity", String(400), nullable=False),
    Column("scope", String(10), nullable=False),
    Column("round_id", String(128), nullable=True),
    Column("trial_id", String(128), nullable=True),
    Column("trial_attempt", BigInteger, nullable=True),
    # Signed 64-bit: the lowest ranks of a round keep their text.
    Column("selection_rank", BigInteger, nullable=True),
    Column("step", BigInteger, nullable=True),
    Column("trajectory_id", String(128), nullable=True),
    Column("category", String(16), nullable=True),
    Column("diagnostic", String(16), nullable=True),
    Column("reward", Float, nullable=True),
    Column("reward_invalid", Boolean, nullable=False),
    # The reward functions that gave a rollout no reward (its reward is the others' sum).
    Column("reward_missing", JSON(none_as_null=True), nullable=True),
    Column("collection_policy", String(1024), nullable=True),
    Column("consumption_policy", String(1024), nullable=True),
    Column("message_count", Integer, nullable=False),
    Column("total_messages", BigInteger, nullable=False),
    Column("complete", Boolean, nullable=False),
    Column("capture_policy", String(8), nullable=False),
    Column("digest", String(64), nullable=False),
    Column("bytes", Integer, nullable=False),
    Column("body_state", String(16), nullable=False),
    Column("body_key", String(256), nullable=True),
    Column("received_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
    Column("removed_at", Float, nullable=True),
    UniqueConstraint("run_id", "attempt", "identity", name="uq_trajectories_identity"),
)
Index(
    "ix_trajectories_rollouts",
    trajectories.c.run_id,
    trajectories.c.scope,
    trajectories.c.category,
    trajectories.c.step,
    trajectories.c.id,
)
# The step picker, and a category's rows in ID order (the browser's pages) without a sort.
Index("ix_trajectories_steps", trajectories.c.run_id, trajectories.c.scope, trajectories.c.step,
      trajectories.c.id)  # fmt: skip
Index("ix_trajectories_categories", trajectories.c.run_id, trajectories.c.scope,
      trajectories.c.category, trajectories.c.id)  # fmt: skip
Index(
    "ix_trajectories_round",
    trajectories.c.run_id,
    trajectories.c.attempt,
    trajectories.c.round_id,
    trajectories.c.selection_rank,
)
Index("ix_trajectories_expiry", trajectories.c.body_state, trajectories.c.expires_at)

# Bodies written to blob storage whose index rows have not committed yet: what a crash
# between the two leaves behind, for the sweeper to delete.
# Trajectories a blob store refused (the batch answered 503): counted on their round until
# a re-send stores them.
unstored_trajectories = Table(
    "unstored_trajectories",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id"), primary_key=True),
    Column("attempt", Integer, primary_key=True),
    Column("identity", String(400), primary_key=True),
    Column("round_id", String(128), nullable=True),
    Column("step", BigInteger, nullable=True),
    Column("failed_at", Float, nullable=False),
)

pending_bodies = Table(
    "pending_bodies",
    metadata,
    Column("body_key", String(256), primary_key=True),
    Column("created_at", Float, nullable=False),
)

# What each sweep of trajectory bodies removed.
body_sweeps = Table(
    "body_sweeps",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("at", Float, nullable=False),
    Column("expired", Integer, nullable=False),
    Column("deleted_bodies", Integer, nullable=False),
    Column("bytes", BigInteger, nullable=False),
    Column("failures", Integer, nullable=False),
)

# Failure diagnoses of execution attempts: the rules' findings (and, when configured, a
# written explanation), or why the diagnosis itself failed. A run's status never depends
# on them.
diagnoses = Table(
    "diagnoses",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, ForeignKey("runs.id"), nullable=False),
    Column("attempt", Integer, nullable=False),
    # "failed" (the attempt ended so), "lost" (its heartbeat stopped) or "rerun".
    Column("trigger", String(8), nullable=False),
    # "running", "done" or "failed".
    Column("state", String(8), nullable=False),
    Column("findings", JSON, nullable=True),
    Column("error", String(1024), nullable=True),
    # The optional language model's: {"state", "model", "text" or "error"}.
    Column("explanation", JSON, nullable=True),
    # How much of the attempt's log the findings rest on (LogExtent.to_json()).
    Column("log", JSON, nullable=True),
    Column("created_at", Float, nullable=False),
    Column("finished_at", Float, nullable=True),
)
Index("ix_diagnoses_run", diagnoses.c.run_id, diagnoses.c.id)

# --- managing runs (docs/api.md, "Managing runs") -----------------------------------------

# What people say about a run: a display name (its ID, the address, never changes), the
# group of runs it belongs to (a sweep, a seed set) and a note. Tags are in run_tags.
runs.append_column(Column("display_name", String(256), nullable=True))
runs.append_column(Column("run_group", String(128), nullable=True))
runs.append_column(Column("note", Text, nullable=True))
# A deleted run or project: its name is given up at once (it becomes "~deleted~<id>") and
# reads answer 404; its rows are purged in the background, batch by batch (store/purge.py).
runs.append_column(Column("deleted_at", Float, nullable=True))
projects.append_column(Column("deleted_at", Float, nullable=True))

run_tags = Table(
    "run_tags",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id"), primary_key=True),
    Column("tag", String(64), primary_key=True),
)
Index("ix_run_tags_tag", run_tags.c.tag, run_tags.c.run_id)
# The runs list: a project's runs in creation order, and its groups.
Index("ix_runs_project_created", runs.c.project_id, runs.c.created_at)
Index("ix_runs_project_group", runs.c.project_id, runs.c.run_group)

# --- server-side alert rules and webhooks (docs/alerts.md) --------------------------------
# No foreign keys, as with the point blocks: only store/alert_rules.py and store/webhooks.py
# write here, with ids they have just read.

# A rule of a project, or of one of its runs (run_id); ``spec`` is its wire form.
alert_rules = Table(
    "alert_rules",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("project_id", Integer, nullable=False),
    Column("run_id", Integer, nullable=True),
    Column("kind", String(16), nullable=False),
    Column("enabled", Boolean, nullable=False),
    Column("spec", JSON, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=False),
)
Index("ix_alert_rules_project", alert_rules.c.project_id, alert_rules.c.id)

# Bumped by every change of a project's rules: each server process compares it with the
# rules it holds in memory.
alert_rule_versions = Table(
    "alert_rule_versions",
    metadata,
    Column("project_id", Integer, primary_key=True),
    Column("version", BigInteger, nullable=False),
)

# What a rule watches in a run: a series (``subject`` is its name) or the run (""); the
# episode open on it, if any. The row is locked while an episode opens or resolves.
alert_watches = Table(
    "alert_watches",
    metadata,
    Column("rule_id", Integer, primary_key=True),
    Column("run_id", Integer, primary_key=True),
    Column("subject", String(128), primary_key=True),
    Column("episode_id", BigInteger, nullable=True),
    Column("changed_at", Float, nullable=False),
)

# Every episode of a rule on a run: from the alert that opened it to its resolution.
alert_episodes = Table(
    "alert_episodes",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("rule_id", Integer, nullable=False),
    Column("run_id", Integer, nullable=False),
    Column("subject", String(128), nullable=False),
    Column("alert_id", String(128), nullable=False),
    Column("title", String(200), nullable=False),
    Column("opened_at", Float, nullable=False),
    Column("opened_step", BigInteger, nullable=True),
    Column("resolved_at", Float, nullable=True),
    Column("resolved_step", BigInteger, nullable=True),
)
Index("ix_alert_episodes_run", alert_episodes.c.run_id, alert_episodes.c.id)

# A project's webhooks. The secret signs each body (HMAC-SHA256), so it is kept as it is.
webhooks = Table(
    "webhooks",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("project_id", Integer, nullable=False),
    Column("name", String(128), nullable=False),
    Column("url", String(2048), nullable=False),
    Column("format", String(8), nullable=False),
    Column("secret", String(64), nullable=False),
    Column("created_at", Float, nullable=False),
)
Index("ix_webhooks_project", webhooks.c.project_id)

# The delivery log and queue: one row per (webhook, alert event), its exact body, and what
# became of each attempt. ``state``: pending, sending (claimed until next_at), delivered
# or failed (every attempt used).
webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("webhook_id", Integer, nullable=False),
    Column("run_id", Integer, nullable=False),
    Column("alert_id", String(128), nullable=False),
    Column("event", String(16), nullable=False),
    Column("body", Text, nullable=False),
    Column("state", String(10), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("next_at", Float, nullable=False),
    Column("last_status", Integer, nullable=True),
    Column("last_error", String(1024), nullable=True),
    Column("created_at", Float, nullable=False),
    Column("finished_at", Float, nullable=True),
)
Index("ix_webhook_deliveries_due", webhook_deliveries.c.state, webhook_deliveries.c.next_at)
Index("ix_webhook_deliveries_webhook", webhook_deliveries.c.webhook_id, webhook_deliveries.c.id)

# Jobs launched through the server (store/launch.py): one row per submission, its engine's
# state. ``request_key`` is the client's Idempotency-Key: a retried submission finds its job.
launch_jobs = Table(
    "launch_jobs",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("project_id", Integer, nullable=False),
    Column("run_id", Integer, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("recipe", String(128), nullable=False),
    Column("engine", String(16), nullable=False),
    Column("request_key", String(128), nullable=True),
    Column("state", String(16), nullable=False),
    Column("reason", String(1024), nullable=False, server_default=""),
    Column("engine_id", String(128), nullable=True),
    Column("exit_code", Integer, nullable=True),
    Column("cpus", Integer, nullable=False),
    Column("gpus", Integer, nullable=False),
    Column("created_by", Integer, nullable=True),
    Column("created_at", Float, nullable=False),
    Column("started_at", Float, nullable=True),
    Column("ended_at", Float, nullable=True),
    UniqueConstraint("project_id", "request_key", name="uq_launch_jobs_request_key"),
)
Index("ix_launch_jobs_project_state", launch_jobs.c.project_id, launch_jobs.c.state)
