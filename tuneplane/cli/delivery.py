"""Uploads from the command line: the ``tuneplane run`` job's reporter, delivery with
one line per outcome, and a refused import said problem by problem."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from tuneplane.cli.progress import upload_progress


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


def deliver(reporter: Any, snapshots: Sequence[Any], retry: str) -> int:
    """Upload each snapshot; 1 with a line saying what did not arrive and how to retry."""
    from tuneplane.cli.upload import NotDelivered, upload

    try:
        for snapshot in snapshots:
            delivered = upload(reporter, snapshot, upload_progress())
            print(f"tuneplane: {delivered.describe()}", file=sys.stderr)
    except NotDelivered as failed:
        print(
            f"tuneplane: not delivered: {failed.message}; `tuneplane import upload {retry}` "
            "retries it (what already arrived is not stored twice)",
            file=sys.stderr,
        )
        return 1
    finally:
        reporter.close()
    return 0


def deliver_rollouts(reporter: Any, snapshots: Sequence[Any], retry: str) -> int:
    """Upload each training step's rollouts; 1 with a line saying what did not arrive."""
    from tuneplane.cli.upload import NotDelivered, upload_rollouts

    try:
        for snapshot in snapshots:
            delivered = upload_rollouts(reporter, snapshot, upload_progress())
            print(f"tuneplane: {delivered.describe()}", file=sys.stderr)
    except NotDelivered as failed:
        reporter.close()
        print(
            f"tuneplane: not delivered: {failed.message}; `tuneplane import upload {retry}` "
            "retries it (what already arrived is not stored twice)",
            file=sys.stderr,
        )
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
