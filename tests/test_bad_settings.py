"""Every setting with a bad value, in real processes: ``tuneplane serve``, ``tuneplane run``
and the SDK inside a training process each answer with one line naming the variable, the
value and what is allowed; the commands exit with 2, training goes on; no traceback."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tuneplane
from tests.serving import free_port
from tuneplane.client.settings import RUNNER_SETTINGS, SDK_SETTINGS
from tuneplane.coordinator.runtime import HARBOR_PYTHON
from tuneplane.server.serving import FLAGS_VARIABLE
from tuneplane.server.settings import SETTINGS

DAYS = "must be a finite number of days greater than 0 and at most 3650"
SECONDS = "must be a finite number of seconds from 0 to 3600"
BODY_SECONDS = "must be a finite number of seconds greater than 0 and at most 3600"
PORTS = "must be a whole number from 1 to 65535"
POINTS = "must be a whole number of points from 1 to 10000000"
TRIALS = "must be a whole number of trials from 0 to 1000000"
ROLLOUTS = "must be a whole number of rollouts from 0 to 32"
MEGABYTES = "must be a whole number of MB from 1 to 1048576"
URLS = "must be an http:// or https:// URL such as http://host:8000"
HOSTS = "must be a host name or an IP address such as 0.0.0.0"
DATABASES = "must be sqlite:///PATH or postgresql://user@host/db"
PROXIES = "must be IP addresses or networks such as 127.0.0.1 or 10.0.0.0/8, comma-separated"
SHARED_SECRET = "(value hidden): must be a shared secret (printable ASCII without spaces)"
NOT_REPORTED = "; metrics and events are not reported"
MODES = "must be online, offline or disabled"
ISSUERS = (
    "must be an https:// URL (http:// only on a loopback address) without query or fragment, "
    "such as https://accounts.google.com"
)
ASCII = "must be printable ASCII without spaces"
CLIENT_SECRET = "(value hidden): must be a client secret (printable ASCII without spaces)"
DOMAINS = "must be e-mail domains such as example.com, comma-separated, or *"
ORGS = "must be organisation or group names without spaces, comma-separated, or *"
NAMES = "must be 1-40 printable characters"
ROOT_PATHS = (
    "must be a path such as /tuneplane (letters, digits, - _ . ~ between slashes) that does "
    "not start with one of the server's own (/api, /static, /projects, …)"
)
#: Single sign-on set up in full, so a case's one bad value is its one line.
SINGLE_SIGN_ON = {
    "TUNEPLANE_OIDC_ISSUER": "https://sso.example.com",
    "TUNEPLANE_OIDC_CLIENT_ID": "tuneplane",
    "TUNEPLANE_OIDC_CLIENT_SECRET": "a-client-secret",
    "TUNEPLANE_OIDC_ALLOWED_DOMAINS": "example.com",
}
A_FILE = "<a file>"  # stands for the path of a file made by the test


def clean_environment(tmp_path: Path) -> dict[str, str]:
    """Ours without any tuneplane setting, so only the test's reach the process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TUNEPLANE_", "TRACKIO_"))}
    return {**env, "TUNEPLANE_DIR": str(tmp_path / "data")}


def with_file(tmp_path: Path, value: str, expected: str) -> tuple[str, str]:
    path = tmp_path / "not-a-directory"
    path.write_text("")
    return value.replace(A_FILE, str(path)), expected.replace(A_FILE, str(path))


def refused(done: subprocess.CompletedProcess[str], line: str) -> None:
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [line], done.stderr
    assert done.returncode == 2


# -- tuneplane serve ----------------------------------------------------------------------

