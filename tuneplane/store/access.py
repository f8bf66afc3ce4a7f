"""What the access decision needs from the database: a project's visibility and the
actor's membership, members and roles, and share links to one run."""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import Connection, and_, delete, func, insert, select, update

from tuneplane.contract.access import (
    ROLES,
    SHARE_LINK_PREFIX,
    VISIBILITIES,
    Actor,
    ProjectFacts,
    Role,
    Visibility,
)
from tuneplane.contract.errors import Conflict, InvalidInput, NotFound, Violation
from tuneplane.store.credentials import hash_secret, new_secret
from tuneplane.store.dialect import upsert
from tuneplane.store.schema import memberships, projects, runs, share_links, users


def project_facts(
    connection: Connection, actor: Actor, project: str, run_id: int | None = None
) -> ProjectFacts | None:
    """The project's visibility and the actor's membership; None when it does not exist."""
    member = and_(
        memberships.c.project_id == projects.c.id,
        memberships.c.user_id == (actor.user_id if actor.user_id is not None else -1),
    )
    row = connection.execute(
        select(
            projects.c.visibility,
            projects.c.public_logs,
            memberships.c.role,
            memberships.c.content,
        )
        .select_from(projects.outerjoin(memberships, member))
        .where(projects.c.name == project)
    ).first()
    if row is None:
        return None
    return ProjectFacts(
        visibility=row.visibility,
        public_logs=bool(row.public_logs),
        role=row.role,
        content=bool(row.content),
        run_id=run_id,
    )


def readable_project_names(connection: Connection, actor: Actor) -> set[str] | None:
    """The names of the projects ``actor`` may list; None means every project."""
    if actor.is_admin:
        return None
    public = select(projects.c.name).where(projects.c.visibility == "public")
    # A share link opens one run, never its project's place in a list (nor its run count).
    if actor.user_id is not None:
        query = public.union(
            select(projects.c.name)
            .join(memberships, memberships.c.project_id == projects.c.id)
            .where(memberships.c.user_id == actor.user_id)
        )
    else:
        return set(connection.execute(public).scalars())
    return set(connection.execute(query).scalars())


def project_exists(connection: Connection, project: str) -> bool:
    found = connection.execute(select(projects.c.id).where(projects.c.name == project)).first()
    return found is not None


def run_id_by_name(connection: Connection, project: str, run: str) -> int | None:
    """The id of ``project``'s run ``run``, or None when there is none."""
    found: int | None = connection.execute(
        select(runs.c.id)
        .join(projects, projects.c.id == runs.c.project_id)
        .where(projects.c.name == project, runs.c.name == run)
    ).scalar()
    return found


def find_project_id(connection: Connection, project: str) -> int:
    found = connection.execute(select(projects.c.id).where(projects.c.name == project)).first()
    if found is None:
        raise NotFound(f"project: no project named {project!r}")
    return int(found.id)


def count_public_projects(connection: Connection) -> int:
    return int(
        connection.execute(
            select(func.count()).select_from(projects).where(projects.c.visibility == "public")
        ).scalar_one()
    )


def set_visibility(
    connection: Connection,
    project: str,
    visibility: Visibility | None = None,
    public_logs: bool | None = None,
) -> None:
    values: dict[str, object] = {}
    if visibility is not None:
        if visibility not in VISIBILITIES:
            raise InvalidInput((Violation("visibility", "must be public or private"),))
        values["visibility"] = visibility
    if public_logs is not None:
        values["public_logs"] = public_logs
    if values:
        connection.execute(update(projects).where(projects.c.name == project).values(**values))


# --- members --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Member:
    login: str
    role: Role
    content: bool

    def to_json(self) -> dict[str, object]:
        return {"login": self.login, "role": self.role, "content": self.content}


def add_owner(connection: Connection, project_id: int, user_id: int) -> None:
    """The creator of a new project owns it, with the content permission."""
    connection.execute(
        upsert(connection, memberships)
        .values(
            project_id=project_id,
            user_id=user_id,
            role="owner",
            content=True,
            created_at=time.time(),
        )
        .on_conflict_do_nothing(index_elements=[memberships.c.project_id, memberships.c.user_id])
    )


def set_member(
    connection: Connection, project: str, login: str, role: Role, content: bool = False
) -> Member:
    """Add ``login`` to the project, or change their role and content permission."""
    if role not in ROLES:
        raise InvalidInput((Violation("role", f"must be one of {', '.join(ROLES)}"),))
    project_id = find_project_id(connection, project)
    user_id = connection.execute(select(users.c.id).where(users.c.login == login)).scalar()
    if user_id is None:
        raise InvalidInput((Violation("login", f"no account named {login!r}"),))
    if role != "owner":
        _keep_an_owner(connection, project_id, user_id)
    connection.execute(
        upsert(connection, memberships)
        .values(
            project_id=project_id,
            user_id=user_id,
            role=role,
            content=content,
            created_at=time.time(),
        )
        .on_conflict_do_update(
            index_elements=[memberships.c.project_id, memberships.c.user_id],
            set_={"role": role, "content": content},
        )
    )
    return Member(login, role, content)


