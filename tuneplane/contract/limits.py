"""Every numeric limit of the wire contracts, written once.

The Arena figures come from the Arena worker-ingestion contract; the server and the SDK read
them from here, never from a literal of their own.
"""

from typing import Final

#: Project, run, log and alert identifiers.
ID_MAX_CHARS: Final = 128
#: Metric names: printable characters, ``/`` allowed.
METRIC_NAME_MAX_CHARS: Final = 128
#: A run's or project's name as people write it (its ID is derived from it: contract.ids).
DISPLAY_NAME_MAX_CHARS: Final = 256

#: ``POST /ingest``: the whole body, refused before it is parsed in full.
ARENA_BODY_MAX_BYTES: Final = 256 * 1024
#: ``POST /ingest``: log events and alerts together.
ARENA_BATCH_MAX_ITEMS: Final = 128
#: ``POST /ingest``: metrics in one log event.
ARENA_EVENT_MAX_METRICS: Final = 128
#: Alert title and text lengths, in characters.
ALERT_TITLE_MAX_CHARS: Final = 200
ALERT_TEXT_MAX_CHARS: Final = 4000

#: Reads: the most points one raw page or one downsampled answer may carry.
POINTS_PAGE_MAX: Final = 10_000
POINTS_PAGE_DEFAULT: Final = 1_000
MAX_POINTS_MAX: Final = 10_000
#: Series one downsampled read of several runs or several metrics may name (and runs one
#: stream may follow).
CHART_SERIES_MAX: Final = 64
#: Series one bulk read (``…/columns``) may answer, over all the runs it names.
BULK_SERIES_MAX: Final = 4_096
#: New points of one metric a live stream event carries; beyond it the reader asks for them.
LIVE_POINTS_MAX: Final = 1_000

#: Steps are stored as signed 64-bit integers.
STEP_MAX: Final = 2**63 - 1
#: Integers in query parameters (steps, cursors) are compared with signed 64-bit columns;
#: a larger one is refused rather than sent to the database.
QUERY_INTEGER_MAX: Final = 2**63 - 1

#: JSON the server stores as the client sent it (a run config) nests at most this many
#: levels of objects and lists: ``{"a": {"b": 1}}`` is two. Deeper is no configuration a
#: person reads, and every reader (the dashboard, ``json``) would have to recurse through it.
JSON_MAX_DEPTH: Final = 32
#: Any request body nests at most this many levels: well within the interpreter's recursion
#: limit (1,000), which the standard library's decoder counts against.
JSON_BODY_MAX_DEPTH: Final = 512

#: SDK scalars: points (valid and invalid) in one ``POST /api/v1/ingest/scalars``.
SCALAR_BATCH_MAX_POINTS: Final = 2_048
#: How far past the server's clock a point's client time (``reported_at``) may be: a day
#: forgives a node's wrong time zone, and still refuses milliseconds sent as seconds.
CLIENT_TIME_MAX_AHEAD_SECONDS: Final = 86_400.0
#: Scalar series one run admits.
RUN_MAX_SERIES: Final = 4_096
#: SDK: scalar points waiting in the background queue before new ones are dropped.
SCALAR_QUEUE_MAX_POINTS: Final = 100_000
#: Run config sent by the SDK or runner, as JSON bytes.
RUN_CONFIG_MAX_BYTES: Final = 64 * 1024

#: Live logs: lines per ``POST /api/v1/ingest/logs`` and characters per line.
LOG_BATCH_MAX_LINES: Final = 1_000
LOG_LINE_MAX_CHARS: Final = 16_384
#: Body limit of the token-authorized ingest routes.
INGEST_BODY_MAX_BYTES: Final = 4 * 1024 * 1024

#: Seconds between SDK heartbeats; health is unknown after this many missed intervals.
HEARTBEAT_INTERVAL_SECONDS: Final = 10.0
HEARTBEAT_STALE_INTERVALS: Final = 3
#: Default lifetime of an ingest token (``TUNEPLANE_INGEST_TOKEN_DAYS``).
INGEST_TOKEN_DAYS_DEFAULT: Final = 30

#: Observation events (events, distributions, health, evaluation outcomes).
OBSERVATION_BATCH_MAX: Final = 32
OBSERVATION_QUEUE_MAX: Final = 128
OBSERVATION_MAX_BYTES: Final = 16 * 1024
OBSERVATION_MAX_FIELDS: Final = 32
OBSERVATION_STRING_MAX_CHARS: Final = 1_024
HISTOGRAM_MAX_BOUNDS: Final = 64
#: Recent observations the events panel shows.
RECENT_OBSERVATIONS: Final = 100
#: Attempts of one trial kept in its retry history.
TRIAL_HISTORY_MAX: Final = 100
#: Trials of one transition per page of the matched view's lists.
MATCHED_TRIALS_PAGE_MAX: Final = 200
MATCHED_TRIALS_PAGE_DEFAULT: Final = 50

