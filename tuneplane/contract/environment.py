"""Environment variables shared by the runner, the SDK and the CLI."""

from typing import Final

#: Set by ``tuneplane run`` for the training command: where and as what to report.
JOB_ENDPOINT: Final = "TUNEPLANE_JOB_ENDPOINT"
JOB_RUN_ID: Final = "TUNEPLANE_JOB_RUN_ID"
JOB_TOKEN: Final = "TUNEPLANE_JOB_TOKEN"  # noqa: S105 (a variable name)
JOB_ATTEMPT: Final = "TUNEPLANE_JOB_ATTEMPT"

#: For the CLI on another machine than the server.
URL: Final = "TUNEPLANE_URL"
API_KEY: Final = "TUNEPLANE_API_KEY"
DEFAULT_URL: Final = "http://127.0.0.1:8000"

#: Token prefixes tell credentials apart without a database lookup.
API_KEY_PREFIX: Final = "tpk_"
INGEST_TOKEN_PREFIX: Final = "tpi_"  # noqa: S105 (a prefix)
#: File in the data directory holding the admin API key written by ``tuneplane serve``.
ADMIN_KEY_FILE: Final = "admin.key"
