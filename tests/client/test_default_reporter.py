"""``tuneplane.report()`` in real Python processes: configuration from the environment,
the one-line notices on stderr, the flush at interpreter exit. Also the public surface."""

import ast
import os
import subprocess
import sys
import time
from pathlib import Path

import tuneplane
from tests.client.world import dead_url, recording_server

SCRIPT = """
import sys, tuneplane
for step in range(1000):
    tuneplane.report({"loss": 1.0 / (step + 1), "reward": float(step)}, step=step)
tuneplane.report("not a mapping")
print("trained", flush=True)
"""


def run_script(env: dict[str, str], script: str = SCRIPT) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TUNEPLANE_JOB_")}
    return subprocess.run(
        [sys.executable, "-c", script],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def job_env(url: str) -> dict[str, str]:
    return {
        "TUNEPLANE_JOB_ENDPOINT": url,
        "TUNEPLANE_JOB_RUN_ID": "demo/grpo-7",
        "TUNEPLANE_JOB_TOKEN": "tpi_secret",
    }


def test_public_surface_is_pinned() -> None:
    assert tuneplane.__all__ == [
        "Api",
        "ApiError",
        "DeliveryFailed",
        "Health",
        "InvalidObservation",
        "NotConfigured",
        "Reporter",
        "ReporterError",
        "ResumeRefused",
        "Run",
        "__version__",
        "alert",
        "declare_population",
        "distribution",
        "event",
        "finish",
        "health_snapshot",
        "histogram",
        "init",
        "log",
        "register_export",
        "report",
        "trajectory",
        "trial_result",
        "truncate_messages",
    ]
    for name in tuneplane.__all__:
        assert getattr(tuneplane, name) is not None


def test_the_client_imports_only_the_contract() -> None:
    """The SDK runs in training images: it must not pull in the server or the store."""
    allowed_ours = ("tuneplane.client", "tuneplane.contract")
    package = Path(tuneplane.__file__).parent / "client"
    for path in package.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                if name == "tuneplane" or name.startswith("tuneplane."):
                    assert name == "tuneplane" or name.startswith(allowed_ours), (path, name)
                else:
                    top = name.split(".")[0]
                    assert top in sys.stdlib_module_names or top in ("httpx", "orjson", "psutil"), (
                        path,
                        name,
                    )


def test_without_a_server_report_does_nothing_and_says_so_once() -> None:
    done = run_script({})
    assert done.returncode == 0
    assert done.stdout == "trained\n"
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("tuneplane: metrics and events are not reported")
    assert "TUNEPLANE_JOB_ENDPOINT" in lines[0]


def test_everything_is_sent_at_exit_without_a_flush() -> None:
    with recording_server() as (url, recorder):
        done = run_script(job_env(url))
        assert done.returncode == 0, done.stderr
        points = {
            (entry["name"], step)
            for request in recorder.to("/scalars")
            for entry in request.body["series"]
            for step in entry["steps"]
        }
        beats = recorder.to("/heartbeat")
    assert len(points) == 2000
    # Nothing was lost but the one bad call, which the summary line reports.
    assert "report() ignored its input" in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "tuneplane: 2000 of 2001 points delivered (1 dropped: invalid input)"
    )
    assert beats
    assert beats[-1].body["sent"] == 2000


def test_server_down_training_finishes_and_the_loss_is_summed_up() -> None:
    started = time.monotonic()
    done = run_script({**job_env(dead_url()), "TUNEPLANE_FLUSH_TIMEOUT": "1"})
    assert time.monotonic() - started < 15
    assert done.returncode == 0
    assert done.stdout == "trained\n"
    assert done.stderr.strip().splitlines()[-1] == (
        "tuneplane: 0 of 2001 points delivered (2001 dropped: 2000 server unreachable, "
        "1 invalid input)"
    )


