"""The webhook sender of one server process: sends queued deliveries (store/webhooks.py)
after the alerts that queued them committed, signs each body, retries a failure with a
doubling wait and records every try in the delivery log. It runs beside the requests:
an endpoint that is down or slow delays only its own deliveries, never ingest.

Each body carries ``X-Tuneplane-Signature: sha256=<hex>``, the HMAC-SHA256 of the exact
bytes sent under the webhook's secret, ``X-Tuneplane-Event`` (``alert.opened`` or
``alert.resolved``) and ``X-Tuneplane-Delivery`` (the delivery's id: a receiver that saw
it already can ignore a retry).

Deliveries go out by the outbound policy (server/outbound.py): a URL whose name now
resolves to an address the policy refuses is logged "refused by policy", and every way of
getting no HTTP answer at all is logged as the one word "failed".
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import time
from typing import Final

import httpx
from starlette.concurrency import run_in_threadpool

from tuneplane.contract.alert_rules import SIGNATURE_HEADER, WEBHOOK_TIMEOUT_SECONDS
from tuneplane.contract.version import __version__
from tuneplane.server.alerting import AlertEngine
from tuneplane.server.outbound import OutboundPolicy, Refused
from tuneplane.store import alert_episodes, webhooks
from tuneplane.store.database import Database
from tuneplane.store.webhooks import Due

logger = logging.getLogger("tuneplane")
#: Seconds between two looks for due deliveries when nothing wakes the sender (retries,
#: and deliveries queued by other server processes).
POLL_SECONDS: Final = 2.0
#: A delivery's error when no HTTP answer came, whatever the reason.
FAILED: Final = "failed"


def signature(secret: str, body: bytes) -> str:
    """The signature header's value: ``sha256=`` and the hex HMAC-SHA256 of ``body``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


async def _send(client: httpx.AsyncClient, due: Due) -> tuple[int | None, str | None]:
    headers = {
        "Content-Type": "application/json",
        "User-Agent": f"tuneplane/{__version__}",
        SIGNATURE_HEADER: signature(due.secret, due.body),
        "X-Tuneplane-Event": due.event,
        "X-Tuneplane-Delivery": str(due.id),
    }
    try:
        answer = await client.post(due.url, content=due.body, headers=headers)
    except Refused as exc:
        return None, f"refused by policy: {exc}"
    except (httpx.HTTPError, httpx.InvalidURL):
        # One word for every way of not getting an answer: a refused connection, a timeout
        # and a TLS error read differently would let an editor map the network, port by port.
        return None, FAILED
    if 200 <= answer.status_code < 300:
        return answer.status_code, None
    return answer.status_code, f"HTTP {answer.status_code}"


async def _send_in_order(
    client: httpx.AsyncClient, group: list[Due]
) -> list[tuple[Due, tuple[int | None, str | None]]]:
    return [(delivery, await _send(client, delivery)) for delivery in group]


def _any_due(database: Database, now: float) -> bool:
    with database.connect() as connection:
        return bool(webhooks.claim_candidates(connection, now))


async def deliver_due(database: Database, client: httpx.AsyncClient, first_retry: float) -> int:
    """Send every delivery whose time has come; returns how many were tried."""
    if not await run_in_threadpool(_any_due, database, time.time()):
        return 0
    due = await database.write(webhooks.claim_due, time.time())
    if not due:
        return 0
    by_alert: dict[tuple[str, str], list[Due]] = {}
    for delivery in due:
        episode = alert_episodes.episode_alert(delivery.alert_id)
        by_alert.setdefault((delivery.url, episode), []).append(delivery)
    # Everything at once but one episode's deliveries to one endpoint, which go in order: a
    # receiver never sees an alert resolved before it opened.
    sent = await asyncio.gather(*(_send_in_order(client, group) for group in by_alert.values()))
    for delivery, (status, error) in (tried for group in sent for tried in group):
        state = await database.write(webhooks.record_attempt, delivery, status, error, first_retry)
        if state == "failed":
            logger.warning("tuneplane: webhook delivery %d failed for good: %s", delivery.id, error)
    return len(due)


async def deliver_forever(
    engine: AlertEngine, database: Database, first_retry: float, outbound: OutboundPolicy
) -> None:
    wanted = engine.delivery_wanted
    async with outbound.client(WEBHOOK_TIMEOUT_SECONDS) as client:
        while not engine.stopping.is_set():
            wanted.clear()
            try:
                tried = await deliver_due(database, client, first_retry)
            except Exception as exc:  # the store is down, say: try again later
                logger.warning("tuneplane: webhook deliveries not sent: %s", exc)
                tried = 0
            if not tried:
                waits = [asyncio.ensure_future(e.wait()) for e in (wanted, engine.stopping)]
                await asyncio.wait(waits, timeout=POLL_SECONDS, return_when="FIRST_COMPLETED")
                for waiting in waits:
                    waiting.cancel()
