"""Who may do what: the actions, the credentials, the roles and the one function that decides.

Every route names exactly one action (``RULES`` in ``server/access.py``); :func:`decide` answers it
for an actor and, where the action concerns one, a project. An actor holds one credential, and a
credential caps what its holder may do whatever their role (:data:`CREDENTIAL_ACTIONS`): a read
key of an owner reads, and nothing more. Pure: the server gathers the facts (who is asking, how
the project is set up, their membership) and shows the answer.

===========================  ===========================================================
action                       who may (within what their credential allows)
===========================  ===========================================================
``view-instance``            anyone (lists show only the projects the actor may read)
``read-run``                 a public project: anyone; a private one: its members, the
                             site administrator, a share link to that run
``read-logs``                members and the administrator; others where ``read-run``
                             allows and the project has ``public_logs`` on
``read-trajectory-body``     members with the ``content`` permission, the administrator;
                             never a public reader, a share link or an ingest credential
``write-run``                editors and owners, the administrator
``share-run``                editors and owners, the administrator
``manage-project``           owners, the administrator
``create-project``           any signed-in user
``manage-account``           a signed-in browser session (its own sessions and keys)
``administer``               the site administrator (accounts)
``ingest-run``               an ingest token, into its own run and execution attempt
``ingest-arena``             the Arena shared secret (``POST /ingest``)
===========================  ===========================================================

A private project the actor may not read answers 404, never 403, so its name does not leak.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, get_args

Action = Literal[
    "view-instance",
    "read-run",
    "read-logs",
    "read-trajectory-body",
    "write-run",
    "share-run",
    "manage-project",
    "create-project",
    "manage-account",
    "administer",
    "ingest-run",
    "ingest-arena",
]
ACTIONS: Final[tuple[Action, ...]] = get_args(Action)
#: Actions about one project: the route names it, and the answer depends on it.
PROJECT_ACTIONS: Final = frozenset(
    {"read-run", "read-logs", "read-trajectory-body", "write-run", "share-run", "manage-project"}
)

Role = Literal["owner", "editor", "viewer"]
ROLES: Final[tuple[Role, ...]] = get_args(Role)
Visibility = Literal["public", "private"]
VISIBILITIES: Final[tuple[Visibility, ...]] = get_args(Visibility)
#: A personal API key reads, or reads and writes.
KeyScope = Literal["read", "write"]
KEY_SCOPES: Final[tuple[KeyScope, ...]] = get_args(KeyScope)
_WRITERS: Final = frozenset({"owner", "editor"})

#: What a request carries: nothing, a signed-in browser's session cookie, a personal API
#: key (read or write), the site administrator's key, a share link to one run, an ingest
#: token of one execution attempt, or the Arena shared secret.
Credential = Literal[
    "none",
    "session",
    "write-key",
    "read-key",
    "admin-key",
    "share-link",
    "ingest-token",
    "arena-secret",
]
CREDENTIALS: Final[tuple[Credential, ...]] = get_args(Credential)

_PUBLIC_READS: Final[frozenset[Action]] = frozenset({"view-instance", "read-run", "read-logs"})
_READS: Final[frozenset[Action]] = _PUBLIC_READS | {"read-trajectory-body"}
_KEY_ACTIONS: Final[frozenset[Action]] = frozenset(ACTIONS) - {
    "manage-account",
    "ingest-run",
    "ingest-arena",
}

#: What each credential may ever do, whatever its holder's role: the cap. An action is
#: allowed only where the credential's cap and the holder's place in the project both allow
#: it. Keys never manage keys or sessions (only a signed-in browser does), so a leaked key
#: cannot mint another or hide its tracks; a share link reads its one run; an ingest token
#: writes its one attempt; the Arena secret writes Arena batches and reads as anyone would.
CREDENTIAL_ACTIONS: Final[Mapping[Credential, frozenset[Action]]] = {
    "none": _PUBLIC_READS,
    "session": _KEY_ACTIONS | {"manage-account"},
    "write-key": _KEY_ACTIONS,
    "read-key": _READS,
    "admin-key": _KEY_ACTIONS,
    "share-link": _PUBLIC_READS,
    "ingest-token": frozenset({"ingest-run"}),
    "arena-secret": _PUBLIC_READS | frozenset({"ingest-arena"}),
}

#: The key scopes a credential may mint: its own or narrower (a session stands for its
#: account, so for a write credential).
_MINTABLE: Final[Mapping[Credential, tuple[KeyScope, ...]]] = {
    "session": ("read", "write"),
    "write-key": ("read", "write"),
    "read-key": ("read",),
}

#: Prefixes of the session cookie and of share-link tokens (API keys and ingest tokens have
#: theirs in ``contract.environment``): a credential's kind is told without a lookup.
SESSION_PREFIX: Final = "tpc_"
SHARE_LINK_PREFIX: Final = "tpl_"


@dataclass(frozen=True, slots=True)
class Actor:
    """Who is asking, and with what. ``user_id`` is the account of a session or a personal
    key; None for anonymous callers, share links, the admin key (the site administrator's,
    which belongs to no account) and the other credentials."""

    credential: Credential = "none"
    user_id: int | None = None
    is_admin: bool = False
    #: The run a share link opens; it opens nothing else.
    share_run_id: int | None = None

    @property
    def signed_in(self) -> bool:
        """An account stands behind the request (a session or one of its keys)."""
        return self.user_id is not None

    @property
    def can_write(self) -> bool:
        return "write-run" in CREDENTIAL_ACTIONS[self.credential]

    def may(self, action: Action) -> bool:
        """Whether the credential allows ``action`` at all (the role decides the rest)."""
        return action in CREDENTIAL_ACTIONS[self.credential]


ANONYMOUS: Final = Actor()


def may_mint(actor: Actor, scope: KeyScope) -> bool:
    """Whether ``actor``'s credential may make a key of ``scope``: never a wider one.

    >>> may_mint(Actor("read-key", user_id=1), "write")
    False
    """
    return actor.signed_in and scope in _MINTABLE.get(actor.credential, ())


@dataclass(frozen=True, slots=True)
class ProjectFacts:
    """What :func:`decide` needs of a project, and of the actor's place in it."""

    visibility: Visibility
    public_logs: bool
    role: Role | None = None
    content: bool = False
    #: The run the route is about, when it is about one (share links open only that run).
    run_id: int | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    #: On refusal: 401 (a credential would help), 403 (known, not allowed) or 404 (hidden).
    status: int = 200
    reason: str = ""