def test_a_forked_child_never_sends_its_parents_points_again() -> None:
    script = """
import os, sys, tuneplane
from tuneplane.client.default import default_reporter
tuneplane.report({"loss": 1.0}, step=0)
pid = os.fork()
if pid == 0:
    tuneplane.report({"loss": 2.0}, step=1)  # counted, never sent, never blocks
    health = default_reporter().health()
    print(health.dropped_by_reason, flush=True)
    os._exit(0)
os.waitpid(pid, 0)
tuneplane.report({"loss": 3.0}, step=2)
"""
    with recording_server() as (url, recorder):
        done = run_script(job_env(url), script)
        assert done.returncode == 0, done.stderr
        steps = sorted(
            step
            for request in recorder.to("/scalars")
            for entry in request.body["series"]
            for step in entry["steps"]
        )
    assert steps == [0, 2]
    assert done.stdout == "{'reporter closed': 1}\n"


def test_every_environment_variable_the_client_reads_is_documented() -> None:
    from tuneplane.client import settings
    from tuneplane.contract import datadir, environment

    docs = (Path(tuneplane.__file__).parents[1] / "docs" / "sdk.md").read_text()
    names = {
        environment.JOB_ENDPOINT,
        environment.JOB_RUN_ID,
        environment.JOB_TOKEN,
        environment.JOB_ATTEMPT,
        environment.JOB_NEXT_STEP,
        environment.JOB_OFFLINE,
        environment.URL,
        environment.API_KEY,
        settings.FLUSH_TIMEOUT_VARIABLE,
        settings.QUEUE_MAX_POINTS_VARIABLE,
        settings.VAL_UPLOAD_SAMPLES_VARIABLE,
        settings.ROLLOUT_UPLOAD_SAMPLES_VARIABLE,
        settings.SPOOL_DIR_VARIABLE,
        settings.SPOOL_MAX_MB_VARIABLE,
        settings.SYSTEM_METRICS_VARIABLE,
        settings.MODE_VARIABLE,
        settings.RUN_GROUP_VARIABLE,
        *datadir.DATA_DIR_VARIABLES,
    }
    # Nothing in the client names a variable that is not among them.
    for path in (Path(tuneplane.__file__).parent / "client").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            value = node.value if isinstance(node, ast.Constant) else None
            if isinstance(value, str) and value.startswith("TUNEPLANE_") and value.isupper():
                assert value in names, (path.name, value)
    for name in names:
        assert f"`{name}`" in docs, f"{name} is missing from docs/sdk.md"


IDLE_UNTIL_REPORTED = """
import sys, threading, tuneplane
senders = [t for t in threading.enumerate() if t.name == "tuneplane-sender"]
assert len(senders) == 1, threading.enumerate()
print("imported", flush=True)
sys.stdin.readline()
before = set(threading.enumerate())
tuneplane.report({"loss": 0.5})
assert set(threading.enumerate()) == before  # the first report started no thread
"""


def test_under_the_runner_import_starts_the_sender_idle_until_the_first_report() -> None:
    with recording_server() as (url, recorder):
        clean = {k: v for k, v in os.environ.items() if not k.startswith("TUNEPLANE_JOB_")}
        with subprocess.Popen(
            [sys.executable, "-c", IDLE_UNTIL_REPORTED],
            env={**clean, **job_env(url)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ) as child:
            assert child.stdout is not None
            assert child.stdin is not None
            assert child.stdout.readline() == "imported\n"
            time.sleep(0.5)  # an armed sender beats at once
            assert recorder.requests == []  # idle: not even a heartbeat
            _, errors = child.communicate("go\n", timeout=60)
            assert child.returncode == 0, errors
        points = [s for r in recorder.to("/scalars") for s in r.body["series"]]
        beats = recorder.to("/heartbeat")
    assert [(s["name"], s["steps"]) for s in points] == [("loss", [0])]
    assert beats


def test_a_process_that_imports_but_never_reports_sends_nothing() -> None:
    with recording_server() as (url, recorder):
        done = run_script(job_env(url), "import time, tuneplane\ntime.sleep(0.5)\n")
        assert done.returncode == 0, done.stderr
        assert done.stderr == ""
        assert recorder.requests == []
