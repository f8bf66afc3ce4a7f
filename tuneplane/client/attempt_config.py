"""The config a training process declares once its attempt has started: ``init(config=…)``
(a Trainer's arguments and model configuration, through ``TuneplaneCallback``) under
``tuneplane run``, whose runner created the run and started the attempt before the
training code knew its config.

It is sent with the attempt's ingest token to ``POST /api/v1/ingest/config``: recorded on
the attempt (written once: the same config again is fine, another is refused), and as the
run's config while the run has none (the runner's ``--config`` wins otherwise, and the run
page lists the attempt's as differing).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import orjson

from tuneplane.client.spool import Journal, Target
from tuneplane.client.transport import RetryPolicy, Transport
from tuneplane.contract.limits import RUN_CONFIG_MAX_BYTES

CONFIG_PATH: Final = "/api/v1/ingest/config"
#: As the runner's own setup calls: a server that is down must not delay training long.
CONFIG_RETRY: Final = RetryPolicy(attempts=3, first_delay=0.25, max_delay=1.0)
CONFIG_TIMEOUT: Final = 5.0


def config_body(config: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """``({"config": …}, "")`` ready to send, or ``(None, why not)``: a config that is not
    a mapping of JSON values (anything else is sent as its text, as the callback does),
    is empty or is over the config limit."""
    try:
        safe = orjson.loads(orjson.dumps(dict(config), default=str, option=orjson.OPT_NON_STR_KEYS))
    except (TypeError, ValueError, orjson.JSONEncodeError) as exc:
        return None, f"the config cannot be read as JSON ({exc})"
    if not safe:
        return None, "the config is empty"
    size = len(orjson.dumps(safe))
    if size > RUN_CONFIG_MAX_BYTES:
        return None, f"the config is {size} bytes as JSON; at most {RUN_CONFIG_MAX_BYTES}"
    return {"config": safe}, ""


def send_config(
    endpoint: str, token: str, body: Mapping[str, Any], attempt: int | None
) -> tuple[bool, str]:
    """POST the config; ``(answered, one line for stderr)``. ``answered`` is False only
    when the server could not be reached (the caller may journal it for ``tuneplane
    sync``); a refusal is answered, with the server's own words."""
    transport = Transport(endpoint, token, timeout=CONFIG_TIMEOUT)
    try:
        return post_config(transport, body, attempt)
    finally:
        transport.close()


def post_config(
    transport: Transport, body: Mapping[str, Any], attempt: int | None
) -> tuple[bool, str]:
    """:func:`send_config` through a transport of the caller's; ``body["add"]`` says
    whether these are keys added by ``run.config.update()``."""
    added = bool(body.get("add"))
    what, now, then = (
        ("config.update()'s keys", "are", "were") if added else ("init()'s config", "is", "was")
    )
    outcome = transport.post(CONFIG_PATH, dict(body), retry=CONFIG_RETRY)
    if outcome.delivered:
        answer = outcome.body if isinstance(outcome.body, dict) else {}
        recorded = answer.get("recorded")
        if not isinstance(recorded, dict):
            recorded = {}
        where = "and as the run's config" if recorded.get("run") else "(the run keeps its own)"
        return True, f"{what} {now} recorded on attempt {attempt} {where}"
    said = f": {outcome.detail}" if outcome.detail else ""
    if outcome.rejected:
        return True, f"warning: {what} {then} refused ({outcome.status}{said})"
    return False, f"warning: {what} {then} not delivered ({outcome.reason}{said})"


def journal_config(root: Path, target: Target, max_mb: int, body: Mapping[str, Any]) -> bool:
    """Journal the config for ``tuneplane sync`` (offline, or the server unreachable);
    False when the spool could not take it (the journal says why)."""
    journal = Journal(root, target, max_mb * 2**20)
    try:
        return journal.append(CONFIG_PATH, "config", 1, orjson.dumps(dict(body))) is not None
    finally:
        journal.close()
