"""A project's webhooks and their delivery log, which is also the queue the server's
deliverer works from: a delivery is queued in the transaction that stores its alert, and
sent after it commits, so ingest never waits for a webhook (docs/alerts.md).

The secret of a webhook signs every body it is sent (HMAC-SHA256), so the server must
hold it as it is: it is stored in the database as given out, and shown once, on creation.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Connection, delete, func, insert, select, update

from tuneplane.contract.alert_rules import (
    WEBHOOK_ATTEMPTS,
    WEBHOOK_BACKOFF_MAX_SECONDS,
    WEBHOOK_SECRET_PREFIX,
    WEBHOOKS_PER_PROJECT_MAX,
    WebhookSpec,
)
from tuneplane.contract.errors import InvalidInput, NotFound, Violation
from tuneplane.store.schema import webhook_deliveries, webhooks

#: Seconds a claimed delivery stays claimed before another sender may take it.
CLAIM_SECONDS = 120.0
_ERROR_MAX = 1024


def _json(row: Any) -> dict[str, Any]:
    return {"id": row.id, "name": row.name, "url": row.url, "format": row.format,
            "created_at": row.created_at}  # fmt: skip


def create_webhook(connection: Connection, project_id: int, spec: WebhookSpec) -> dict[str, Any]:
    """A new webhook; the answer carries its secret, which is never shown again."""
    held = connection.execute(
        select(func.count()).select_from(webhooks).where(webhooks.c.project_id == project_id)
    ).scalar_one()
    if held >= WEBHOOKS_PER_PROJECT_MAX:
        raise InvalidInput(
            (Violation("webhooks", f"a project holds at most {WEBHOOKS_PER_PROJECT_MAX}"),)
        )
    secret = WEBHOOK_SECRET_PREFIX + secrets.token_urlsafe(32)
    created = connection.execute(
        insert(webhooks)
        .values(project_id=project_id, name=spec.name, url=spec.url, format=spec.format,
                secret=secret, created_at=time.time())
        .returning(webhooks)
    ).one()  # fmt: skip
    return {**_json(created), "secret": secret}


def list_webhooks(connection: Connection, project_id: int) -> list[dict[str, Any]]:
    query = select(webhooks).where(webhooks.c.project_id == project_id).order_by(webhooks.c.id)
    return [_json(row) for row in connection.execute(query)]


def _check(connection: Connection, project_id: int, webhook_id: int) -> None:
    found = connection.execute(
        select(webhooks.c.id).where(
            webhooks.c.project_id == project_id, webhooks.c.id == webhook_id
        )
    ).first()
    if found is None:
        raise NotFound(f"webhook: the project has no webhook {webhook_id}")


def delete_webhook(connection: Connection, project_id: int, webhook_id: int) -> None:
    """Delete a webhook and its delivery log (what is queued is not sent)."""
    _check(connection, project_id, webhook_id)
    connection.execute(
        delete(webhook_deliveries).where(webhook_deliveries.c.webhook_id == webhook_id)
    )
    connection.execute(delete(webhooks).where(webhooks.c.id == webhook_id))


def list_deliveries(
    connection: Connection, project_id: int, webhook_id: int, limit: int = 100
) -> list[dict[str, Any]]:
    """A webhook's deliveries, newest first."""
    _check(connection, project_id, webhook_id)
    query = (
        select(webhook_deliveries)
        .where(webhook_deliveries.c.webhook_id == webhook_id)
        .order_by(webhook_deliveries.c.id.desc())
        .limit(limit)
    )
    return [
        {"id": row.id, "alert_id": row.alert_id, "event": row.event, "state": row.state,
         "attempts": row.attempts, "last_status": row.last_status, "last_error": row.last_error,
         "created_at": row.created_at, "finished_at": row.finished_at,
         "next_at": row.next_at if row.state == "pending" else None}
        for row in connection.execute(query)
    ]  # fmt: skip


def _slack_text(payload: dict[str, Any]) -> str:
    alert = payload["alert"]
    mark = "resolved" if payload["event"] == "alert.resolved" else alert["level"]
    return f"[{mark}] {payload['project']}/{payload['run']}: {alert['title']}"


