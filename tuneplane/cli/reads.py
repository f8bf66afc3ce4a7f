"""``tuneplane projects list`` and ``tuneplane runs list|show|export``: what the server stores,
read through its API with the user's key (found as ``tuneplane run`` finds it), as tables
for people or, with ``--json``, as the API's own JSON for scripts.

Exit codes: 0 done, 1 not found, 2 a usage error or bad setting, 3 the server is
unreachable, 4 the key was refused, 5 the server failed (:mod:`tuneplane.client.reads`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

from tuneplane.contract import environment
from tuneplane.contract.settings import Reader

if TYPE_CHECKING:  # httpx is imported by the commands that read, not by every command
    from tuneplane.client.reads import ReadClient


def add_read_commands(commands: Any) -> Any:
    """The ``projects`` and ``runs`` commands; answers ``runs``' subparsers, for the run
    commands that write (they go beside these)."""
    projects = commands.add_parser("projects", help="read the server's projects")
    project_commands = projects.add_subparsers(dest="projects_command", required=True)
    listed = project_commands.add_parser("list", help="the projects your key may see")
    _add_server_options(listed)
    listed.set_defaults(handler=_projects_list)

    runs = commands.add_parser("runs", help="read a project's runs")
    run_commands = runs.add_subparsers(dest="runs_command", required=True)
    listing = run_commands.add_parser("list", help="a project's runs")
    listing.add_argument("project", metavar="PROJECT")
    listing.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a query parameter for GET /api/v1/projects/PROJECT/runs, as the server "
        "takes it (repeatable)",
    )
    _add_server_options(listing)
    listing.set_defaults(handler=_runs_list)
    show = run_commands.add_parser("show", help="one run: its facts, config and metrics")
    show.add_argument("target", metavar="PROJECT/RUN")
    _add_server_options(show)
    show.set_defaults(handler=_runs_show)
    export = run_commands.add_parser(
        "export", help="a run's original points as CSV (step,metric,value,log_id,time)"
    )
    export.add_argument("target", metavar="PROJECT/RUN")
    export.add_argument("--metric", help="only this metric's points")
    export.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default: stdout)")
    _add_server_options(export, json_flag=False)
    export.set_defaults(handler=_runs_export)
    return run_commands


def _add_server_options(parser: argparse.ArgumentParser, *, json_flag: bool = True) -> None:
    parser.add_argument(
        "--server", help=f"server URL (default: ${environment.URL} or {environment.DEFAULT_URL})"
    )
    parser.add_argument(
        "--data-dir",
        help=f"where to find {environment.ADMIN_KEY_FILE} when ${environment.API_KEY} is unset "
        "(default: $TUNEPLANE_DIR, $TRACKIO_DIR or ./tuneplane-data)",
    )
    if json_flag:
        parser.add_argument("--json", action="store_true", help="print the API's JSON")


def _client(args: argparse.Namespace) -> ReadClient:
    """The server and key as ``tuneplane run`` finds them (SettingError when one is bad)."""
    from tuneplane.client.reads import ReadClient
    from tuneplane.client.runner import api_key

    reader = Reader(os.environ)
    if args.server:
        server = reader.check(environment.URL_SETTING.rule, "--server", args.server)
    else:
        server = reader.read(environment.URL_SETTING)
    reader.done()
    return ReadClient(server or environment.DEFAULT_URL, api_key(args.data_dir, os.environ))


def _target(command: str, raw: str) -> tuple[str, str] | None:
    project, _, run = raw.partition("/")
    if not project or not run:
        print(f"tuneplane runs {command}: {raw!r}: name a run as PROJECT/RUN", file=sys.stderr)
        return None
    return project, run


def _read(command: str, args: argparse.Namespace, read: Any) -> int:
    """Run ``read(client)``; a failure is one line on stderr and its exit code."""
    from tuneplane.client.reads import ReadFailed

    with _client(args) as client:
        try:
            read(client)
        except ReadFailed as failed:
            print(f"tuneplane {command}: {failed.message}", file=sys.stderr)
            return failed.exit_code
    return 0


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def _projects_list(args: argparse.Namespace) -> int:
    def read(client: ReadClient) -> None:
        projects = client.projects()
        if args.json:
            _print_json(projects)
            return
        rows = [(p["project"], str(p["run_count"]), _when(p.get("updated_at"))) for p in projects]
        _table(("PROJECT", "RUNS", "UPDATED"), rows, "no projects (that your key may see)")

    return _read("projects list", args, read)


def _runs_list(args: argparse.Namespace) -> int:
    params: dict[str, str] = {}
    for pair in args.param:
        key, sign, value = pair.partition("=")
        if not key or not sign:
            print(f"tuneplane runs list: --param {pair!r}: must be KEY=VALUE", file=sys.stderr)
            return 2
        params[key] = value

    def read(client: ReadClient) -> None:
        runs = client.runs(args.project, params)
        if args.json:
            _print_json(runs)
            return
        rows = [
            (
                run["run"],
                run.get("status") or "unknown",
                _number(run.get("last_step")),
                _number(run.get("point_count")),
                _number(run.get("alert_count")),
                _when(run.get("updated_at")),
            )
            for run in runs
        ]
        header = ("RUN", "STATUS", "LAST STEP", "POINTS", "ALERTS", "UPDATED")
        _table(header, rows, f"no runs in {args.project}")

    return _read("runs list", args, read)


def _runs_show(args: argparse.Namespace) -> int:
    target = _target("show", args.target)
    if target is None:
        return 2

    def read(client: ReadClient) -> None:
        run = client.run(*target)
        if args.json:
            _print_json(run)
        else:
            _show_run(run)

    return _read("runs show", args, read)


def _show_run(run: dict[str, Any]) -> None:
    transport = run.get("transport") or {}
    facts = [
        ("run", f"{run['project']}/{run['run']}"),
        ("status", run.get("status") or "unknown"),
        ("attempt", _number(run.get("attempt"))),
        ("exit code", _number(run.get("exit_code"))),
        ("created", _when(run.get("created_at"))),
        ("updated", _when(run.get("updated_at"))),
        ("last step", _number(run.get("last_step"))),
        ("points", _number(run.get("point_count"))),
        ("alerts", _number(run.get("alert_count"))),
        ("health", transport.get("state") or "unknown"),
        ("config", json.dumps(run.get("config"), ensure_ascii=False, sort_keys=True)),
    ]
    width = max(len(name) for name, _ in facts)
    for name, value in facts:
        print(f"{name + ':':<{width + 1}} {value}")
    print()
    rows = [
        (
            m["metric"],
            _number(m.get("count")),
            _value(m.get("last")),
            _value(m.get("min")),
            _value(m.get("max")),
            _number(m.get("last_step")),
            _number(m.get("invalid_count")),
        )
        for m in run["metrics"]
    ]
    header = ("METRIC", "POINTS", "LAST", "MIN", "MAX", "LAST STEP", "INVALID")
    _table(header, rows, "no metrics yet")


def _runs_export(args: argparse.Namespace) -> int:
    target = _target("export", args.target)
    if target is None:
        return 2
    written: list[int] = []

    def read(client: ReadClient) -> None:
        if args.output is None:
            written.append(client.export_csv(*target, sys.stdout, metric=args.metric))
            return
        # Into a file beside the target, renamed into place once complete: a failed export
        # leaves no half-written file behind.
        partial = f"{args.output}.partial"
        try:
            with open(partial, "w", encoding="utf-8", newline="") as out:
                written.append(client.export_csv(*target, out, metric=args.metric))
            os.replace(partial, args.output)
        finally:
            if os.path.exists(partial):
                os.unlink(partial)

    code = _read("runs export", args, read)
    if code == 0 and args.output is not None:
        print(f"tuneplane: {written[0]} points written to {args.output}", file=sys.stderr)
    if code == 0 and args.metric and not written[0]:
        print(f"tuneplane runs export: no points of metric {args.metric!r}", file=sys.stderr)
        return 1
    return code


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], empty: str) -> None:
    """Columns aligned to their widest cell; ``empty`` (on stderr) when there is no row."""
    if not rows:
        print(empty, file=sys.stderr)
        return
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    out: IO[str] = sys.stdout
    for line in (header, *rows):
        cells = [str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)]
        out.write("  ".join(cells).rstrip() + "\n")


def _when(stamp: float | None) -> str:
    if stamp is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(stamp))


def _number(value: int | None) -> str:
    return "-" if value is None else str(value)


def _value(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"
