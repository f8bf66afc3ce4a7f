"""Who may do what: the actions, the roles and the one function that decides.

Every route names exactly one action (``RULES`` in ``server/access.py``); :func:`decide` answers it
for an actor and, where the action concerns one, a project. Pure: the server gathers the
facts (who is asking, how the project is set up, their membership) and shows the answer.

===========================  ===========================================================
action                       who may
===========================  ===========================================================
``view-instance``            anyone (lists show only the projects the actor may read)
``read-run``                 a public project: anyone; a private one: its members, the
                             site administrator, a share link to that run
``read-logs``                members and the administrator; others where ``read-run``
                             allows and the project has ``public_logs`` on
``read-trajectory-body``     members with the ``content`` permission, the administrator;
                             never a public reader, a share link or an ingest credential
``write-run``                editors and owners, the administrator (a write credential)
``share-run``                editors and owners, the administrator (a write credential)
``manage-project``           owners, the administrator (a write credential)
``create-project``           any signed-in user with a write credential
``manage-account``           any signed-in user (their own sessions and keys)
``administer``               the site administrator (accounts)
===========================  ===========================================================

A private project the actor may not read answers 404, never 403, so its name does not leak.
"""

from __future__ import annotations

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
]
ACTIONS: Final[tuple[Action, ...]] = get_args(Action)
#: Actions about one project: the route names it, and the answer depends on it.
PROJECT_ACTIONS: Final = frozenset(
    {"read-run", "read-logs", "read-trajectory-body", "write-run", "share-run", "manage-project"}
)
_READS: Final = frozenset({"view-instance", "read-run", "read-logs", "read-trajectory-body"})

Role = Literal["owner", "editor", "viewer"]
ROLES: Final[tuple[Role, ...]] = get_args(Role)
Visibility = Literal["public", "private"]
VISIBILITIES: Final[tuple[Visibility, ...]] = get_args(Visibility)
#: A personal API key reads, or reads and writes.
KeyScope = Literal["read", "write"]
KEY_SCOPES: Final[tuple[KeyScope, ...]] = get_args(KeyScope)
_WRITERS: Final = frozenset({"owner", "editor"})

#: Prefixes of the session cookie and of share-link tokens (API keys and ingest tokens have
#: theirs in ``contract.environment``): a credential's kind is told without a lookup.
SESSION_PREFIX: Final = "tpc_"
SHARE_LINK_PREFIX: Final = "tpl_"


@dataclass(frozen=True, slots=True)
class Actor:
    """Who is asking. ``user_id`` is None for anonymous callers, share links and the admin
    key (the site administrator's, which belongs to no account)."""

    kind: Literal["anonymous", "user", "admin_key", "share_link"]
    user_id: int | None = None
    is_admin: bool = False
    #: What the credential allows: a read-only API key cannot write whatever the role.
    can_write: bool = False
    #: The run a share link opens; it opens nothing else.
    share_run_id: int | None = None

    @property
    def signed_in(self) -> bool:
        return self.kind == "user"


ANONYMOUS: Final = Actor("anonymous")


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
    if action == "manage-account" and not actor.signed_in:
        # The admin key, a share link or nobody: no account whose keys could be managed.
        return _refuse(actor, "sign in to an account first")
    if actor.is_admin and (action in _READS or actor.can_write):
        return ALLOW
    if action not in PROJECT_ACTIONS:
        return _instance_decision(actor, action)
    if project is None:
        raise ValueError(f"{action} needs the project it is about")
    if not _may_read(actor, project):
        return Decision(False, 404, "no such project")
    if action == "read-run":
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


def _instance_decision(actor: Actor, action: Action) -> Decision:
    if action == "view-instance":
        return ALLOW
    if not actor.signed_in:
        return _refuse(actor, "sign in first")
    if action == "manage-account":
        return ALLOW
    if action == "create-project":
        return ALLOW if actor.can_write else _refuse(actor, "this API key is read-only")
    return Decision(False, 403, "only the site administrator may do this")


def _may_read(actor: Actor, project: ProjectFacts) -> bool:
    if actor.kind == "share_link":
        return actor.share_run_id is not None and actor.share_run_id == project.run_id
    if project.visibility == "public":
        return True
    return actor.signed_in and project.role is not None


def _project_write(actor: Actor, action: Action, project: ProjectFacts) -> Decision:
    if not actor.signed_in or project.role is None:
        return _refuse(actor, "only the project's members may change it")
    if not actor.can_write:
        return _refuse(actor, "this API key is read-only")
    needed = "owner" if action == "manage-project" else "editor"
    if project.role == "owner" or (needed == "editor" and project.role in _WRITERS):
        return ALLOW
    return _refuse(actor, f"this needs the {needed} role in the project")


def _refuse(actor: Actor, reason: str) -> Decision:
    return Decision(False, 403 if actor.signed_in else 401, reason)
