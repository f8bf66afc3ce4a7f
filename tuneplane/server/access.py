"""Who is asking, and whether they may: the route -> action table, the actor of a request,
and the decision the guard every route runs makes (``server/guard.py``).

Every route of the app is in :data:`RULES` (a test walks the app's routes against it, and
against every kind of caller); a route missing from it is refused, never served. A route's
action is decided by :func:`tuneplane.contract.access.decide` for the project (and run) its
path names. Credentials, in the order they are looked at:

* ``Authorization: Bearer tpk_…``: an API key (an account's, or the admin key);
* ``Authorization: Bearer tpl_…``: a share link, which opens one run;
* the session cookie of a signed-in browser, whose writes must also carry the page's
  origin and its CSRF token (:func:`csrf_token`);
* nothing, or any other credential (the Arena secret): anonymous.

Ingest tokens are refused on every route but their own before any of this runs
(``server/auth.py``); the Arena secret is checked by ``POST /ingest`` itself and is nobody
here.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import Final, Literal

from fastapi import Request
from sqlalchemy import Connection

from tuneplane.contract.access import (
    ANONYMOUS,
    PROJECT_ACTIONS,
    SESSION_PREFIX,
    SHARE_LINK_PREFIX,
    Action,
    Actor,
    Credential,
    ProjectFacts,
    decide,
)
from tuneplane.contract.environment import API_KEY_PREFIX
from tuneplane.contract.errors import Forbidden, NotFound, Unauthorized
from tuneplane.server.auth import bearer
from tuneplane.server.state import app_state
from tuneplane.store import access, accounts, credentials

SESSION_COOKIE: Final = "tuneplane_session"
#: A share link opened in a browser (``POST /api/v1/share-session``): reads of its run only.
SHARE_COOKIE: Final = "tuneplane_share"
CSRF_HEADER: Final = "x-csrf-token"
_SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})

#: How a route is authorized besides the actions: its own credential, or nobody at all.
Special = Literal[
    "ingest-token", "arena-secret", "trackio-token", "anyone", "create-run", "sign-in"
]


@dataclass(frozen=True, slots=True)
class Rule:
    action: Action | Special
    #: Query parameters naming ``project/run/…`` that each need ``action`` (matched views).
    query_targets: tuple[str, ...] = ()
    #: A project-wide read whose answer holds only the runs named by ``?runs=``: narrowed to
    #: one run, a share link of that run may read it. Every other project-wide route stays
    #: closed to share links, whatever the query says.
    narrows_to_runs: bool = False


_API = "/api/v1/projects/{project}"
_RUN = _API + "/runs/{run}"
_READ = Rule("read-run")
_READ_RUNS = Rule("read-run", narrows_to_runs=True)

#: Every route: (method, path template) -> rule. HEAD follows GET.
RULES: Final[dict[tuple[str, str], Rule]] = {
    # Meta and the API's own description.
    ("GET", "/healthz"): Rule("anyone"),
    ("GET", "/livez"): Rule("anyone"),
    ("GET", "/openapi.json"): Rule("view-instance"),
    ("GET", "/docs"): Rule("view-instance"),
    # Writers with their own credentials.
    ("POST", "/ingest"): Rule("arena-secret"),
    ("POST", "/api/v1/ingest/scalars"): Rule("ingest-token"),
    ("POST", "/api/v1/ingest/logs"): Rule("ingest-token"),
    ("POST", "/api/v1/ingest/status"): Rule("ingest-token"),
    ("POST", "/api/v1/ingest/observations"): Rule("ingest-token"),
    ("POST", "/api/v1/ingest/heartbeat"): Rule("ingest-token"),
    ("POST", "/api/v1/ingest/alerts"): Rule("ingest-token"),
    ("POST", "/api/v1/ingest/trajectories"): Rule("ingest-token"),
    ("POST", "/api/v1/ingest/config"): Rule("ingest-token"),
    # The Trackio protocol (server/trackio.py): the write token in x-trackio-write-token is
    # an API key, which each route resolves and holds to write-run / create-project (or
    # read-run) for the projects its body names, as POST /ingest checks its own secret.
    # GET /version answers anyone: a client it fails never gets far enough to hear why.
    ("GET", "/version"): Rule("anyone"),
    ("POST", "/api/get_runs_for_project"): Rule("trackio-token"),
    ("POST", "/api/get_run_summary"): Rule("trackio-token"),
    ("POST", "/api/bulk_log"): Rule("trackio-token"),
    ("POST", "/api/bulk_log_system"): Rule("trackio-token"),
    ("POST", "/api/bulk_alert"): Rule("trackio-token"),
    ("POST", "/api/upload"): Rule("trackio-token"),
    ("POST", "/api/bulk_upload_media"): Rule("trackio-token"),
    # Dashboard pages: the same rules as the data they show.
    ("GET", "/"): Rule("view-instance"),
    ("GET", "/projects/{project}"): _READ,
    ("GET", "/projects/{project}/runs/{run}"): _READ,
    # Its messages come from the body route, which asks for the content permission.
    ("GET", "/projects/{project}/runs/{run}/trajectory"): _READ,
    # Owners and editors: editors manage share links there; the page asks the API for the
    # rest (visibility and members answer owners only) and shows what it is given.
    ("GET", "/projects/{project}/access"): Rule("share-run"),
    # Readers see the rules; the page asks the API for webhooks, which answer editors only.
    ("GET", "/projects/{project}/alerts"): _READ,
    # Launching: the recipes and the form ask the API, which answers signed-in callers and
    # (previews, submissions) editors; a re-run's form reads the run it starts from.
    ("GET", "/projects/{project}/launch"): _READ,
    ("GET", "/projects/{project}/launch/recipes/{recipe}"): _READ,
    ("GET", "/projects/{project}/launch/matched"): _READ,
    ("GET", "/compare"): Rule("view-instance"),
    ("GET", "/reports"): Rule("view-instance"),
    ("GET", "/matched"): Rule("view-instance"),
    # Reads.
    ("GET", "/api/v1/projects"): Rule("view-instance"),
    ("GET", _API + "/runs"): _READ,
    ("GET", _API + "/metrics"): _READ_RUNS,
    ("GET", _API + "/points/{metric}"): _READ_RUNS,
    ("GET", _API + "/points"): _READ_RUNS,
    ("GET", _API + "/groups/points"): _READ_RUNS,
    ("GET", _API + "/stream"): _READ_RUNS,
    ("GET", _RUN): _READ,
    ("GET", _RUN + "/metrics"): _READ,
    ("GET", _RUN + "/metrics/{metric}"): _READ,
    ("GET", _RUN + "/points/{metric}"): _READ,
    ("GET", _RUN + "/points"): _READ,
    ("GET", _RUN + "/columns"): _READ,
    ("GET", _API + "/columns"): _READ_RUNS,
    ("GET", _RUN + "/invalid/{metric}"): _READ,
    ("GET", _RUN + "/invalid"): _READ,
    ("GET", _RUN + "/alerts"): _READ,
    ("GET", _RUN + "/export.csv"): _READ,
    ("GET", _RUN + "/stream"): _READ,
    ("GET", _RUN + "/observations"): _READ,
    ("GET", _RUN + "/exports"): _READ,
    ("GET", _RUN + "/evaluation"): _READ,
    ("GET", _RUN + "/evaluation/{round_id}"): _READ,
    ("GET", _RUN + "/evaluation/{round_id}/trials"): _READ,
    ("GET", _RUN + "/evaluation/{round_id}/trials/{trial_id}"): _READ,
    ("GET", "/api/v1/evaluation/matched"): Rule("read-run", query_targets=("left", "right")),
    ("GET", "/api/v1/evaluation/matched/trials"): Rule("read-run", query_targets=("left", "right")),
    # Both sides' messages: the content permission on each side's project.
    ("GET", "/api/v1/evaluation/matched/trials/{trial_id}"): Rule(
        "read-trajectory-body", query_targets=("left", "right")
    ),
    # The index says what exists and what became of each body; the bodies themselves need
    # the content permission; owners delete them early.
    ("GET", _RUN + "/trajectories"): _READ,
    ("GET", _RUN + "/trajectories/{trajectory}"): Rule("read-trajectory-body"),
    ("GET", _RUN + "/trajectories/{trajectory}/search"): Rule("read-trajectory-body"),
    ("DELETE", _RUN + "/trajectories"): Rule("manage-project"),
    # Diagnoses cite log lines: they are read as the logs are; editors ask for another.
    ("GET", _RUN + "/diagnoses"): Rule("read-logs"),
    ("POST", _RUN + "/diagnoses"): Rule("write-run"),
    ("GET", _RUN + "/logs"): Rule("read-logs"),
    ("GET", _RUN + "/logs/stream"): Rule("read-logs"),
    # Alert rules: readers read them, editors and owners change them. Webhooks and their
    # delivery logs: editors and owners only (a webhook URL is often a credential).
    ("GET", _API + "/alert-rules"): _READ,
    ("POST", _API + "/alert-rules"): Rule("write-run"),
    ("GET", _API + "/alert-rules/{rule_id}"): _READ,
    ("PATCH", _API + "/alert-rules/{rule_id}"): Rule("write-run"),
    ("DELETE", _API + "/alert-rules/{rule_id}"): Rule("write-run"),
    ("GET", _API + "/webhooks"): Rule("write-run"),
    ("POST", _API + "/webhooks"): Rule("write-run"),
    ("DELETE", _API + "/webhooks/{webhook_id}"): Rule("write-run"),
    ("GET", _API + "/webhooks/{webhook_id}/deliveries"): Rule("write-run"),
    # Writes by people.
    ("POST", _API + "/runs"): Rule("create-run"),
    ("POST", _RUN + "/attempts"): Rule("write-run"),
    # A run's display name, group, tags and note (editors); deleting runs and projects
    # (owners).
    ("PATCH", _RUN): Rule("write-run"),
    ("DELETE", _RUN): Rule("manage-project"),
    ("DELETE", _API): Rule("manage-project"),
    # Signing in and out, the first administrator, share links opened in a browser.
    ("GET", "/sign-in"): Rule("view-instance"),
    ("GET", "/welcome"): Rule("view-instance"),
    ("GET", "/shared"): Rule("view-instance"),
    ("GET", "/account"): Rule("manage-account"),
    ("GET", "/api/v1/session"): Rule("view-instance"),
    ("POST", "/api/v1/session"): Rule("sign-in"),
    ("DELETE", "/api/v1/session"): Rule("manage-account"),
    ("POST", "/api/v1/setup"): Rule("sign-in"),
    ("POST", "/api/v1/share-session"): Rule("sign-in"),
    # Single sign-on: before any sign-in; the flow cookie and its state stand for the caller.
    ("GET", "/sign-in/oidc"): Rule("anyone"),
    ("GET", "/sign-in/oidc/callback"): Rule("anyone"),
    # A user's own API keys: a signed-in browser's session only (API keys never manage
    # keys: contract.access.CREDENTIAL_ACTIONS).
    ("GET", "/api/v1/keys"): Rule("manage-account"),
    ("POST", "/api/v1/keys"): Rule("manage-account"),
    ("DELETE", "/api/v1/keys/{key_id}"): Rule("manage-account"),
    # A project's visibility, members and share links.
    ("GET", _API + "/access"): Rule("manage-project"),
    ("PATCH", _API + "/access"): Rule("manage-project"),
    ("GET", _API + "/members"): Rule("manage-project"),
    ("PUT", _API + "/members/{login}"): Rule("manage-project"),
    ("DELETE", _API + "/members/{login}"): Rule("manage-project"),
    ("POST", _RUN + "/shares"): Rule("share-run"),
    ("GET", _API + "/shares"): Rule("share-run"),
    ("DELETE", _API + "/shares/{link_id}"): Rule("share-run"),
    # Launch recipes: any signed-in caller (the route refuses anonymous ones: recipes name
    # the server's paths). Previews, launches and their jobs: editors and owners.
    ("GET", "/api/v1/recipes"): Rule("view-instance"),
    ("GET", "/api/v1/recipes/{recipe}"): Rule("view-instance"),
    ("POST", _API + "/launch/preview"): Rule("write-run"),
    ("POST", _API + "/launch"): Rule("write-run"),
    ("GET", _API + "/launch/jobs"): _READ,
    ("POST", _API + "/launch/jobs/{job_id}/cancel"): Rule("write-run"),
    # Matched benchmark launches: as any launch; the pair's sides are read as its jobs are.
    ("POST", _API + "/launch/matched/preview"): Rule("write-run"),
    ("POST", _API + "/launch/matched"): Rule("write-run"),
    ("GET", _API + "/launch/matched/{pair}"): _READ,
}


_CONVERTER: Final = re.compile(r":[a-z]+}")


def rule_for(method: str, path: str) -> Rule | None:
    """The rule of a route (its path template, converters such as ``:path`` left out)."""
    return RULES.get(("GET" if method == "HEAD" else method, _CONVERTER.sub("}", path)))


def csrf_token(session_token: str) -> str:
    """The CSRF token of a session: derived from it, so nothing more is stored, and
    useless without the cookie it belongs to."""
    return hmac.new(session_token.encode(), b"tuneplane-csrf", hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class Caller:
    """The actor of a request, and the session cookie it came with (for CSRF)."""

    actor: Actor
    session_token: str | None = None
    login: str | None = None


def resolve_caller(connection: Connection, request: Request) -> Caller:
    credential = bearer(request)
    if credential is not None:
        return Caller(_bearer_actor(connection, request, credential))
    token = request.cookies.get(SESSION_COOKIE)
    if token and token.startswith(SESSION_PREFIX):
        user = accounts.session_user(connection, token)
        if user is not None:
            actor = Actor("session", user_id=user.id, is_admin=user.is_admin)
            return Caller(actor, session_token=token, login=user.login)
    shared = request.cookies.get(SHARE_COOKIE)
    if shared and shared.startswith(SHARE_LINK_PREFIX):
        run_id = access.share_link_run(connection, shared)
        if run_id is not None:
            return Caller(Actor("share-link", share_run_id=run_id))
    return Caller(ANONYMOUS)


def api_key_actor(connection: Connection, key: str) -> Actor | None:
    """The holder of an API key (an account's read or write key, or the admin key) as an
    actor; None for a key that is unknown, revoked, or whose account is disabled."""
    holder = credentials.resolve_api_key(connection, key)
    if holder is None:
        return None
    if holder.user_id is None:
        return Actor("admin-key", is_admin=True)
    scope: Credential = "write-key" if holder.can_write else "read-key"
    return Actor(scope, user_id=holder.user_id, is_admin=holder.is_admin)


def _bearer_actor(connection: Connection, request: Request, credential: str) -> Actor:
    if credential.startswith(API_KEY_PREFIX):
        actor = api_key_actor(connection, credential)
        if actor is None:
            raise Unauthorized("authorization: the API key is not valid (unknown or revoked)")
        return actor
    if credential.startswith(SHARE_LINK_PREFIX):
        run_id = access.share_link_run(connection, credential)
        if run_id is None:
            raise Unauthorized("authorization: the share link is not valid (revoked or expired)")
        return Actor("share-link", share_run_id=run_id)
    secret = app_state(request).settings.ingest_secret
    if secret is not None and secret.matches(credential):
        return Actor("arena-secret")
    # Anything else authorizes nothing here: the caller is anonymous, exactly as without it.
    return ANONYMOUS


def caller_of(request: Request) -> Caller:
    """The caller the guard resolved for this request (anonymous before it ran)."""
    caller: Caller = getattr(request.state, "caller", None) or Caller(ANONYMOUS)
    return caller


def check_csrf(request: Request, caller: Caller) -> None:
    """A cookie-signed write must come from our own pages: same origin, and the CSRF token
    the page read from ``GET /api/v1/session``. API keys are not cookies and need neither."""
    if caller.session_token is None or request.method in _SAFE_METHODS:
        return
    check_origin(request, required=True)
    sent = request.headers.get(CSRF_HEADER, "")
    if not hmac.compare_digest(sent.encode(), csrf_token(caller.session_token).encode()):
        raise Forbidden("x-csrf-token: missing or wrong; reload the page")


def check_origin(request: Request, *, required: bool = False) -> None:
    """The request comes from a page of this server (a browser names the page's origin on
    every write; scripts send none, which is fine where ``required`` is false)."""
    origin = request.headers.get("origin")
    if origin is None and not required:
        return
    own = f"{request.url.scheme}://{request.url.netloc}"
    if origin != own:
        raise Forbidden(f"origin: must be this server's own, {own}, not {origin or 'none'}")


def require(
    connection: Connection,
    actor: Actor,
    action: Action,
    project: str,
    run: str | None = None,
    memo: dict[str, ProjectFacts] | None = None,
) -> None:
    """Raise unless ``actor`` may do ``action`` on ``project`` (and ``run``). A project the
    actor may not read is reported as missing, exactly as one that does not exist. The
    facts read are kept in ``memo``, for the route's :func:`permissions`."""
    run_id = (
        access.run_id_by_name(connection, project, run)
        if run is not None and actor.credential == "share-link"
        else None
    )
    facts = access.project_facts(connection, actor, project, run_id)
    if memo is not None and facts is not None:
        memo[project] = facts
    if facts is None:
        raise NotFound(f"project: no project named {project!r}")
    decision = decide(actor, action, facts)
    if decision.allowed:
        return
    if decision.status == 404:
        raise NotFound(f"project: no project named {project!r}")
    if decision.status == 401:
        raise Unauthorized(f"authorization: {decision.reason}")
    raise Forbidden(decision.reason)


def permissions(
    request: Request, connection: Connection, project: str, run_id: int | None = None
) -> dict[str, bool]:
    """What the caller may do with the project's runs, for a page to offer only that (the
    guard still decides every request). The facts the guard read are used again."""
    actor = caller_of(request).actor
    facts = getattr(request.state, "facts", {}).get(project)
    # A run matters to the decision for share links only (the one run they open).
    if facts is None or (actor.credential == "share-link" and facts.run_id != run_id):
        facts = access.project_facts(connection, actor, project, run_id)
    if facts is None:
        return dict.fromkeys(_PERMISSIONS, False)
    return {name: decide(actor, action, facts).allowed for name, action in _PERMISSIONS.items()}


_PERMISSIONS: Final[dict[str, Action]] = {
    "logs": "read-logs",
    "trajectory_bodies": "read-trajectory-body",
    "write": "write-run",
    "share": "share-run",
    "manage": "manage-project",
}


def decide_rule(connection: Connection, request: Request, actor: Actor, rule: Rule) -> None:
    params = request.path_params
    if rule.action == "create-run":
        project = params["project"]
        if access.project_exists(connection, project):
            require(connection, actor, "write-run", project, memo=request.state.facts)
        else:
            _require_instance(actor, "create-project")
        return
    action: Action = rule.action  # type: ignore[assignment]
    if rule.query_targets:
        for name in rule.query_targets:
            target = request.query_params.get(name, "")
            project, _, rest = target.partition("/")
            if project:
                run = rest.partition("/")[0] or None
                require(connection, actor, action, project, run, request.state.facts)
        return
    if action in PROJECT_ACTIONS:
        run = params.get("run")
        if run is None and rule.narrows_to_runs and actor.credential == "share-link":
            # A project-wide read narrowed to one run (``?runs=r1``) is a read of that run.
            named = request.query_params.getlist("runs")
            run = named[0] if len(named) == 1 and "," not in named[0] else None
        require(connection, actor, action, params["project"], run, request.state.facts)
    else:
        _require_instance(actor, action)


def _require_instance(actor: Actor, action: Action) -> None:
    decision = decide(actor, action)
    if decision.allowed:
        return
    if decision.status == 401:
        raise Unauthorized(f"authorization: {decision.reason}")
    raise Forbidden(decision.reason)
