"""``tuneplane launch recipes | preview | submit | jobs | cancel``: launching jobs from the
server's recipes (docs/launch.md), with the user's key as ``tuneplane run`` finds it.

Exit codes: 0 done (a preview: ready), 1 not ready, or refused (a failed check, admission,
a run that exists), 2 a usage error or bad setting, 3 the server is unreachable (a preview
that could not be made is never a passing one), 4 the key was refused, 5 the server failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from tuneplane.contract import environment
from tuneplane.contract.settings import Reader


def _connection_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--server", help=f"server URL (default: ${environment.URL} or {environment.DEFAULT_URL})"
    )
    parser.add_argument(
        "--data-dir",
        help=f"where to find {environment.ADMIN_KEY_FILE} when ${environment.API_KEY} is unset",
    )


def _launch_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--project", required=True, help="the project (it must exist)")
    parser.add_argument("recipe", metavar="RECIPE", help="a recipe's name")
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a parameter (VALUE is read as JSON when it is JSON: 3, 1e-5, true; else text)",
    )
    parser.add_argument("--config", help="the config: a JSON object, or @FILE holding one")


def add_launch_commands(commands: Any) -> None:
    parser = commands.add_parser("launch", help="launch jobs from the server's recipes")
    actions = parser.add_subparsers(dest="launch_command", required=True)
    recipes = actions.add_parser("recipes", help="list the server's recipes")
    preview = actions.add_parser(
        "preview", help="check a launch without starting it (exit 0 when ready)"
    )
    submit = actions.add_parser("submit", help="check again and launch a job")
    jobs = actions.add_parser("jobs", help="list a project's launched jobs")
    cancel = actions.add_parser("cancel", help="cancel a launched job")
    for action in (recipes, preview, submit, jobs, cancel):
        _connection_flags(action)
    for action in (preview, submit):
        _launch_flags(action)
    submit.add_argument("--run", help="the new run's ID (default: <recipe>-<8 hex digits>)")
    submit.add_argument("--key", help="an Idempotency-Key: a retry with it starts nothing new")
    for action in (jobs, cancel):
        action.add_argument("--project", required=True)
    cancel.add_argument("job", type=int, metavar="JOB_ID")
    for action, handler in (
        (recipes, _recipes),
        (preview, _preview),
        (submit, _submit),
        (jobs, _jobs),
        (cancel, _cancel),
    ):
        action.set_defaults(handler=handler)


class UsageError(Exception):
    pass


def _value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def launch_body(args: argparse.Namespace) -> dict[str, Any]:
    """The request body of ``preview`` and ``submit``; :class:`UsageError` when it is bad."""
    parameters = {}
    for item in args.param:
        name, sep, raw = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--param {item!r}: must be NAME=VALUE")
        parameters[name] = _value(raw)
    config: Any = {}
    if args.config:
        text = args.config
        try:
            text = Path(text[1:]).read_text() if text.startswith("@") else text
            config = json.loads(text)
        except (OSError, ValueError) as exc:
            raise UsageError(f"--config: {exc}") from exc
    body = {"recipe": args.recipe, "parameters": parameters, "config": config}
    if getattr(args, "run", None):
        body["run"] = args.run
    return body


def _run_command(args: argparse.Namespace, work: Any) -> int:
    from tuneplane.client.launching import LaunchApi, LaunchFailed
    from tuneplane.client.runner import api_key

    name = f"tuneplane launch {args.launch_command}"
    reader = Reader(os.environ)
    if args.server:
        server = reader.check(environment.URL_SETTING.rule, "--server", args.server)
    else:
        server = reader.read(environment.URL_SETTING)
    reader.done()
    try:
        api = LaunchApi(server or environment.DEFAULT_URL, api_key(args.data_dir, os.environ))
        try:
            code: int = work(api)
        finally:
            api.close()
    except UsageError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    except LaunchFailed as failed:
        what = "check request failed: " if args.launch_command == "preview" else ""
        print(f"{name}: {what}{failed.message}", file=sys.stderr)
        details = (failed.answer or {}).get("error", {}).get("details", [])
        for detail in details:
            print(f"  {detail['field']}: {detail['rule']}", file=sys.stderr)
        return failed.exit_code
    return code


def _recipes(args: argparse.Namespace) -> int:
    def work(api: Any) -> int:
        for recipe in api.recipes():
            print(
                f"{recipe['name']}\t{recipe['kind']}\t{recipe['engine']}\t{recipe['description']}"
            )
        return 0

    return _run_command(args, work)


def _preview(args: argparse.Namespace) -> int:
    def work(api: Any) -> int:
        shown = api.preview(args.project, launch_body(args))
        for check in shown["checks"]:
            print(f"{check['status']:<12} {check['title']}: {check['reason']}")
        print("Never checked:")
        for item in shown["not_checked"]:
            print(f"  - {item['reason']}")
        print("ready" if shown["ready"] else "not ready")
        return 0 if shown["ready"] else 1

    return _run_command(args, work)


def _submit(args: argparse.Namespace) -> int:
    def work(api: Any) -> int:
        made = api.submit(args.project, launch_body(args), args.key)
        job = made["job"]
        again = "" if made["created"] else " (submitted before with this key)"
        print(
            f"job {job['id']}: {args.project}/{job['run']} attempt {job['attempt']}, "
            f"{job['state']}{again}"
        )
        return 0

    return _run_command(args, work)


def _jobs(args: argparse.Namespace) -> int:
    def work(api: Any) -> int:
        for job in api.jobs(args.project):
            print(
                f"{job['id']}\t{job['run']}\t{job['recipe']}\t{job['state']}\t"
                f"{job['attempt_status'] or '-'}\t{job['reason']}"
            )
        return 0

    return _run_command(args, work)


def _cancel(args: argparse.Namespace) -> int:
    def work(api: Any) -> int:
        job = api.cancel(args.project, args.job)
        print(f"job {job['id']}: {job['state']}")
        return 0

    return _run_command(args, work)