ALLOW: Final = Decision(True)


def decide(actor: Actor, action: Action, project: ProjectFacts | None = None) -> Decision:
    """May ``actor`` do ``action`` (on ``project``, for the actions about one)?

    >>> decide(ANONYMOUS, "read-run", ProjectFacts("public", public_logs=False)).allowed
    True
    >>> decide(ANONYMOUS, "read-run", ProjectFacts("private", public_logs=False)).status
    404
    """
    if action not in PROJECT_ACTIONS:
        return _instance_decision(actor, action)
    if project is None:
        raise ValueError(f"{action} needs the project it is about")
    if not actor.is_admin and not _may_read(actor, project):
        return Decision(False, 404, "no such project")
    if not actor.may(action):
        return _refuse(actor, _capped(actor, action))
    if actor.is_admin or action == "read-run":
        return ALLOW
    member = project.role is not None and actor.signed_in
    if action == "read-logs":
        if member or project.public_logs:
            return ALLOW
        return _refuse(actor, "the project shows its logs to members only")
    if action == "read-trajectory-body":
        if member and project.content:
            return ALLOW
        return _refuse(actor, "reading trajectory bodies needs the content permission")
    return _project_write(actor, action, project)


def _capped(actor: Actor, action: Action) -> str:
    """Why the credential itself does not allow ``action``."""
    if action == "manage-account" and actor.credential in ("read-key", "write-key", "admin-key"):
        return "API keys do not manage keys or sessions: sign in to the dashboard"
    return _CAPPED.get(actor.credential, "sign in first")


_CAPPED: Final[Mapping[Credential, str]] = {
    "read-key": "this API key is read-only",
    "share-link": "a share link only reads its run",
    "ingest-token": "ingest tokens only authorize /api/v1/ingest/* routes",
    "arena-secret": "the Arena secret only authorizes POST /ingest",
}


def _instance_decision(actor: Actor, action: Action) -> Decision:
    if not actor.may(action):
        return _refuse(actor, _capped(actor, action))
    if actor.is_admin or action in ("view-instance", "ingest-run", "ingest-arena"):
        return ALLOW
    if not actor.signed_in:
        return _refuse(actor, "sign in first")
    if action in ("manage-account", "create-project"):
        return ALLOW
    return Decision(False, 403, "only the site administrator may do this")


def _may_read(actor: Actor, project: ProjectFacts) -> bool:
    if actor.credential == "share-link":
        return actor.share_run_id is not None and actor.share_run_id == project.run_id
    if project.visibility == "public":
        return True
    return actor.signed_in and project.role is not None


def _project_write(actor: Actor, action: Action, project: ProjectFacts) -> Decision:
    if not actor.signed_in or project.role is None:
        return _refuse(actor, "only the project's members may change it")
    needed = "owner" if action == "manage-project" else "editor"
    if project.role == "owner" or (needed == "editor" and project.role in _WRITERS):
        return ALLOW
    return _refuse(actor, f"this needs the {needed} role in the project")


def _refuse(actor: Actor, reason: str) -> Decision:
    known = actor.signed_in or actor.credential in ("admin-key", "ingest-token")
    return Decision(False, 403 if known else 401, reason)