def body_of(format: str, payload: dict[str, Any]) -> bytes:
    """What a webhook of ``format`` is sent: the payload, or Slack's ``{"text": …}``."""
    if format == "slack":
        return orjson.dumps({"text": _slack_text(payload)})
    return orjson.dumps(payload)


def enqueue(connection: Connection, project_id: int, run_id: int, payload: dict[str, Any]) -> int:
    """Queue an alert event for every webhook of the project; returns how many."""
    hooks = connection.execute(
        select(webhooks.c.id, webhooks.c.format).where(webhooks.c.project_id == project_id)
    ).all()
    now = time.time()
    for hook in hooks:
        connection.execute(
            insert(webhook_deliveries).values(
                webhook_id=hook.id, run_id=run_id, alert_id=payload["alert"]["alert_id"],
                event=payload["event"], body=body_of(hook.format, payload).decode(),
                state="pending", attempts=0, next_at=now, created_at=now,
            )
        )  # fmt: skip
    return len(hooks)


@dataclass(frozen=True, slots=True)
class Due:
    id: int
    url: str
    alert_id: str
    secret: str
    event: str
    body: bytes
    attempts: int


def claim_candidates(connection: Connection, now: float) -> list[int]:
    """Ids of a few deliveries whose time has come (a read: most looks find none)."""
    query = (
        select(webhook_deliveries.c.id)
        .where(webhook_deliveries.c.state.in_(("pending", "sending")),
               webhook_deliveries.c.next_at <= now)
        .limit(1)
    )  # fmt: skip
    return [int(found) for (found,) in connection.execute(query)]


def claim_due(connection: Connection, now: float, limit: int = 32) -> list[Due]:
    """Deliveries whose time has come, in the order they are due and were made (an alert's
    opening before its resolving when both came in one write), claimed for this sender (a
    delivery another sender claimed first is left to it)."""
    rows = connection.execute(
        select(webhook_deliveries.c.id, webhook_deliveries.c.state, webhooks.c.url,
               webhook_deliveries.c.alert_id, webhooks.c.secret, webhook_deliveries.c.event,
               webhook_deliveries.c.body, webhook_deliveries.c.attempts)
        .join(webhooks, webhooks.c.id == webhook_deliveries.c.webhook_id)
        .where(webhook_deliveries.c.state.in_(("pending", "sending")),
               webhook_deliveries.c.next_at <= now)
        .order_by(webhook_deliveries.c.next_at, webhook_deliveries.c.id)
        .limit(limit)
    ).all()  # fmt: skip
    claimed = []
    for row in rows:
        taken = connection.execute(
            update(webhook_deliveries)
            .where(webhook_deliveries.c.id == row.id, webhook_deliveries.c.state == row.state,
                   webhook_deliveries.c.next_at <= now)
            .values(state="sending", next_at=now + CLAIM_SECONDS)
        ).rowcount  # fmt: skip
        if taken:
            claimed.append(
                Due(
                    row.id,
                    row.url,
                    row.alert_id,
                    row.secret,
                    row.event,
                    row.body.encode(),
                    row.attempts,
                )
            )
    return claimed


def backoff(attempts: int, first: float) -> float:
    """Seconds before the next try after ``attempts`` failed ones: doubling from ``first``,
    at most ``WEBHOOK_BACKOFF_MAX_SECONDS``."""
    return float(min(WEBHOOK_BACKOFF_MAX_SECONDS, first * 2 ** (attempts - 1)))


def record_attempt(
    connection: Connection, delivery: Due, status: int | None, error: str | None, first_retry: float
) -> str:
    """Record one try (``error`` None: delivered); returns the delivery's new state."""
    now = time.time()
    attempts = delivery.attempts + 1
    if error is None:
        state, next_at, finished = "delivered", now, now
    elif attempts >= WEBHOOK_ATTEMPTS:
        state, next_at, finished = "failed", now, now
    else:
        state, next_at, finished = "pending", now + backoff(attempts, first_retry), None
    connection.execute(
        update(webhook_deliveries)
        .where(webhook_deliveries.c.id == delivery.id)
        .values(state=state, attempts=attempts, next_at=next_at, last_status=status,
                last_error=None if error is None else error[:_ERROR_MAX], finished_at=finished)
    )  # fmt: skip
    return state