#: Seconds a client is told to wait (``Retry-After``) when the store is unavailable: long
#: enough for a restarted PostgreSQL to accept connections, short enough that a worker's
#: retries outlast a brief outage.
STORE_RETRY_AFTER_SECONDS: Final = 5
#: Seconds a request body may take to arrive in full (``TUNEPLANE_BODY_TIMEOUT``). A 4 MiB
#: ingest body needs about 1 Mbit/s to make it; a client trickling bytes is cut off.
BODY_TIMEOUT_SECONDS_DEFAULT: Final = 30.0
BODY_TIMEOUT_SECONDS_MAX: Final = 3600.0
#: Request bodies being read at once; beyond it a new one is refused with 503 at once, so
#: slow clients cannot take every connection the server has.
BODIES_IN_FLIGHT_MAX: Final = 128

#: Settings: the longest an ingest token may live (``TUNEPLANE_INGEST_TOKEN_DAYS``), ten
#: years; a longer one would be a credential that never expires.
INGEST_TOKEN_DAYS_MAX: Final = 3650
#: Settings: the longest the SDK and the runner keep sending at exit
#: (``TUNEPLANE_FLUSH_TIMEOUT``), an hour.
FLUSH_TIMEOUT_MAX_SECONDS: Final = 3600
#: Settings: the largest SDK queue (``TUNEPLANE_QUEUE_MAX_POINTS``); a queued point holds
#: a few hundred bytes, so this is some gigabytes of memory at most.
QUEUE_MAX_POINTS_MAX: Final = 10_000_000
#: Execution attempts are numbered from 1 and stored as signed 32-bit integers.
ATTEMPT_MAX: Final = 2**31 - 1

# Accounts and sign-in (docs/access.md).
PASSWORD_MIN_CHARS: Final = 8
PASSWORD_MAX_CHARS: Final = 1024
#: Days a browser session lasts; signing out, a new password or a disabled account end it.
SESSION_DAYS: Final = 14
#: Failed sign-ins per account, and per address, within the window before more are refused.
SIGN_IN_FAILURES_MAX: Final = 10
SIGN_IN_WINDOW_SECONDS: Final = 900
#: Longest a share link may be made to last (a link without expiry lasts until revoked).
SHARE_LINK_DAYS_MAX: Final = 365
#: Ids of rows in 32-bit integer columns (API keys, share links): a larger one names nothing.
ROW_ID_MAX: Final = 2**31 - 1

#: Trajectories: one document (the whole JSON item) and its messages.
TRAJECTORY_MAX_BYTES: Final = 1024 * 1024
TRAJECTORY_MAX_MESSAGES: Final = 1_024
#: Documents in one ``POST /api/v1/ingest/trajectories`` (the body stays within
#: ``INGEST_BODY_MAX_BYTES``, so a batch holds at most three documents of the largest size).
TRAJECTORY_BATCH_MAX: Final = 16
#: A training rollout's ``reward_missing``: the reward functions that gave it no reward
#: (as many as a trainer may have), each named in at most this many characters.
REWARD_MISSING_MAX: Final = 32
REWARD_NAME_MAX_CHARS: Final = 256
#: SDK: documents waiting for the sender, and their bytes, before new ones are dropped.
TRAJECTORY_QUEUE_MAX: Final = 256
TRAJECTORY_QUEUE_MAX_BYTES: Final = 64 * 1024 * 1024
#: Text retention of an evaluation round: a cohort of at most this many declared trials
#: keeps every trial's text (``TUNEPLANE_JOB_VAL_UPLOAD_SAMPLES`` overrides) ...
EVAL_TEXT_ALL_MAX_TRIALS: Final = 128
#: ... a larger one keeps this many trials, chosen by :func:`selection_rank`.
EVAL_TEXT_SAMPLED_TRIALS: Final = 32
#: The largest ``TUNEPLANE_JOB_VAL_UPLOAD_SAMPLES``: a million trials' text is more than
#: any round's reader pages through, and a larger cap keeps no more than "all".
VAL_UPLOAD_SAMPLES_MAX: Final = 1_000_000
#: Training rollouts one training step retains, stratified across diagnostic categories
#: (``TUNEPLANE_JOB_ROLLOUT_UPLOAD_SAMPLES`` may lower it; the server refuses one more).
ROLLOUT_SAMPLES_PER_STEP: Final = 32
#: Days a trajectory body is kept after upload (``TUNEPLANE_TRAJECTORY_DAYS``).
TRAJECTORY_DAYS_DEFAULT: Final = 7
#: Seconds between two sweeps of expired and deleted bodies (``TUNEPLANE_SWEEP_INTERVAL``).
SWEEP_INTERVAL_SECONDS_DEFAULT: Final = 3600.0
#: Seconds without a heartbeat before a running attempt is diagnosed as lost
#: (``TUNEPLANE_LOST_HEARTBEAT_SECONDS``).
LOST_HEARTBEAT_SECONDS_DEFAULT: Final = 600.0
#: Seconds after which a body written without its index row is an orphan to delete.
PENDING_BODY_SECONDS: Final = 3600.0
#: Bodies one sweep (or one early deletion) removes per transaction, so that it never
#: holds up ingest into other runs for long.
SWEEP_BATCH: Final = 500
#: Messages in one page of a trajectory, and index rows in one page of the browser.
TRAJECTORY_PAGE_MAX: Final = 200
TRAJECTORY_PAGE_DEFAULT: Final = 50
TRAJECTORY_INDEX_PAGE_MAX: Final = 500