SERVE_CASES = [
    ("TUNEPLANE_DIR", A_FILE, f"TUNEPLANE_DIR='{A_FILE}': must be a directory, not a file"),
    ("TRACKIO_DIR", A_FILE, f"TRACKIO_DIR='{A_FILE}': must be a directory, not a file"),
    ("TUNEPLANE_DATABASE_URL", "garbage", f"TUNEPLANE_DATABASE_URL='garbage': {DATABASES}"),
    (
        "TUNEPLANE_DATABASE_URL",
        "postgres://me:hunter2@db/tp",
        f"TUNEPLANE_DATABASE_URL='postgres://me:***@db/tp': {DATABASES}",
    ),
    ("TUNEPLANE_INGEST_SECRET", "two words", f"TUNEPLANE_INGEST_SECRET {SHARED_SECRET}"),
    ("TRACKIO_INGEST_TOKEN", "café-au-lait", f"TRACKIO_INGEST_TOKEN {SHARED_SECRET}"),
    *[
        ("TUNEPLANE_INGEST_TOKEN_DAYS", raw, f"TUNEPLANE_INGEST_TOKEN_DAYS={raw!r}: {DAYS}")
        for raw in ("nan", "inf", "0", "-1", "thirty", "3651")
    ],
    ("TUNEPLANE_INGEST_URL", "nodes:8000", f"TUNEPLANE_INGEST_URL='nodes:8000': {URLS}"),
    ("TUNEPLANE_HOST", "bad host", f"TUNEPLANE_HOST='bad host': {HOSTS}"),
    *[
        ("TUNEPLANE_TRUSTED_PROXIES", raw, f"TUNEPLANE_TRUSTED_PROXIES={raw!r}: {PROXIES}")
        for raw in ("localhost", "*", "10.0.0.1/8", "127.0.0.1,", "127.0.0.1 10.0.0.2")
    ],
    *[
        ("TUNEPLANE_PORT", raw, f"TUNEPLANE_PORT={raw!r}: {PORTS}")
        for raw in ("abc", "0", "-1", "65536", "80.5")
    ],
    *[
        ("TUNEPLANE_BODY_TIMEOUT", raw, f"TUNEPLANE_BODY_TIMEOUT={raw!r}: {BODY_SECONDS}")
        for raw in ("nan", "0", "forever")
    ],
    ("TUNEPLANE_DIAGNOSIS_URL", "llm:8000", f"TUNEPLANE_DIAGNOSIS_URL='llm:8000': {URLS}"),
    (
        "TUNEPLANE_DIAGNOSIS_MODEL",
        "two words",
        "TUNEPLANE_DIAGNOSIS_MODEL='two words': must be a model name: printable ASCII without "
        "spaces",
    ),
    (
        "TUNEPLANE_DIAGNOSIS_KEY",
        "a key",
        "TUNEPLANE_DIAGNOSIS_KEY (value hidden): must be an API key (printable ASCII without "
        "spaces)",
    ),
    *[
        (
            "TUNEPLANE_LOST_HEARTBEAT_SECONDS",
            raw,
            f"TUNEPLANE_LOST_HEARTBEAT_SECONDS={raw!r}: must be a finite number of seconds "
            "greater than 0 and at most 86400",
        )
        for raw in ("0", "never")
    ],
    *[
        (
            "TUNEPLANE_RECIPES_DIR",
            raw,
            f"TUNEPLANE_RECIPES_DIR={raw!r}: must be the absolute path of an existing directory",
        )
        for raw in ("recipes", "/no/such/directory", A_FILE)
    ],
    *[
        (
            "TUNEPLANE_SLURM_CONF",
            raw,
            f"TUNEPLANE_SLURM_CONF={raw!r}: must be default or the absolute path of an "
            "existing slurm.conf",
        )
        for raw in ("slurm.conf", "/no/such/slurm.conf")
    ],
    ("TUNEPLANE_RAY_ADDRESS", "ray-head:8265", f"TUNEPLANE_RAY_ADDRESS='ray-head:8265': {URLS}"),
    (
        "TUNEPLANE_SLURM_PARTITION",
        "a b",
        "TUNEPLANE_SLURM_PARTITION='a b': must be a partition name: printable ASCII without spaces",
    ),
    *[
        (
            "TUNEPLANE_LAUNCH_MAX_JOBS",
            raw,
            f"TUNEPLANE_LAUNCH_MAX_JOBS={raw!r}: must be a whole number of jobs from 1 to 100000",
        )
        for raw in ("0", "many", "2.5")
    ],
    *[
        (
            "TUNEPLANE_LAUNCH_MAX_GPUS",
            raw,
            f"TUNEPLANE_LAUNCH_MAX_GPUS={raw!r}: must be a whole number of GPUs from 0 to 1024",
        )
        for raw in ("-1", "1025", "all")
    ],
    *[
        (
            "TUNEPLANE_BLOB_URL",
            raw,
            f"TUNEPLANE_BLOB_URL={raw!r}: must be s3://bucket/prefix or an absolute directory path",
        )
        for raw in ("s3://", "relative/dir", "s3://UPPER/case")
    ],
    *[
        (
            "TUNEPLANE_TRAJECTORY_DAYS",
            raw,
            f"TUNEPLANE_TRAJECTORY_DAYS={raw!r}: must be a finite number of days greater than "
            "0 and at most 3650",
        )
        for raw in ("0", "inf", "a week")
    ],
    *[
        (
            "TUNEPLANE_SWEEP_INTERVAL",
            raw,
            f"TUNEPLANE_SWEEP_INTERVAL={raw!r}: must be a finite number of seconds greater "
            "than 0 and at most 86400",
        )
        for raw in ("0", "-5", "hourly")
    ],
    *[
        (
            "TUNEPLANE_ALERT_CHECK_INTERVAL",
            raw,
            f"TUNEPLANE_ALERT_CHECK_INTERVAL={raw!r}: must be a finite number of seconds "
            "greater than 0 and at most 3600",
        )
        for raw in ("0", "-1", "nan", "3601", "often")
    ],
    *[
        (
            "TUNEPLANE_WEBHOOK_RETRY_SECONDS",
            raw,
            f"TUNEPLANE_WEBHOOK_RETRY_SECONDS={raw!r}: must be a finite number of seconds "
            "greater than 0 and at most 300",
        )
        for raw in ("0", "inf", "301", "soon")
    ],
    *[
        (
            "TUNEPLANE_TRACKIO_IMPORT",
            raw,
            f"TUNEPLANE_TRACKIO_IMPORT={raw!r}: must be on or off",
        )
        for raw in ("yes", "ON", "1", "false")
    ],
    *[
        (
            "TUNEPLANE_OUTBOUND_ALLOW",
            raw,
            f"TUNEPLANE_OUTBOUND_ALLOW={raw!r}: must be networks such as 10.0.0.0/8, addresses "
            "or host names such as hooks.internal, comma-separated",
        )
        for raw in ("10.0.0.1/8", "127.1", "2130706433", "hooks internal", "10.0.0.0/8,,x")
    ],
    *[
        ("TUNEPLANE_ROOT_PATH", raw, f"TUNEPLANE_ROOT_PATH={raw!r}: {ROOT_PATHS}")
        for raw in ("tuneplane", "/api", "/static/x", "/a//b", "/a b", "/../x", '/"><x')
    ],
    *[
        (
            "TUNEPLANE_DEFAULT_VISIBILITY",
            raw,
            f"TUNEPLANE_DEFAULT_VISIBILITY={raw!r}: must be public or private",
        )
        for raw in ("Public", "secret")
    ],
    *[
        (
            "TUNEPLANE_FRAME_ANCESTORS",
            raw,
            f"TUNEPLANE_FRAME_ANCESTORS={raw!r}: must be 'none', 'self' or origins such as "
            "https://huggingface.co, space-separated",
        )
        for raw in ("*", "'none' 'self'", "javascript:alert(1)")
    ],
    *[
        ("TUNEPLANE_OIDC_ISSUER", raw, f"TUNEPLANE_OIDC_ISSUER={raw!r}: {ISSUERS}")
        for raw in ("http://sso.example.com", "https://sso.example.com/?x=1", "sso.example.com")
    ],
    ("TUNEPLANE_OIDC_CLIENT_ID", "two words", f"TUNEPLANE_OIDC_CLIENT_ID='two words': {ASCII}"),
    ("TUNEPLANE_OIDC_CLIENT_SECRET", "hunter2 x", f"TUNEPLANE_OIDC_CLIENT_SECRET {CLIENT_SECRET}"),
    *[
        (
            "TUNEPLANE_OIDC_ALLOWED_DOMAINS",
            raw,
            f"TUNEPLANE_OIDC_ALLOWED_DOMAINS={raw!r}: {DOMAINS}",
        )
        for raw in ("example", "*.example.com", "example.com,", "a@example.com")
    ],
    *[
        ("TUNEPLANE_OIDC_ALLOWED_ORGS", raw, f"TUNEPLANE_OIDC_ALLOWED_ORGS={raw!r}: {ORGS}")
        for raw in ("two words", "research,,platform", "*,research")
    ],
    (
        "TUNEPLANE_OIDC_ORG_CLAIM",
        "org claim",
        "TUNEPLANE_OIDC_ORG_CLAIM='org claim': must be a claim name of letters, digits, _ : . or -",
    ),
    ("TUNEPLANE_OIDC_NAME", "x" * 41, f"TUNEPLANE_OIDC_NAME='{'x' * 41}': {NAMES}"),
]


