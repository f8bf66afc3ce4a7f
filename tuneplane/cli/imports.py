"""``tuneplane import trackio | harbor | lm-eval | inspect | nemo-rl | upload``: other
tools' files read into snapshots (or the database), and delivered to the current run."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import Any

from tuneplane.cli.delivery import (
    Resume,
    add_upload_flag,
    deliver,
    deliver_rollouts,
    job_reporter,
    resumed_reporter,
    say_refused,
    val_upload_samples,
)
from tuneplane.cli.options import add_database_options, server_settings
from tuneplane.cli.progress import progress


def _import_harbor(args: argparse.Namespace) -> int:
    from tuneplane.importers.harbor_import import import_harbor
    from tuneplane.importers.plan import EXAMPLE_PLAN
    from tuneplane.importers.problems import ImportRefused, Problem
    from tuneplane.importers.snapshot import out_problems, summary, write_snapshot
    from tuneplane.importers.text import load_redactor

    if args.example_plan:
        print(EXAMPLE_PLAN, end="")
        return 0
    missing = [flag for flag in ("plan", "root", "out") if getattr(args, flag) is None]
    if missing:
        print(f"tuneplane import harbor: --{', --'.join(missing)} required", file=sys.stderr)
        return 2
    reporter = job_reporter("import harbor") if args.upload else None
    if args.upload and reporter is None:
        return 2
    out = out_problems(args.out)
    try:
        redactor = load_redactor(args.redactor) if args.redactor else None
        snapshot = import_harbor(
            args.plan,
            args.root,
            trace_limit=args.trace_limit,
            redactor=redactor,
            progress=progress("trial attempts read"),
        )
    except ImportRefused as refused:
        return say_refused(ImportRefused([*out, *refused.problems]))
    if out:
        return say_refused(ImportRefused(out))
    try:
        write_snapshot(snapshot, args.out)
    except OSError as failed:
        return say_refused(ImportRefused([Problem(args.out, "", f"cannot be written: {failed}")]))
    for line in summary(snapshot):
        print(f"tuneplane: {line}", file=sys.stderr)
    print(f"tuneplane: snapshot written to {args.out}", file=sys.stderr)
    return 0 if reporter is None else deliver(reporter, [snapshot], args.out)


def _import_rounds(args: argparse.Namespace, command: str, read: Any, what: str) -> int:
    """An import of one snapshot per round into ``--out``: ``read(path, text_samples=,
    redactor=, progress=)`` gives the snapshots by file name and the warnings."""
    from tuneplane.importers.problems import ImportRefused
    from tuneplane.importers.snapshot import summary, write_snapshot_files
    from tuneplane.importers.text import load_redactor

    text_samples = val_upload_samples()
    reporter = job_reporter(command) if args.upload else None
    if args.upload and reporter is None:
        return 2
    try:
        redactor = load_redactor(args.redactor) if args.redactor else None
        snapshots, warnings = read(
            args.path, text_samples=text_samples, redactor=redactor, progress=progress(what)
        )
        written = write_snapshot_files(snapshots, args.out)
    except ImportRefused as refused:
        if reporter is not None:
            reporter.close()
        return say_refused(refused)
    for warning in warnings:
        print(f"tuneplane: warning: {warning}", file=sys.stderr)
    for snapshot in snapshots.values():
        for line in summary(snapshot):
            print(f"tuneplane: {line}", file=sys.stderr)
    print(f"tuneplane: {len(written)} snapshots written to {args.out}", file=sys.stderr)
    if reporter is None:
        return 0
    return deliver(reporter, list(snapshots.values()), args.out)


def _import_lm_eval(args: argparse.Namespace) -> int:
    from tuneplane.importers.lm_eval import import_lm_eval, named_snapshots

    def read(path: str, **options: Any) -> Any:
        imported = import_lm_eval(path, **options)
        return named_snapshots(imported), imported.warnings

    return _import_rounds(args, "import lm-eval", read, "tasks read")


def _import_inspect(args: argparse.Namespace) -> int:
    from tuneplane.importers.inspect_eval import import_inspect

    def read(path: str, **options: Any) -> Any:
        imported = import_inspect(path, **options)
        return imported.snapshots, imported.warnings

    return _import_rounds(args, "import inspect", read, "logs read")


def _import_nemo_rl(args: argparse.Namespace) -> int:
    from tuneplane.importers.nemo_rl import import_nemo_rl, write_snapshots
    from tuneplane.importers.problems import ImportRefused
    from tuneplane.importers.snapshot import summary

    reporter = job_reporter("import nemo-rl") if args.upload else None
    if args.upload and reporter is None:
        return 2
    try:
        imported = import_nemo_rl(
            args.log_dir, text_samples=val_upload_samples(), progress=progress("files read")
        )
        written = write_snapshots(imported, args.out)
    except ImportRefused as refused:
        if reporter is not None:
            reporter.close()
        return say_refused(refused)
    for warning in imported.warnings:
        print(f"tuneplane: warning: {warning}", file=sys.stderr)
    for snapshot in (*imported.rollouts, *imported.rounds):
        for line in summary(snapshot):
            print(f"tuneplane: {line}", file=sys.stderr)
    print(f"tuneplane: {len(written)} snapshots written to {args.out}", file=sys.stderr)
    if reporter is None:
        return 0
    code = deliver_rollouts(reporter, imported.rollouts, args.out)
    return code or deliver(reporter, imported.rounds, args.out)


def _import_upload(args: argparse.Namespace) -> int:
    from tuneplane.importers.problems import ImportRefused
    from tuneplane.importers.rollout_snapshot import read_all

    resume = None
    if args.attempt_key is not None:  # a failed upload's retry, into its own attempt
        if not (args.project and args.run):
            print(
                "tuneplane import upload: --attempt-key needs --project and --run", file=sys.stderr
            )
            return 2
        resume = Resume(args.project, args.run, None, args.attempt_key)
        reporter = resumed_reporter(resume, args.server, args.data_dir, "import upload")
    else:
        reporter = job_reporter("import upload")
    if reporter is None:
        return 2
    try:  # every snapshot is read and checked before anything is sent
        snapshots, rollouts = read_all(args.snapshots)
    except ImportRefused as refused:
        reporter.close()
        return say_refused(refused, "uploaded")
    retry = " ".join(args.snapshots)
    if resume is not None:
        resume = replace(resume, attempt=reporter.attempt)
    return deliver_rollouts(reporter, rollouts, retry, resume) or deliver(
        reporter, snapshots, retry, resume
    )


def _import_trackio(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tuneplane.importers.trackio import TrackioDirectoryError, default_directory
    from tuneplane.server.trackio_import import import_directory

    directory = Path(args.directory) if args.directory else default_directory()
    try:
        totals, notes = import_directory(
            server_settings(args),
            directory,
            visibility=args.visibility,
            progress=progress("Trackio rows imported"),
        )
    except TrackioDirectoryError as exc:
        print(f"tuneplane import trackio: {exc}", file=sys.stderr)
        return 2
    for line in notes.lines():
        print(f"tuneplane: note: {line}", file=sys.stderr)
    print(f"tuneplane: imported {totals.summary()}", file=sys.stderr)
    return 0


def _add_trackio_import(sources: Any) -> None:
    trackio = sources.add_parser(
        "trackio",
        help="Trackio projects (metrics, system metrics, configs, alerts) into the database",
        description="Import every Trackio project database (<project>.db) in DIR into the "
        "server's database, idempotently: what is stored already is skipped. Trackio's files "
        "are only read. With SQLite, stop the server first (or let `tuneplane serve` import "
        "its own data directory).",
    )
    trackio.add_argument(
        "directory",
        nargs="?",
        metavar="DIR",
        help="Trackio's data directory (default: $TRACKIO_DIR or Trackio's own)",
    )
    trackio.add_argument(
        "--visibility",
        choices=["public", "private"],
        help="visibility of projects this creates (default: $TUNEPLANE_DEFAULT_VISIBILITY)",
    )
    add_database_options(trackio)
    trackio.set_defaults(handler=_import_trackio)


def _add_rounds_import(sources: Any, name: str, path: tuple[str, str], **texts: str) -> Any:
    """A source read into one snapshot per round: its path (metavar and help), --out,
    --redactor and --upload."""
    parser = sources.add_parser(name, **texts)
    parser.add_argument("path", metavar=path[0], help=path[1])
    parser.add_argument("--out", required=True, help="the directory to write snapshots to")
    parser.add_argument("--redactor", help="module:function applied to all text first")
    add_upload_flag(parser)
    return parser


def add_import_commands(commands: Any) -> None:
    parser = commands.add_parser("import", help="import other tools' evaluation results")
    sources = parser.add_subparsers(dest="import_command", required=True)
    _add_trackio_import(sources)
    harbor = sources.add_parser(
        "harbor",
        help="Harbor trial directories and ATIF trajectories, into a snapshot",
        description="Read the trials an import plan lists (docs/import.md) into a snapshot "
        "file, and with --upload deliver it to the current run. Starts no agent, sandbox "
        "or training.",
    )
    harbor.add_argument("--plan", help="the import plan (JSON; see --example-plan)")
    harbor.add_argument("--root", help="the directory the plan's directories are beneath")
    harbor.add_argument("--out", help="the snapshot file to write")
    harbor.add_argument(
        "--trace-limit",
        type=int,
        default=0,
        help="keep the text of at most N trajectories (0-128; default 0: no text)",
    )
    harbor.add_argument("--redactor", help="module:function applied to all text first")
    add_upload_flag(harbor)
    harbor.add_argument(
        "--example-plan", action="store_true", help="print an example plan and exit"
    )
    harbor.set_defaults(handler=_import_harbor)
    lm_eval = _add_rounds_import(
        sources,
        "lm-eval",
        ("DIR", "lm_eval's --output_path (or one results_*.json in it)"),
        help="an lm-eval run's results and samples, into one snapshot per task",
        description="Read an lm-eval output directory (results_*.json and the "
        "samples_<task>_*.jsonl beside it, docs/import.md) into one snapshot per task: one "
        "trial per document.",
    )
    lm_eval.set_defaults(handler=_import_lm_eval)
    inspect = _add_rounds_import(
        sources,
        "inspect",
        ("LOG_DIR", "Inspect's --log-dir (or one .eval or .json log)"),
        help="Inspect AI logs (.eval, .json), into one snapshot per log",
        description="Read Inspect AI's logs through Inspect's own reader (the extra "
        "tuneplane[inspect], docs/import.md) into one snapshot per log: one trial per sample "
        "and epoch, a verdict only from a binary score.",
    )
    inspect.set_defaults(handler=_import_inspect)
    nemo_rl = sources.add_parser(
        "nemo-rl",
        help="NeMo-RL step files: training rollouts and validation rounds, into snapshots",
        description="Read a NeMo-RL 0.7 log directory (train_data_step{N}.jsonl and "
        "val_data_step{N}.jsonl, docs/import.md) into a snapshot per step: at most 32 "
        "stratified rollouts of each training step, and each validation step as a round.",
    )
    nemo_rl.add_argument(
        "log_dir", metavar="LOG_DIR", help="the step files' directory (or the exp_NNN's parent)"
    )
    nemo_rl.add_argument("--out", required=True, help="the directory to write snapshots to")
    add_upload_flag(nemo_rl)
    nemo_rl.set_defaults(handler=_import_nemo_rl)
    upload = sources.add_parser(
        "upload",
        help="deliver saved snapshots to the current run (inside `tuneplane run`)",
        description="Send snapshots written by `tuneplane import ...` to the run of the "
        "`tuneplane run` job this runs in, without reading the sources again. Sending one "
        "again adds only what is missing.",
    )
    upload.add_argument(
        "snapshots", nargs="+", metavar="SNAPSHOT", help="snapshot files, or directories of them"
    )
    retry = upload.add_argument_group(
        "a failed upload's retry, outside `tuneplane run` with your API key (the command a "
        "failed upload prints)"
    )
    retry.add_argument(
        "--attempt-key",
        help="deliver into the execution attempt the job's runner started with this key, "
        "instead of the current job's (an unknown key starts a new attempt)",
    )
    retry.add_argument("--project", help="the run's project (with --attempt-key)")
    retry.add_argument("--run", help="the run (with --attempt-key)")
    retry.add_argument(
        "--server", help="server URL (default: $TUNEPLANE_URL or http://127.0.0.1:8000)"
    )
    retry.add_argument(
        "--data-dir", help="where to find admin.key when $TUNEPLANE_API_KEY is unset"
    )
    upload.set_defaults(handler=_import_upload)