def remove_member(connection: Connection, project: str, login: str) -> None:
    project_id = find_project_id(connection, project)
    user_id = connection.execute(select(users.c.id).where(users.c.login == login)).scalar()
    if user_id is None:
        raise NotFound(f"login: no account named {login!r}")
    _keep_an_owner(connection, project_id, user_id)
    connection.execute(
        delete(memberships).where(
            memberships.c.project_id == project_id, memberships.c.user_id == user_id
        )
    )


def _keep_an_owner(connection: Connection, project_id: int, leaving: int) -> None:
    """Refuse to demote or remove a project's last owner: nobody could manage it then."""
    others = connection.execute(
        select(func.count())
        .select_from(memberships)
        .where(
            memberships.c.project_id == project_id,
            memberships.c.role == "owner",
            memberships.c.user_id != leaving,
        )
    ).scalar_one()
    is_owner = connection.execute(
        select(memberships.c.role).where(
            memberships.c.project_id == project_id, memberships.c.user_id == leaving
        )
    ).scalar()
    if is_owner == "owner" and others == 0:
        raise Conflict("role: a project keeps at least one owner; add another owner first")


def list_members(connection: Connection, project: str) -> list[Member]:
    project_id = find_project_id(connection, project)
    rows = connection.execute(
        select(users.c.login, memberships.c.role, memberships.c.content)
        .join(users, users.c.id == memberships.c.user_id)
        .where(memberships.c.project_id == project_id)
        .order_by(users.c.login)
    )
    return [Member(row.login, row.role, bool(row.content)) for row in rows]


# --- share links ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShareLink:
    id: int
    run: str
    created_by: str | None
    created_at: float
    expires_at: float | None
    revoked: bool

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "run": self.run,
            "created_by": self.created_by,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "revoked": self.revoked,
        }


def create_share_link(
    connection: Connection, run_id: int, created_by: int | None, expires_at: float | None
) -> tuple[int, str]:
    """A new read-only link to one run: its id and token (shown once)."""
    token = new_secret(SHARE_LINK_PREFIX)
    link_id = connection.execute(
        insert(share_links)
        .values(
            run_id=run_id,
            token_hash=hash_secret(token),
            created_by=created_by,
            created_at=time.time(),
            expires_at=expires_at,
        )
        .returning(share_links.c.id)
    ).scalar_one()
    return int(link_id), token


def list_share_links(connection: Connection, project: str) -> list[ShareLink]:
    rows = connection.execute(
        select(
            share_links.c.id,
            runs.c.name,
            users.c.login,
            share_links.c.created_at,
            share_links.c.expires_at,
            share_links.c.revoked_at.is_not(None),
        )
        .join(runs, runs.c.id == share_links.c.run_id)
        .join(projects, projects.c.id == runs.c.project_id)
        .outerjoin(users, users.c.id == share_links.c.created_by)
        .where(projects.c.name == project)
        .order_by(share_links.c.id)
    )
    return [ShareLink(*row) for row in rows]


def revoke_share_link(connection: Connection, project: str, link_id: int) -> None:
    in_project = (
        select(runs.c.id)
        .join(projects, projects.c.id == runs.c.project_id)
        .where(projects.c.name == project)
    )
    revoked = connection.execute(
        update(share_links)
        .where(share_links.c.id == link_id, share_links.c.run_id.in_(in_project))
        .values(revoked_at=func.coalesce(share_links.c.revoked_at, time.time()))
    ).rowcount
    if not revoked:
        raise NotFound(f"share link: no link {link_id} in project {project!r}")


def share_link_target(connection: Connection, token: str) -> tuple[str, str, float | None] | None:
    """The project and run a share token opens, and until when; None when it opens none."""
    run_id = share_link_run(connection, token)
    if run_id is None:
        return None
    row = connection.execute(
        select(projects.c.name, runs.c.name, share_links.c.expires_at)
        .select_from(share_links)
        .join(runs, runs.c.id == share_links.c.run_id)
        .join(projects, projects.c.id == runs.c.project_id)
        .where(share_links.c.token_hash == hash_secret(token))
    ).one()
    return row[0], row[1], row[2]


def share_link_run(connection: Connection, token: str) -> int | None:
    """The run a share token opens, or None (unknown, revoked or expired)."""
    if not token.startswith(SHARE_LINK_PREFIX):
        return None
    row = connection.execute(
        select(share_links.c.run_id, share_links.c.expires_at).where(
            share_links.c.token_hash == hash_secret(token), share_links.c.revoked_at.is_(None)
        )
    ).first()
    if row is None or (row.expires_at is not None and row.expires_at <= time.time()):
        return None
    return int(row.run_id)
