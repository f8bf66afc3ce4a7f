"""Response shapes, declared for ``/openapi.json``.

Routes serialize with orjson directly; these models document what they send.
All times are UNIX seconds.
"""

from __future__ import annotations

from pydantic import BaseModel


class Counts(BaseModel):
    new: int
    duplicate: int


class IngestResult(BaseModel):
    logs: Counts
    alerts: Counts
    points: int
    run_created: bool


class ProjectOut(BaseModel):
    project: str
    #: The name the project was given when it is not its ID (``qwen2.5 evals``).
    display_name: str | None = None
    created_at: float
    run_count: int
    updated_at: float | None


class Transport(BaseModel):
    state: str
    reason: str | None = None
    heartbeat_at: float | None
    queued: int | None = None
    sent: int | None = None
    dropped: int | None = None
    failed_sends: int | None = None
    queue_size: int | None = None
    queue_capacity: int | None = None


class Permissions(BaseModel):
    """What the caller may do with the run (the guard still decides every request)."""

    logs: bool
    trajectory_bodies: bool
    write: bool
    share: bool
    manage: bool


class AttemptConfig(BaseModel):
    attempt: int
    config: dict[str, object]


class RunOut(BaseModel):
    project: str
    #: The run's ID: its address, which never changes.
    run: str
    #: What pages show instead of the ID, when set (PATCH …/runs/{run}).
    display_name: str | None = None
    group: str | None = None
    tags: list[str] = []
    #: Free text, shown as text.
    note: str | None = None
    config: dict[str, object] | None
    created_at: float
    updated_at: float
    last_step: int | None
    point_count: int
    alert_count: int
    metric_count: int
    status: str | None
    exit_code: int | None
    attempt: int | None
    transport: Transport
    #: One run's answer only: the attempts that recorded a config other than the run's.
    attempt_configs: list[AttemptConfig] | None = None
    #: One run's answer only: ``run.summary`` as its attempts sent it (the latest wins).
    summary: dict[str, object] | None = None
    you: Permissions | None = None
    #: The runs list only: the values of the ``columns`` asked for (null where a run has none).
    columns: dict[str, object] | None = None
    #: The runs list only: the checkpoint of the run's latest evaluated round that recorded
    #: one (``name``, ``digest``, ``round_id``, ``execution_attempt``), or null.
    latest_checkpoint: dict[str, object] | None = None


class Deleted(BaseModel):
    """A deleted run (``run`` null for a whole project): gone from every read now, its data
    purged in the background."""

    project: str
    run: str | None
    deleted: bool


class MetricOut(BaseModel):
    metric: str
    count: int
    invalid_count: int
    corrected: int
    min: float | None
    max: float | None
    last: float | None
    first_step: int
    last_step: int


class RunMetrics(BaseModel):
    run: str
    metrics: list[MetricOut]


class RunsMetrics(BaseModel):
    runs: list[RunMetrics]


class PointOut(BaseModel):
    step: int
    value: float
    log_id: str | None
    time: float


class PointPage(BaseModel):
    metric: str
    points: list[PointOut]
    next_cursor: str | None


class BucketOut(BaseModel):
    step_min: int
    step_max: int
    count: int
    min: float
    max: float
    mean: float
    last: float
    time: float
    #: with ?x=<metric>: that metric's value at step_max (or its last before), else absent
    x: float | None = None


class Downsampled(BaseModel):
    metric: str
    downsampled: bool
    total_points: int
    buckets: list[BucketOut]


class RunBuckets(BaseModel):
    run: str
    downsampled: bool
    total_points: int
    buckets: list[BucketOut]


class RunsDownsampled(BaseModel):
    metric: str
    runs: list[RunBuckets]
    missing: list[str]


class MetricBuckets(BaseModel):
    metric: str
    downsampled: bool
    total_points: int
    buckets: list[BucketOut]


class MetricsDownsampled(BaseModel):
    run: str
    metrics: list[MetricBuckets]
    missing: list[str]


class AlertOut(BaseModel):
    alert_id: str
    title: str
    text: str | None
    level: str
    step: int | None
    received_at: float


class ErrorDetail(BaseModel):
    field: str
    rule: str


class ErrorBody(BaseModel):
    status: int
    code: str
    message: str
    details: list[ErrorDetail] | None = None


class ErrorOut(BaseModel):
    error: ErrorBody


class AttemptOut(BaseModel):
    project: str
    run: str
    attempt: int
    token: str
    expires_at: float
    ingest_url: str | None


class ScalarCounts(BaseModel):
    new: int
    corrected: int


class ScalarResult(BaseModel):
    points: ScalarCounts
    invalid: int


class LogResult(BaseModel):
    new: int
    duplicate: int


class LogLineOut(BaseModel):
    cursor: int
    attempt: int
    seq: int
    stream: str
    time: float
    text: str
    data: str | None


class LogPage(BaseModel):
    lines: list[LogLineOut]
    next_cursor: int


class InvalidPointOut(BaseModel):
    step: int
    kind: str


class GroupBucketOut(BaseModel):
    #: the middle of the steps (paired by step), or the mean of the x metric's values
    x: float
    step_min: int
    step_max: int
    #: over the runs with a point here (each run's value: the mean of its points here)
    mean: float
    min: float
    max: float
    std: float
    n: int
    time: float
    #: seconds since each run's creation, averaged
    elapsed: float


class GroupInvalidOut(BaseModel):
    step: int
    #: the first run's (in the order asked)
    kind: str
    #: the group's runs that reported NaN or an infinity at the step
    runs: list[str]


class GroupBuckets(BaseModel):
    group: str
    runs: list[str]
    missing: list[str]
    downsampled: bool
    total_points: int
    buckets: list[GroupBucketOut]
    #: steps where some of the group's runs reported NaN or an infinity
    invalid: list[GroupInvalidOut]


class GroupsDownsampled(BaseModel):
    metric: str
    groups: list[GroupBuckets]
    ungrouped: list[str]
