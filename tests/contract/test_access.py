"""The access decision, case by case (docs/access.md)."""

from __future__ import annotations

import pytest

from tuneplane.contract.access import (
    ACTIONS,
    ANONYMOUS,
    PROJECT_ACTIONS,
    Actor,
    ProjectFacts,
    decide,
)

PUBLIC = ProjectFacts("public", public_logs=False, run_id=7)
PUBLIC_LOGS = ProjectFacts("public", public_logs=True, run_id=7)
PRIVATE = ProjectFacts("private", public_logs=False, run_id=7)


def user(
    role: str | None = None, *, write: bool = True, content: bool = False
) -> tuple[Actor, ProjectFacts]:
    actor = Actor("write-key" if write else "read-key", user_id=1)
    return actor, ProjectFacts("private", public_logs=False, role=role, content=content, run_id=7)  # type: ignore[arg-type]


ADMIN_KEY = Actor("admin-key", is_admin=True)
SHARE_7 = Actor("share-link", share_run_id=7)
SHARE_8 = Actor("share-link", share_run_id=8)


def test_a_public_project_is_read_by_anyone_but_its_logs_and_bodies_are_not() -> None:
    assert decide(ANONYMOUS, "read-run", PUBLIC).allowed
    assert decide(ANONYMOUS, "read-logs", PUBLIC).status == 401
    assert decide(ANONYMOUS, "read-logs", PUBLIC_LOGS).allowed
    assert decide(ANONYMOUS, "read-trajectory-body", PUBLIC_LOGS).status == 401
    assert decide(ANONYMOUS, "write-run", PUBLIC).status == 401


def test_a_private_project_is_hidden_from_everyone_outside_it() -> None:
    outsider = Actor("session", user_id=2)
    for action in sorted(PROJECT_ACTIONS):
        for actor in (ANONYMOUS, outsider, SHARE_8):
            decision = decide(actor, action, PRIVATE)  # type: ignore[arg-type]
            assert (decision.allowed, decision.status) == (False, 404), (actor, action)


@pytest.mark.parametrize(
    ("role", "allowed"),
    [
        ("viewer", {"read-run", "read-logs"}),
        ("editor", {"read-run", "read-logs", "write-run", "share-run"}),
        ("owner", {"read-run", "read-logs", "write-run", "share-run", "manage-project"}),
    ],
)
def test_roles(role: str, allowed: set[str]) -> None:
    actor, facts = user(role)
    for action in sorted(PROJECT_ACTIONS):
        decision = decide(actor, action, facts)  # type: ignore[arg-type]
        assert decision.allowed == (action in allowed), (role, action)
        if not decision.allowed:
            assert decision.status == 403


def test_trajectory_bodies_need_the_content_permission() -> None:
    owner, facts = user("owner")
    assert not decide(owner, "read-trajectory-body", facts).allowed
    actor, facts = user("viewer", content=True)
    assert decide(actor, "read-trajectory-body", facts).allowed
    assert decide(ADMIN_KEY, "read-trajectory-body", PRIVATE).allowed
    assert not decide(SHARE_7, "read-trajectory-body", PUBLIC).allowed


def test_a_read_only_key_never_writes() -> None:
    actor, facts = user("owner", write=False)
    assert decide(actor, "read-run", facts).allowed
    for action in ("write-run", "share-run", "manage-project"):
        decision = decide(actor, action, facts)  # type: ignore[arg-type]
        assert (decision.allowed, decision.status) == (False, 403)
        assert "read-only" in decision.reason
    assert not decide(actor, "create-project").allowed
    read_admin = Actor("read-key", user_id=1, is_admin=True)
    assert decide(read_admin, "read-logs", PRIVATE).allowed
    assert not decide(read_admin, "manage-project", PRIVATE).allowed


def test_a_share_link_opens_one_run_as_public_would() -> None:
    assert decide(SHARE_7, "read-run", PRIVATE).allowed
    assert decide(SHARE_7, "read-logs", PRIVATE).status == 401
    shown = ProjectFacts("private", public_logs=True, run_id=7)
    assert decide(SHARE_7, "read-logs", shown).allowed
    other_run = ProjectFacts("private", public_logs=True, run_id=9)
    assert decide(SHARE_7, "read-run", other_run).status == 404
    for action in ("write-run", "share-run", "manage-project"):
        assert not decide(SHARE_7, action, PRIVATE).allowed  # type: ignore[arg-type]


def test_instance_actions() -> None:
    signed_in = Actor("session", user_id=1)
    assert decide(ANONYMOUS, "view-instance").allowed
    assert decide(ANONYMOUS, "manage-account").status == 401
    assert decide(signed_in, "manage-account").allowed
    assert decide(signed_in, "create-project").allowed
    assert decide(signed_in, "administer").status == 403
    assert decide(ADMIN_KEY, "administer").allowed
    assert decide(SHARE_7, "create-project").status == 401


def test_every_action_is_decided_for_every_actor() -> None:
    actors = (ANONYMOUS, ADMIN_KEY, SHARE_7, Actor("session", user_id=1))
    for action in ACTIONS:
        for actor in actors:
            facts = PUBLIC if action in PROJECT_ACTIONS else None
            assert decide(actor, action, facts).status in (200, 401, 403, 404)
    with pytest.raises(ValueError, match="needs the project"):
        decide(ANONYMOUS, "read-run")
