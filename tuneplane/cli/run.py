"""``tuneplane run``: a training command with its metrics, logs and status reported."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tuneplane.cli.delivery import val_upload_samples


def _run(args: argparse.Namespace) -> int:
    from tuneplane.client.runner import RunnerOptions, UsageError, run

    try:
        options = RunnerOptions.build(
            project=args.project,
            run=args.run,
            command=args.command,
            config=args.config,
            server=args.server,
            data_dir=args.data_dir,
            group=args.group,
            tags=args.tag,
            note=args.note,
            attempt_from_env=args.attempt_from_env,
        )
    except UsageError as exc:
        print(f"tuneplane run: {exc}", file=sys.stderr)
        return 2
    try:
        return run(options, follow=_nemo_rl_follower(args.follow_nemo_rl))
    except KeyboardInterrupt:  # before the command started; afterwards it gets the signal
        return 130


def _nemo_rl_follower(log_dir: str | None) -> Any:
    """What follows a NeMo-RL log directory with the attempt's reporter, or None."""
    if log_dir is None:
        return None
    from tuneplane.cli.upload import NemoRlSource
    from tuneplane.client.integrations.nemo_rl import NemoRlFollower

    def say(message: str) -> None:
        print(f"tuneplane: {message}", file=sys.stderr, flush=True)

    text_samples = val_upload_samples()
    return lambda reporter: NemoRlFollower(NemoRlSource(reporter, log_dir, text_samples), say=say)


def add_run_command(commands: Any) -> None:
    run = commands.add_parser(
        "run",
        help="run a training command with telemetry",
        description="Run CMD with its metrics, logs and status reported to the server. "
        "Telemetry failures never stop CMD; the exit code is CMD's.",
        usage="tuneplane run --project P --run R [options] -- CMD [ARGS ...]",
    )
    run.add_argument("--project", required=True, help="project name (its ID is derived from it)")
    run.add_argument(
        "--run",
        required=True,
        help="run name, any text (created, or resumed when it exists; its ID is derived)",
    )
    run.add_argument("--config", help="run config: a JSON object, or @FILE holding one")
    run.add_argument("--group", help="the run's group (the runs of one sweep or seed set)")
    run.add_argument("--tag", action="append", help="a tag of the run (repeat for more)")
    run.add_argument("--note", help="a note about the run (free text)")
    run.add_argument(
        "--server", help="server URL (default: $TUNEPLANE_URL or http://127.0.0.1:8000)"
    )
    run.add_argument(
        "--data-dir",
        help="where to find admin.key when $TUNEPLANE_API_KEY is unset "
        "(default: $TUNEPLANE_DIR, $TRACKIO_DIR or ./tuneplane-data)",
    )
    run.add_argument(
        "--attempt-from-env",
        action="store_true",
        help="report into the attempt $TUNEPLANE_JOB_* name, which the server that launched "
        "this job started (docs/launch.md), instead of creating one",
    )
    run.add_argument(
        "--follow-nemo-rl",
        metavar="LOG_DIR",
        help="import each completed NeMo-RL step file of LOG_DIR while CMD runs "
        "(in the background; docs/import.md)",
    )
    run.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    run.set_defaults(handler=_run)
