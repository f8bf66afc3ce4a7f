"""Uploads from the command line: the ``tuneplane run`` job's reporter, delivery with
one line per outcome, and a refused import said problem by problem."""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tuneplane.cli.progress import upload_progress


@dataclass(frozen=True, slots=True)
class Resume:
    """The execution attempt a failed upload is sent to again: its run, and the key the
    runner started it with (the server gives that attempt a new token for it)."""

    project: str
    run: str
    attempt: int | None
    key: str

    def command(self, retry: str) -> str:
        flags = shlex.join(
            ["--project", self.project, "--run", self.run, "--attempt-key", self.key]
        )
        return f"tuneplane import upload {retry} {flags}"


def job_resume() -> Resume | None:
    """The ``tuneplane run`` job's attempt, when its runner said which key started it."""
    import os

    from tuneplane.client.errors import NotConfigured
    from tuneplane.client.settings import job_settings

    try:
        job = job_settings(os.environ)
    except NotConfigured:
        return None
    if job.attempt_key is None:  # a launched job's attempt: the server started it
        return None
    project, _, run = job.run_id.partition("/")
    return Resume(project, run, job.attempt, job.attempt_key)


def retry_hint(retry: str, resume: Resume | None) -> str:
    """How to send what did not arrive: into the same execution attempt when its key is
    known (a new ``tuneplane run`` would be a new attempt, its round another round)."""
    if resume is None:
        return (
            f"`tuneplane import upload {retry}` retries it (what already arrived is not "
            "stored twice)"
        )
    which = f"execution attempt {resume.attempt}" if resume.attempt else "the same attempt"
    return (
        f"`{resume.command(retry)}` retries it in {which}, run outside `tuneplane run` with "
        "your API key (what already arrived is not stored twice)"
    )


def resumed_reporter(resume: Resume, server: str | None, data_dir: str | None, command: str) -> Any:
    """A reporter of the attempt ``resume`` names, or None after saying why not: the
    server hands its key's attempt a new token (an unknown key starts a new attempt)."""
    import os

    from tuneplane.client.reporter import Reporter
    from tuneplane.client.runner import SetupFailed, api_key, setup_api, start_attempt
    from tuneplane.contract import environment
    from tuneplane.contract.ids import id_for_name
    from tuneplane.contract.settings import Reader, SettingError

    project, run = id_for_name(resume.project), id_for_name(resume.run)
    try:
        reader = Reader(os.environ)
        url = reader.check(environment.URL_SETTING.rule, "--server", server) if server else None
        url = url or reader.read(environment.URL_SETTING)
        reader.done()
        api = setup_api(url.rstrip("/"), api_key(data_dir, os.environ))
        try:
            started = start_attempt(api, project, run, key=resume.key)
        finally:
            api.close()
    except (SettingError, SetupFailed) as exc:
        print(f"tuneplane {command}: {exc}", file=sys.stderr)
        return None
    print(
        f"tuneplane: delivering to {project}/{run}, execution attempt {started.attempt}",
        file=sys.stderr,
    )
    return Reporter(started.endpoint, f"{project}/{run}", started.token, attempt=started.attempt)


def job_reporter(command: str) -> Any:
    """The reporter of the ``tuneplane run`` job, or None after saying, in one line, that
    there is none: an upload has no credentials of its own."""
    from tuneplane.cli.upload import job_reporter as run_job_reporter
    from tuneplane.client.errors import NotConfigured

    try:
        return run_job_reporter()
    except NotConfigured as exc:
        print(
            f"tuneplane {command}: uploads go to the current run: run it under "
            f"`tuneplane run --project P --run R -- tuneplane {command} ...` ({exc})",
            file=sys.stderr,
        )
        return None


def deliver(
    reporter: Any, snapshots: Sequence[Any], retry: str, resume: Resume | None = None
) -> int:
    """Upload each snapshot; 1 with a line saying what did not arrive and how to retry
    (into ``resume``'s attempt, by default the job's own)."""
    from tuneplane.cli.upload import NotDelivered, upload

    try:
        for snapshot in snapshots:
            delivered = upload(reporter, snapshot, upload_progress())
            print(f"tuneplane: {delivered.describe()}", file=sys.stderr)
    except NotDelivered as failed:
        hint = retry_hint(retry, resume or job_resume())
        print(f"tuneplane: not delivered: {failed.message}; {hint}", file=sys.stderr)
        return 1
    finally:
        reporter.close()
    return 0


def deliver_rollouts(
    reporter: Any, snapshots: Sequence[Any], retry: str, resume: Resume | None = None
) -> int:
    """Upload each training step's rollouts; 1 with a line saying what did not arrive."""
    from tuneplane.cli.upload import NotDelivered, upload_rollouts

    try:
        for snapshot in snapshots:
            delivered = upload_rollouts(reporter, snapshot, upload_progress())
            print(f"tuneplane: {delivered.describe()}", file=sys.stderr)
    except NotDelivered as failed:
        reporter.close()
        hint = retry_hint(retry, resume or job_resume())
        print(f"tuneplane: not delivered: {failed.message}; {hint}", file=sys.stderr)
        return 1
    return 0


def say_refused(refused: Any, what: str = "written or uploaded") -> int:
    for problem in refused.problems:
        print(f"tuneplane: {problem}", file=sys.stderr)
    print(f"tuneplane: nothing was {what}", file=sys.stderr)
    return 2


def val_upload_samples() -> int | None:
    """The job's TUNEPLANE_JOB_VAL_UPLOAD_SAMPLES (SettingError when it breaks its rule)."""
    import os

    from tuneplane.client.settings import VAL_UPLOAD_SAMPLES
    from tuneplane.contract.settings import Reader

    reader = Reader(os.environ)
    value = reader.get(VAL_UPLOAD_SAMPLES)
    reader.done()
    return value


def add_upload_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--upload",
        action="store_true",
        help="then deliver the snapshot to the current run (inside `tuneplane run`)",
    )
