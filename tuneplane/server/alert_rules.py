"""``/api/v1/projects/{project}/alert-rules`` and ``…/webhooks``: a project's alert rules
(readers read them, editors and owners change them) and its webhooks with their delivery
logs (editors and owners only: a webhook URL is often a credential itself, as Slack's
are). See docs/alerts.md."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any, Final

from fastapi import APIRouter, Path, Request
from sqlalchemy import Connection
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from tuneplane.contract.alert_rules import parse_webhook
from tuneplane.contract.errors import InvalidInput, Violation
from tuneplane.server.body import read_json
from tuneplane.server.guard import GuardedRoute
from tuneplane.server.responses import JSON
from tuneplane.server.state import app_state
from tuneplane.store import alert_episodes, alert_rules, webhooks

router = APIRouter(prefix="/api/v1/projects/{project}", tags=["alerts"], route_class=GuardedRoute)
_BODY_MAX: Final = 16 * 1024
RuleId = Annotated[int, Path(ge=1, le=2**31 - 1, description="the rule's id")]
WebhookId = Annotated[int, Path(ge=1, le=2**31 - 1, description="the webhook's id")]


async def _read(request: Request, fn: Any, *args: Any) -> Any:
    def work() -> Any:
        with app_state(request).database.connect() as connection:
            return fn(connection, *args)

    return await run_in_threadpool(work)


async def _change(request: Request, project: str, fn: Any, *args: Any) -> Any:
    state = app_state(request)
    result = await state.database.write(fn, project, *args)
    state.alerts.forget(project)  # this process at once; the others by the version
    return result


def _rules_with_open(connection: Connection, project: str) -> list[dict[str, Any]]:
    rules = alert_rules.list_rules(connection, project)
    watches = alert_episodes.open_watches_of(connection, [rule["id"] for rule in rules])
    opened = Counter(rule_id for rule_id, _run, _subject in watches)
    return [{**rule, "open_episodes": opened[rule["id"]]} for rule in rules]


@router.get("/alert-rules")
async def list_rules(request: Request, project: str) -> Response:
    """The project's alert rules (its runs' included, each with its ``run``), each with
    ``open_episodes``: how many of its episodes are open (firing) now."""
    return JSON({"rules": await _read(request, _rules_with_open, project)})


@router.post("/alert-rules", status_code=201)
async def create_rule(request: Request, project: str) -> Response:
    """A new rule: ``kind`` (nan, threshold, change, stall, heartbeat, eval_drop) and its
    fields; ``run`` limits it to one run. A broken field is a 422 naming it."""
    body = await read_json(request, _BODY_MAX)
    return JSON(await _change(request, project, alert_rules.create_rule, body), status_code=201)


def _rule_with_episodes(connection: Connection, project: str, rule_id: int) -> dict[str, Any]:
    rule = alert_rules.get_rule(connection, project, rule_id)
    return {**rule, "episodes": alert_episodes.list_episodes(connection, rule_id)}


@router.get("/alert-rules/{rule_id}")
async def read_rule(request: Request, project: str, rule_id: RuleId) -> Response:
    """One rule, with its latest episodes (newest first; ``resolved_at`` null: open)."""
    return JSON(await _read(request, _rule_with_episodes, project, rule_id))


@router.patch("/alert-rules/{rule_id}")
async def update_rule(request: Request, project: str, rule_id: RuleId) -> Response:
    """Change a rule's fields (``enabled``: false pauses it); its kind stays."""
    body = await read_json(request, _BODY_MAX)
    return JSON(await _change(request, project, alert_rules.update_rule, rule_id, body))


@router.delete("/alert-rules/{rule_id}")
async def delete_rule(request: Request, project: str, rule_id: RuleId) -> Response:
    """Delete a rule and its episodes; the alerts it raised stay on their runs."""
    await _change(request, project, alert_rules.delete_rule, rule_id)
    return JSON({"deleted": rule_id})


def _project(connection: Connection, project: str) -> int:
    return alert_rules.project_id_of(connection, project)


@router.get("/webhooks")
async def list_webhooks(request: Request, project: str) -> Response:
    """The project's webhooks (their secrets are never shown again)."""

    def read(connection: Connection) -> list[dict[str, Any]]:
        return webhooks.list_webhooks(connection, _project(connection, project))

    return JSON({"webhooks": await _read(request, read)})


@router.post("/webhooks", status_code=201)
async def create_webhook(request: Request, project: str) -> Response:
    """A webhook: ``url``, ``format`` (``json``, or ``slack`` for ``{"text": …}``), ``name``.
    The answer carries its signing ``secret``, shown this once. A URL the outbound policy
    refuses (a loopback or private address, unless the operator allows it) is a 422."""
    spec = parse_webhook(await read_json(request, _BODY_MAX))
    # Judged again at every delivery: what a name resolves to may change.
    problem = await app_state(request).outbound.problem_with(spec.url)
    if problem is not None:
        raise InvalidInput((Violation("url", problem),))

    def write(connection: Connection) -> dict[str, Any]:
        return webhooks.create_webhook(connection, _project(connection, project), spec)

    return JSON(await app_state(request).database.write(write), status_code=201)


@router.delete("/webhooks/{webhook_id}")
async def delete_webhook(request: Request, project: str, webhook_id: WebhookId) -> Response:
    """Delete a webhook and its delivery log."""

    def write(connection: Connection) -> None:
        webhooks.delete_webhook(connection, _project(connection, project), webhook_id)

    await app_state(request).database.write(write)
    return JSON({"deleted": webhook_id})


@router.get("/webhooks/{webhook_id}/deliveries")
async def list_deliveries(request: Request, project: str, webhook_id: WebhookId) -> Response:
    """The webhook's delivery log, newest first: each alert event, its state (pending,
    sending, delivered, failed), tries, last HTTP status and error."""

    def read(connection: Connection) -> list[dict[str, Any]]:
        return webhooks.list_deliveries(connection, _project(connection, project), webhook_id)

    return JSON({"deliveries": await _read(request, read)})
