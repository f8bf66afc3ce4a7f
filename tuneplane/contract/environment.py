"""Environment variables shared by the runner, the SDK and the CLI."""

from typing import Any, Final

from tuneplane.contract.ids import ID_RULE, id_problem
from tuneplane.contract.limits import ATTEMPT_MAX, STEP_MAX
from tuneplane.contract.settings import HTTP_URL, RUN_ID, Rule, Setting, credential, integer

#: Set by ``tuneplane run`` for the training command: where and as what to report.
JOB_ENDPOINT: Final = "TUNEPLANE_JOB_ENDPOINT"
JOB_RUN_ID: Final = "TUNEPLANE_JOB_RUN_ID"
JOB_TOKEN: Final = "TUNEPLANE_JOB_TOKEN"  # noqa: S105 (a variable name)
JOB_ATTEMPT: Final = "TUNEPLANE_JOB_ATTEMPT"
JOB_NEXT_STEP: Final = "TUNEPLANE_JOB_NEXT_STEP"
#: The Idempotency-Key the runner started the attempt with: an upload that failed names it,
#: so that its retry (``tuneplane import upload --attempt-key``) lands in the same attempt.
JOB_ATTEMPT_KEY: Final = "TUNEPLANE_JOB_ATTEMPT_KEY"
#: Set by ``tuneplane run`` instead of the token when the attempt is offline: the
#: directory (``offline-<key>``) its journals go under, for ``tuneplane sync``.
JOB_OFFLINE: Final = "TUNEPLANE_JOB_OFFLINE"

#: For the CLI on another machine than the server.
URL: Final = "TUNEPLANE_URL"
API_KEY: Final = "TUNEPLANE_API_KEY"
DEFAULT_URL: Final = "http://127.0.0.1:8000"

#: Token prefixes tell credentials apart without a database lookup.
API_KEY_PREFIX: Final = "tpk_"
INGEST_TOKEN_PREFIX: Final = "tpi_"  # noqa: S105 (a prefix)
#: File in the data directory holding the admin API key written by ``tuneplane serve``.
ADMIN_KEY_FILE: Final = "admin.key"

JOB_ENDPOINT_SETTING: Final = Setting(
    JOB_ENDPOINT, HTTP_URL, None, "Server URL to report to (set by the runner)."
)
JOB_RUN_ID_SETTING: Final = Setting(JOB_RUN_ID, RUN_ID, None, "project/run (set by the runner).")
JOB_TOKEN_SETTING: Final = Setting(
    JOB_TOKEN,
    credential(INGEST_TOKEN_PREFIX, "an ingest token"),
    None,
    "The attempt's ingest token (set by the runner).",
)
JOB_ATTEMPT_SETTING: Final = Setting(
    JOB_ATTEMPT, integer(1, ATTEMPT_MAX), None, "The attempt number (set by the runner)."
)
JOB_NEXT_STEP_SETTING: Final = Setting(
    JOB_NEXT_STEP,
    integer(0, STEP_MAX),
    0,
    "The step of the first automatic report (set by the runner: a resumed run's continue "
    "after its last step).",
)


JOB_ATTEMPT_KEY_SETTING: Final = Setting(
    JOB_ATTEMPT_KEY,
    Rule(ID_RULE, lambda raw: None if id_problem(raw) else raw),
    None,
    "The key the runner started the attempt with, which a retried upload names to land in "
    "the same attempt (set by the runner).",
)


def _offline_group(raw: str) -> str | None:
    key = raw.removeprefix("offline-")
    if raw.startswith("offline-") and 1 <= len(key) <= 64 and key.isalnum() and key.isascii():
        return raw
    return None


JOB_OFFLINE_SETTING: Final = Setting(
    JOB_OFFLINE,
    Rule("must be offline- and 1-64 ASCII letters or digits", _offline_group),
    None,
    "The offline attempt's spool directory name (set by the runner when it is offline).",
)
URL_SETTING: Final = Setting(
    URL, HTTP_URL, DEFAULT_URL, "Server URL of the CLI and the runner (--server)."
)
API_KEY_SETTING: Final = Setting(
    API_KEY,
    credential(API_KEY_PREFIX, "an API key"),
    None,
    "User API key of the CLI and the runner (default: admin.key in the data directory).",
)

#: What ``tuneplane run`` hands the training command.
JOB_SETTINGS: Final[tuple[Setting[Any], ...]] = (
    JOB_ENDPOINT_SETTING,
    JOB_RUN_ID_SETTING,
    JOB_TOKEN_SETTING,
    JOB_ATTEMPT_SETTING,
    JOB_NEXT_STEP_SETTING,
    JOB_ATTEMPT_KEY_SETTING,
    JOB_OFFLINE_SETTING,
)
