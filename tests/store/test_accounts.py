"""Accounts, sessions, personal API keys, members and share links, on both engines."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from argon2 import extract_parameters
from sqlalchemy import select, update

from tuneplane.contract.access import ANONYMOUS, Actor
from tuneplane.contract.errors import Conflict, InvalidInput, NotFound, TooManyRequests
from tuneplane.contract.limits import SIGN_IN_FAILURES_MAX
from tuneplane.store import access, accounts, credentials
from tuneplane.store.database import Database
from tuneplane.store.runs import create_or_resume
from tuneplane.store.schema import projects, runs, sessions, share_links, users

PASSWORD = "correct horse"


def add(database: Database, login: str) -> accounts.User:
    digest = accounts.hash_password(PASSWORD)
    return database.run_write(lambda c: accounts.add_user(c, login, password_hash=digest))


def test_passwords_are_argon2id_and_verified(database: Database) -> None:
    add(database, "ada")
    with database.connect() as connection:
        stored = connection.execute(select(users.c.password_hash)).scalar_one()
        user_id, digest = accounts.stored_password_hash(connection, "ada")
        unknown_id, dummy = accounts.stored_password_hash(connection, "nobody")
    assert stored.startswith("$argon2id$")
    assert "correct horse" not in stored
    assert user_id is not None
    assert accounts.verify_password(digest, "correct horse")
    assert not accounts.verify_password(digest, "correct horsE")
    assert unknown_id is None
    assert not accounts.verify_password(dummy, "correct horse")
    # An unknown login costs what a known one does: its hash has the hasher's parameters.
    assert extract_parameters(dummy) == extract_parameters(stored)
    with pytest.raises(InvalidInput, match="password"):
        accounts.hash_password("short")
    with pytest.raises(Conflict, match="already exists"):
        add(database, "ada")


def test_sessions_end_on_sign_out_password_change_and_disable(database: Database) -> None:
    ada = add(database, "ada")
    first = database.run_write(accounts.create_session, ada.id)
    second = database.run_write(accounts.create_session, ada.id)
    with database.connect() as connection:
        assert accounts.session_user(connection, first) == ada
        assert accounts.session_user(connection, "tpc_forged") is None
        stored = set(connection.execute(select(sessions.c.token_hash)).scalars())
    assert first not in str(stored)
    assert len(stored) == 2
    database.run_write(accounts.end_session, first)
    with database.connect() as connection:
        assert accounts.session_user(connection, first) is None
        assert accounts.session_user(connection, second) == ada
    database.run_write(accounts.set_password, "ada", accounts.hash_password("a new passphrase"))
    with database.connect() as connection:
        assert accounts.session_user(connection, second) is None
    third = database.run_write(accounts.create_session, ada.id)
    database.run_write(accounts.set_disabled, "ada", True)
    with database.connect() as connection:
        assert accounts.session_user(connection, third) is None
        assert accounts.stored_password_hash(connection, "ada")[0] is None
        assert accounts.find_user(connection, "ada").disabled


def test_an_expired_session_signs_in_nobody(database: Database) -> None:
    ada = add(database, "ada")
    token = database.run_write(accounts.create_session, ada.id)
    database.run_write(lambda c: c.execute(update(sessions).values(expires_at=time.time() - 1)))
    with database.connect() as connection:
        assert accounts.session_user(connection, token) is None


def test_personal_api_keys_are_scoped_listed_and_revoked(
    database: Database, tmp_path: Path
) -> None:
    ada = add(database, "ada")
    read_id, read_key = database.run_write(credentials.create_api_key, ada.id, "laptop", "read")
    _write_id, write_key = database.run_write(
        credentials.create_api_key, ada.id, "cluster", "write"
    )
    admin_path = database.run_write(credentials.ensure_admin_key, tmp_path)
    admin_key = admin_path.read_text().strip()
    with database.connect() as connection:
        assert credentials.resolve_api_key(connection, read_key) == credentials.KeyHolder(
            ada.id, False, False
        )
        assert credentials.resolve_api_key(connection, write_key) == credentials.KeyHolder(
            ada.id, True, False
        )
        assert credentials.resolve_api_key(connection, admin_key) == credentials.KeyHolder(
            None, True, True
        )
        listed = credentials.list_api_keys(connection, ada.id)
    assert [(k.name, k.scope, k.revoked) for k in listed] == [
        ("laptop", "read", False),
        ("cluster", "write", False),
    ]
    database.run_write(credentials.revoke_api_key, ada.id, read_id)
    with pytest.raises(NotFound):
        database.run_write(credentials.revoke_api_key, ada.id + 1, read_id)
    with database.connect() as connection:
        assert credentials.resolve_api_key(connection, read_key) is None
        assert credentials.resolve_api_key(connection, write_key) is not None
    database.run_write(accounts.set_disabled, "ada", True)
    with database.connect() as connection:
        assert credentials.resolve_api_key(connection, write_key) is None


def test_sign_ins_are_limited_per_account_and_address(database: Database) -> None:
    subjects = ("account:ada", "address:10.0.0.1")
    # A reservation given back (the password was right) counts for nothing.
    for _ in range(SIGN_IN_FAILURES_MAX + 1):
        reserved = database.run_write(accounts.reserve_sign_in_attempt, subjects)
        database.run_write(accounts.forget_sign_in_attempt, reserved)
    for _ in range(SIGN_IN_FAILURES_MAX):
        database.run_write(accounts.reserve_sign_in_attempt, subjects)
    with pytest.raises(TooManyRequests, match="account"):
        database.run_write(accounts.reserve_sign_in_attempt, subjects)
    with pytest.raises(TooManyRequests, match="address"):
        database.run_write(accounts.reserve_sign_in_attempt, ("account:bob", "address:10.0.0.1"))
    # A refused try reserved nothing, for either subject.
    for _ in range(SIGN_IN_FAILURES_MAX):
        database.run_write(accounts.reserve_sign_in_attempt, ("account:bob", "address:10.0.0.2"))


def test_members_roles_and_the_last_owner(database: Database) -> None:
    ada, bob = add(database, "ada"), add(database, "bob")
    database.run_write(create_or_resume, "p", "r", None)
    with database.connect() as connection:
        project_id = connection.execute(select(projects.c.id)).scalar_one()
    database.run_write(access.add_owner, project_id, ada.id)
    database.run_write(access.set_member, "p", "bob", "viewer")
    database.run_write(access.set_visibility, "p", "private")
    with database.connect() as connection:
        facts = access.project_facts(connection, Actor("session", user_id=bob.id), "p")
        outsider = access.project_facts(connection, ANONYMOUS, "p")
        assert access.readable_project_names(connection, ANONYMOUS) == set()
        assert access.readable_project_names(connection, Actor("session", user_id=bob.id)) == {"p"}
        assert access.project_facts(connection, ANONYMOUS, "missing") is None
        members = access.list_members(connection, "p")
    assert facts is not None
    assert (facts.visibility, facts.role, facts.content) == (
        "private",
        "viewer",
        False,
    )
    assert outsider is not None
    assert outsider.role is None
    assert [m.to_json() for m in members] == [
        {"login": "ada", "role": "owner", "content": True},
        {"login": "bob", "role": "viewer", "content": False},
    ]
    with pytest.raises(Conflict, match="at least one owner"):
        database.run_write(access.set_member, "p", "ada", "editor")
    with pytest.raises(InvalidInput, match="role"):
        database.run_write(access.set_member, "p", "bob", "god")  # type: ignore[arg-type]
    database.run_write(access.set_member, "p", "bob", "owner", True)
    database.run_write(access.set_member, "p", "ada", "editor")
    database.run_write(access.remove_member, "p", "ada")
    with database.connect() as connection:
        assert [m.login for m in access.list_members(connection, "p")] == ["bob"]


def test_share_links_open_one_run_until_revoked_or_expired(database: Database) -> None:
    ada = add(database, "ada")
    database.run_write(create_or_resume, "p", "r", None)
    database.run_write(create_or_resume, "p", "other", None)
    with database.connect() as connection:
        run_id = connection.execute(select(runs.c.id).where(runs.c.name == "r")).scalar_one()
    link_id, token = database.run_write(access.create_share_link, run_id, ada.id, None)
    _expired_id, expired = database.run_write(
        access.create_share_link, run_id, None, time.time() - 1
    )
    with database.connect() as connection:
        assert access.share_link_run(connection, token) == run_id
        assert access.share_link_run(connection, expired) is None
        assert access.share_link_run(connection, "tpl_forged") is None
        assert token not in str(connection.execute(select(share_links.c.token_hash)).all())
        actor = Actor("share-link", share_run_id=run_id)
        # A share link opens its run, never its project's place in a list: it lists what
        # anyone may.
        anyone = access.readable_project_names(connection, ANONYMOUS)
        assert access.readable_project_names(connection, actor) == anyone
        listed = access.list_share_links(connection, "p")
    assert [(link.run, link.created_by, link.revoked) for link in listed] == [
        ("r", "ada", False),
        ("r", None, False),
    ]
    database.run_write(access.revoke_share_link, "p", link_id)
    with pytest.raises(NotFound):
        database.run_write(access.revoke_share_link, "elsewhere", link_id)
    with database.connect() as connection:
        assert access.share_link_run(connection, token) is None
