"""``tuneplane eval run``: a fixed-checkpoint Harbor cohort, its snapshot and its upload."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tuneplane.cli.delivery import add_upload_flag, deliver, job_reporter


def _eval_arguments(args: argparse.Namespace) -> list[str]:
    """The command again, for the interpreter that runs Harbor."""
    arguments = ["eval", "run", "--plan", args.plan]
    arguments += ["--out", args.out] if args.out is not None else []
    arguments += ["--trace-limit", str(args.trace_limit)]
    arguments += ["--redactor", args.redactor] if args.redactor else []
    arguments += ["--resume"] if args.resume else []
    return arguments + (["--upload"] if args.upload else [])


def _eval_run(args: argparse.Namespace) -> int:
    import os

    from tuneplane.coordinator.evaluate import EvalOptions, check_plan, evaluate, refused
    from tuneplane.coordinator.plan import EXAMPLE_EVAL_PLAN
    from tuneplane.coordinator.runtime import require_harbor

    def say(line: str) -> None:
        print(f"tuneplane: {line}", file=sys.stderr, flush=True)

    if args.example_plan:
        print(EXAMPLE_EVAL_PLAN, end="")
        return 0
    if args.plan is None:
        print("tuneplane eval run: --plan required", file=sys.stderr)
        return 2
    options = EvalOptions(args.plan, args.out, args.trace_limit, args.redactor, args.resume)
    if args.check_plan:
        return check_plan(options, say)
    if refused(options, say):
        return 2
    missing = require_harbor(_eval_arguments(args), os.environ)  # may exec another Python
    if missing is not None:
        print(f"tuneplane eval run: {missing}", file=sys.stderr)
        return 2
    reporter = job_reporter("eval run") if args.upload else None
    if args.upload and reporter is None:
        return 2
    evaluated = evaluate(options, say)
    if reporter is None:
        return evaluated.code
    if evaluated.snapshot is None or evaluated.signal is not None:
        reporter.close()
        say("nothing was delivered")
        return evaluated.code
    retry = os.path.join(args.out, "snapshot.json")
    return max(evaluated.code, deliver(reporter, [evaluated.snapshot], retry))


def add_eval_commands(commands: Any) -> None:
    parser = commands.add_parser("eval", help="run evaluations")
    actions = parser.add_subparsers(dest="eval_command", required=True)
    run = actions.add_parser(
        "run",
        help="run a fixed-checkpoint Harbor cohort into a new directory and its snapshot",
        description="Run the plan's trials one at a time through Harbor's Python API "
        "(Python 3.12+ with harbor: this one, or $TUNEPLANE_HARBOR_PYTHON), then write the "
        "snapshot `tuneplane import harbor` would write from their directories "
        "(docs/import.md). Exits 0 when every planned trial ran and has an outcome.",
    )
    run.add_argument("--plan", help="the evaluation plan (JSON; see --example-plan)")
    run.add_argument("--out", help="the new directory to write (it must not exist)")
    run.add_argument(
        "--resume",
        action="store_true",
        help="continue the interrupted execution in --out (same plan): completed trials "
        "are not run again, and its snapshot is the same round",
    )
    run.add_argument(
        "--check-plan",
        action="store_true",
        help="check the plan's local paths and declarations only (no Harbor, no sandbox)",
    )
    run.add_argument(
        "--trace-limit",
        type=int,
        default=0,
        help="trials whose ATIF text is kept in the snapshot (default 0: none; at most 128)",
    )
    run.add_argument("--redactor", help="module:function applied to all text first")
    add_upload_flag(run)
    run.add_argument("--example-plan", action="store_true", help="print an example plan")
    run.set_defaults(handler=_eval_run)