# Files an import reads (docs/import.md, "Limits of the files read"): each kind of file
# another tool, a job or a person wrote is read up to its own number of bytes, and one
# beyond it is refused, naming the file and the limit. A JSON document is parsed whole,
# which costs some times its size in memory, so its limit is its memory bound too.
#: Harbor's ``verifier/reward.txt`` (one number) or ``reward.json`` (a small flat map).
IMPORT_REWARD_MAX_BYTES: Final = 4 * 1024
#: A Harbor trial's ``result.json``: a few KiB, unless ``agent_result`` carries every
#: turn's token IDs and log-probabilities (``rollout_details``).
IMPORT_TRIAL_RESULT_MAX_BYTES: Final = 32 * 1024 * 1024
#: One ATIF trajectory file (``agent/trajectory.json``, and each continuation). What an
#: import keeps of it is cut to ``TRAJECTORY_MAX_BYTES``; the file holds much that is cut
#: (every observation in full, token IDs, log-probabilities), so it may be 32 times that.
IMPORT_ATIF_MAX_BYTES: Final = 32 * TRAJECTORY_MAX_BYTES
#: lm-eval's ``results_<time>.json`` (every task's config, for large groups some MiB).
IMPORT_LM_EVAL_RESULTS_MAX_BYTES: Final = 16 * 1024 * 1024
#: One line of lm-eval's ``samples_<task>_<time>.jsonl`` (a document, its prompts and
#: answers; long-context tasks write some MiB). Lines are read one at a time.
IMPORT_LM_EVAL_SAMPLE_LINE_MAX_BYTES: Final = 16 * 1024 * 1024
#: One line of a NeMo-RL step file: one sample with its token IDs, masks, advantages and
#: log-probabilities, some tens of bytes a token (about 10 MiB at 128k tokens).
IMPORT_NEMO_RL_LINE_MAX_BYTES: Final = 32 * 1024 * 1024
#: An Inspect AI log file (``.eval``, a zip of JSON documents, or ``.json``) as stored: it
#: is read into memory whole before Inspect's own reader parses it.
IMPORT_INSPECT_LOG_MAX_BYTES: Final = 256 * 1024 * 1024
#: What an ``.eval`` log's members unpack to, as its zip directory declares them (a zip of
#: repetitive JSON packs some 10 to 1; its samples' events, the bulk, are never parsed).
IMPORT_INSPECT_LOG_UNPACKED_MAX_BYTES: Final = 1024 * 1024 * 1024
#: An import plan or an evaluation plan (some hundred bytes a trial).
IMPORT_PLAN_MAX_BYTES: Final = 16 * 1024 * 1024
#: A Harbor task's ``task.toml`` (names, timeouts, resources).
IMPORT_TASK_CONFIG_MAX_BYTES: Final = 1024 * 1024
#: A snapshot file to upload: at most ``EVAL_TEXT_ALL_MAX_TRIALS`` trajectories of at most
#: ``TRAJECTORY_MAX_BYTES`` each, and as much again for outcomes, evidence and events.
IMPORT_SNAPSHOT_MAX_BYTES: Final = 2 * EVAL_TEXT_ALL_MAX_TRIALS * TRAJECTORY_MAX_BYTES