@pytest.mark.parametrize(("name", "value", "line"), SERVE_CASES)
def test_serve_refuses_a_bad_setting(tmp_path: Path, name: str, value: str, line: str) -> None:
    value, line = with_file(tmp_path, value, line)
    env = {**clean_environment(tmp_path), "TUNEPLANE_PORT": str(free_port()), name: value}
    if name.startswith("TUNEPLANE_OIDC_"):
        env = {**SINGLE_SIGN_ON, **env}
    if name == "TRACKIO_DIR":
        del env["TUNEPLANE_DIR"]
    done = subprocess.run(
        [sys.executable, "-m", "tuneplane.cli", "serve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    refused(done, f"tuneplane: {line}")
    # Neither a secret nor a database password prints.
    assert "hunter2" not in done.stderr
    if name in ("TUNEPLANE_INGEST_SECRET", "TRACKIO_INGEST_TOKEN", "TUNEPLANE_OIDC_CLIENT_SECRET"):
        assert value not in done.stderr


_ISSUER_ONLY = {"TUNEPLANE_OIDC_ISSUER": "https://sso.example.com"}


@pytest.mark.parametrize(
    ("env", "line"),
    [
        (
            _ISSUER_ONLY,
            "TUNEPLANE_OIDC_ISSUER is set: TUNEPLANE_OIDC_CLIENT_ID and "
            "TUNEPLANE_OIDC_CLIENT_SECRET must be too",
        ),
        (
            {**_ISSUER_ONLY, "TUNEPLANE_OIDC_CLIENT_ID": "tuneplane"},
            "TUNEPLANE_OIDC_ISSUER is set: TUNEPLANE_OIDC_CLIENT_SECRET must be too",
        ),
        (
            {"TUNEPLANE_OIDC_CLIENT_ID": "tuneplane", "TUNEPLANE_OIDC_ALLOWED_ORGS": "research"},
            "TUNEPLANE_OIDC_CLIENT_ID, TUNEPLANE_OIDC_ALLOWED_ORGS: set without "
            "TUNEPLANE_OIDC_ISSUER",
        ),
        (
            {k: v for k, v in SINGLE_SIGN_ON.items() if "ALLOWED" not in k},
            "TUNEPLANE_OIDC_ISSUER is set: TUNEPLANE_OIDC_ALLOWED_DOMAINS or "
            "TUNEPLANE_OIDC_ALLOWED_ORGS must say who may sign in (* for anyone the provider "
            "signs in)",
        ),
    ],
)
def test_serve_refuses_half_a_single_sign_on(
    tmp_path: Path, env: dict[str, str], line: str
) -> None:
    # An issuer with no allow-list would let in anyone the provider knows.
    done = subprocess.run(
        [sys.executable, "-m", "tuneplane.cli", "serve"],
        env={**clean_environment(tmp_path), "TUNEPLANE_PORT": str(free_port()), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    refused(done, f"tuneplane: {line}")
    assert "a-client-secret" not in done.stderr


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (["--port", "abc"], f"--port='abc': {PORTS}"),
        (["--port", "0"], f"--port='0': {PORTS}"),
        (["--host", "a b"], f"--host='a b': {HOSTS}"),
        (["--root-path", "/projects"], f"--root-path='/projects': {ROOT_PATHS}"),
        (["--database-url", "mysql://h/db"], f"--database-url='mysql://h/db': {DATABASES}"),
        (["--data-dir", A_FILE], f"--data-dir='{A_FILE}': must be a directory, not a file"),
    ],
)
def test_serve_flags_follow_the_same_rules(tmp_path: Path, flags: list[str], line: str) -> None:
    flags = [with_file(tmp_path, flag, "")[0] for flag in flags]
    line = with_file(tmp_path, "", line)[1]
    done = subprocess.run(
        [sys.executable, "-m", "tuneplane.cli", "serve", *flags],
        env={**clean_environment(tmp_path), "TUNEPLANE_PORT": str(free_port())},
        capture_output=True,
        text=True,
        timeout=60,
    )
    refused(done, f"tuneplane: {line}")


def test_every_bad_value_is_one_line(tmp_path: Path) -> None:
    env = {
        **clean_environment(tmp_path),
        "TUNEPLANE_PORT": "abc",
        "TUNEPLANE_INGEST_TOKEN_DAYS": "nan",
    }
    done = subprocess.run(
        [sys.executable, "-m", "tuneplane.cli", "serve"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [
        f"tuneplane: TUNEPLANE_PORT='abc': {PORTS}",
        f"tuneplane: TUNEPLANE_INGEST_TOKEN_DAYS='nan': {DAYS}",
    ]
    assert done.returncode == 2


# -- tuneplane run ------------------------------------------------------------------------

RUN_CASES = [
    ("TUNEPLANE_URL", "localhost:8000", f"TUNEPLANE_URL='localhost:8000': {URLS}"),
    (
        "TUNEPLANE_API_KEY",
        "tpi_an-ingest-token",
        "TUNEPLANE_API_KEY (value hidden): must be an API key (tpk_…, printable ASCII)",
    ),
    *[
        ("TUNEPLANE_FLUSH_TIMEOUT", raw, f"TUNEPLANE_FLUSH_TIMEOUT={raw!r}: {SECONDS}")
        for raw in ("nan", "inf", "-1", "abc", "3601")
    ],
    # The command's SDK would refuse it once training had started: refused before.
    *[
        ("TUNEPLANE_QUEUE_MAX_POINTS", raw, f"TUNEPLANE_QUEUE_MAX_POINTS={raw!r}: {POINTS}")
        for raw in ("0", "-1", "thirty")
    ],
    *[
        (
            "TUNEPLANE_JOB_VAL_UPLOAD_SAMPLES",
            raw,
            f"TUNEPLANE_JOB_VAL_UPLOAD_SAMPLES={raw!r}: {TRIALS}",
        )
        for raw in ("-1", "all", "1000001", "1.5")
    ],
    *[
        (
            "TUNEPLANE_JOB_ROLLOUT_UPLOAD_SAMPLES",
            raw,
            f"TUNEPLANE_JOB_ROLLOUT_UPLOAD_SAMPLES={raw!r}: {ROLLOUTS}",
        )
        for raw in ("-1", "33", "many")
    ],
    (
        "TUNEPLANE_SPOOL_DIR",
        A_FILE,
        f"TUNEPLANE_SPOOL_DIR='{A_FILE}': must be a directory, not a file",
    ),
    *[
        ("TUNEPLANE_SPOOL_MAX_MB", raw, f"TUNEPLANE_SPOOL_MAX_MB={raw!r}: {MEGABYTES}")
        for raw in ("0", "-1", "1e3", "1048577")
    ],
    *[("TUNEPLANE_MODE", raw, f"TUNEPLANE_MODE={raw!r}: {MODES}") for raw in ("Offline", "off")],
    (
        "TUNEPLANE_RUN_GROUP",
        "lr sweep",
        "TUNEPLANE_RUN_GROUP='lr sweep': must be 1-128 letters, digits and _ - . : / + @ = only",
    ),
    *[
        (
            "TUNEPLANE_SYSTEM_METRICS_SECONDS",
            raw,
            f"TUNEPLANE_SYSTEM_METRICS_SECONDS={raw!r}: {SECONDS}",
        )
        for raw in ("-1", "3601", "often")
    ],
]


def run_command(
    tmp_path: Path, env: dict[str, str], *flags: str
) -> subprocess.CompletedProcess[str]:
    """``tuneplane run`` of a command that leaves a mark when it runs."""
    mark = tmp_path / "ran"
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tuneplane.cli",
            "run",
            "--project",
            "demo",
            "--run",
            "r1",
            *flags,
            "--",
            sys.executable,
            "-c",
            f"open({str(mark)!r}, 'w')",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(("name", "value", "line"), RUN_CASES)
def test_run_refuses_a_bad_setting_before_the_command_starts(
    tmp_path: Path, name: str, value: str, line: str
) -> None:
    env = {**clean_environment(tmp_path), "TUNEPLANE_URL": f"http://127.0.0.1:{free_port()}"}
    value, line = with_file(tmp_path, value, line)
    done = run_command(tmp_path, {**env, name: value})
    refused(done, f"tuneplane: {line}")
    assert not (tmp_path / "ran").exists()
    assert "tpi_an-ingest-token" not in done.stderr


def test_run_server_flag_follows_the_same_rule(tmp_path: Path) -> None:
    done = run_command(tmp_path, clean_environment(tmp_path), "--server", "ftp://tp")
    refused(done, f"tuneplane: --server='ftp://tp': {URLS}")
    assert not (tmp_path / "ran").exists()


# -- the SDK inside a training process ----------------------------------------------------

TRAINING = """
import tuneplane
for step in range(100):
    tuneplane.report({"loss": 1.0 / (step + 1)}, step=step)
rollout = [{"role": "user", "content": "hi"}]
print(tuneplane.event("note", {"x": 1}), flush=True)
print(tuneplane.trajectory(scope="training", step=1, trajectory_id="r", messages=rollout))
print("trained", flush=True)
"""

SDK_CASES = [
    ("TUNEPLANE_JOB_ENDPOINT", "nodes:8000", f"TUNEPLANE_JOB_ENDPOINT='nodes:8000': {URLS}"),
    (
        "TUNEPLANE_JOB_RUN_ID",
        "no-slash",
        "TUNEPLANE_JOB_RUN_ID='no-slash': must be 'project/run', each part 1-128 ASCII "
        "letters, digits, '_' or '-'",
    ),
    (
        "TUNEPLANE_JOB_TOKEN",
        "tpk_a-user-key",
        "TUNEPLANE_JOB_TOKEN (value hidden): must be an ingest token (tpi_…, printable ASCII)",
    ),
    *[
        (
            "TUNEPLANE_JOB_ATTEMPT",
            raw,
            f"TUNEPLANE_JOB_ATTEMPT={raw!r}: must be a whole number from 1 to 2147483647",
        )
        for raw in ("0", "-1", "abc")
    ],
    (
        "TUNEPLANE_JOB_NEXT_STEP",
        "-1",
        "TUNEPLANE_JOB_NEXT_STEP='-1': must be a whole number from 0 to 9223372036854775807",
    ),
    (
        "TUNEPLANE_JOB_ATTEMPT_KEY",
        "a key",
        "TUNEPLANE_JOB_ATTEMPT_KEY='a key': must be 1-128 ASCII letters, digits, '_' or '-'",
    ),
    ("TUNEPLANE_FLUSH_TIMEOUT", "nan", f"TUNEPLANE_FLUSH_TIMEOUT='nan': {SECONDS}"),
    ("TUNEPLANE_QUEUE_MAX_POINTS", "thirty", f"TUNEPLANE_QUEUE_MAX_POINTS='thirty': {POINTS}"),
    (
        "TUNEPLANE_JOB_VAL_UPLOAD_SAMPLES",
        "-5",
        f"TUNEPLANE_JOB_VAL_UPLOAD_SAMPLES='-5': {TRIALS}",
    ),
    (
        "TUNEPLANE_JOB_ROLLOUT_UPLOAD_SAMPLES",
        "64",
        f"TUNEPLANE_JOB_ROLLOUT_UPLOAD_SAMPLES='64': {ROLLOUTS}",
    ),
    (
        "TUNEPLANE_SPOOL_DIR",
        A_FILE,
        f"TUNEPLANE_SPOOL_DIR='{A_FILE}': must be a directory, not a file",
    ),
    ("TUNEPLANE_SPOOL_MAX_MB", "a gig", f"TUNEPLANE_SPOOL_MAX_MB='a gig': {MEGABYTES}"),
    ("TUNEPLANE_MODE", "sometimes", f"TUNEPLANE_MODE='sometimes': {MODES}"),
    (
        "TUNEPLANE_JOB_OFFLINE",
        "offline-not/a/key",
        "TUNEPLANE_JOB_OFFLINE='offline-not/a/key': must be offline- and 1-64 ASCII letters "
        "or digits",
    ),
    (
        "TUNEPLANE_SYSTEM_METRICS_SECONDS",
        "nan",
        f"TUNEPLANE_SYSTEM_METRICS_SECONDS='nan': {SECONDS}",
    ),
]


@pytest.mark.parametrize(("name", "value", "line"), SDK_CASES)
def test_the_sdk_says_so_once_and_training_goes_on(
    tmp_path: Path, name: str, value: str, line: str
) -> None:
    job = {
        "TUNEPLANE_JOB_ENDPOINT": f"http://127.0.0.1:{free_port()}",
        "TUNEPLANE_JOB_RUN_ID": "demo/r1",
        "TUNEPLANE_JOB_TOKEN": "tpi_token",
        "TUNEPLANE_JOB_ATTEMPT": "1",
    }
    value, line = with_file(tmp_path, value, line)
    done = subprocess.run(
        [sys.executable, "-c", TRAINING],
        env={**clean_environment(tmp_path), **job, name: value},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [f"tuneplane: {line}{NOT_REPORTED}"]
    assert done.stdout == "False\nFalse\ntrained\n"
    assert done.returncode == 0
    assert "tpk_a-user-key" not in done.stderr


# -- nothing left out ---------------------------------------------------------------------


def variables_named_in_the_package() -> set[str]:
    names = set()
    for path in Path(tuneplane.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            value = node.value if isinstance(node, ast.Constant) else None
            if (
                isinstance(value, str)
                and value.startswith(("TUNEPLANE_", "TRACKIO_"))
                and value.replace("_", "").isalnum()
                and value.isupper()
                and not value.endswith("_")  # a prefix (a job's environment is cleared of them)
            ):
                names.add(value)
    return names


def test_every_variable_the_package_reads_is_declared_and_tried_with_a_bad_value() -> None:
    # The evaluation coordinator's interpreter is tried with a bad value in
    # tests/coordinator/test_plan.py (test_a_harbor_python_that_is_no_executable_is_refused).
    coordinator = {HARBOR_PYTHON.name}
    # Not a setting: tuneplane serve --workers hands its own flags to the processes it starts.
    internal = {FLAGS_VARIABLE}
    declared = {s.name for s in (*SETTINGS, *SDK_SETTINGS, *RUNNER_SETTINGS)} | coordinator
    declared |= internal
    assert variables_named_in_the_package() <= declared
    assert {s.name for s in SETTINGS} == {name for name, _, _ in SERVE_CASES}
    assert {s.name for s in SDK_SETTINGS} == {name for name, _, _ in SDK_CASES}
    # The data directory only locates admin.key for the runner (any path is allowed there);
    # serve tries both variables with a file in the directory's place.
    paths = {"TUNEPLANE_DIR", "TRACKIO_DIR"}
    assert {s.name for s in RUNNER_SETTINGS} - paths == {name for name, _, _ in RUN_CASES}
