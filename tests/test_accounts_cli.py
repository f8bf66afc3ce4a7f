"""``tuneplane user …`` and ``tuneplane project …`` on a real data directory, and what
``tuneplane serve`` says about access when it starts."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.helpers import log
from tests.serving import running_server

PASSWORD = "a long passphrase"
SECRET = {"TUNEPLANE_INGEST_SECRET": "cli-secret"}


def tuneplane(data: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tuneplane.cli", *args, "--data-dir", str(data)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def sign_in(base: str, login: str, password: str = PASSWORD) -> httpx.Response:
    return httpx.post(f"{base}/api/v1/session", json={"login": login, "password": password})


def test_user_commands_add_list_disable_enable_and_reset(tmp_path: Path) -> None:
    data = tmp_path / "data"
    added = tuneplane(data, "user", "add", "ada", "--admin", stdin=PASSWORD + "\n")
    assert added.returncode == 0, added.stderr
    assert "added administrator 'ada'" in added.stdout
    assert PASSWORD not in added.stdout + added.stderr
    assert tuneplane(data, "user", "add", "bob", stdin=PASSWORD + "\n").returncode == 0
    again = tuneplane(data, "user", "add", "bob", stdin=PASSWORD + "\n")
    assert (again.returncode, again.stderr.strip()) == (
        2,
        "tuneplane: login: an account named 'bob' already exists",
    )
    short = tuneplane(data, "user", "add", "cy", stdin="short\n")
    assert short.returncode == 2
    assert "password: must be 8-1024 characters" in short.stderr
    listed = tuneplane(data, "user", "list")
    assert listed.stdout.splitlines() == ["ada\tadmin\tactive", "bob\tuser\tactive"]

    with running_server("--data-dir", str(data)) as base:
        assert sign_in(base, "bob").status_code == 200
        session = sign_in(base, "bob").cookies["tuneplane_session"]
        who = httpx.get(f"{base}/api/v1/session", cookies={"tuneplane_session": session})
        assert who.json()["login"] == "bob"
        disabled = tuneplane(data, "user", "disable", "bob")
        assert disabled.returncode == 0, disabled.stderr
        # The running server refuses the session at once: nothing is cached.
        who = httpx.get(f"{base}/api/v1/session", cookies={"tuneplane_session": session})
        assert who.json()["signed_in"] is False
        assert sign_in(base, "bob").status_code == 401
        assert tuneplane(data, "user", "enable", "bob").returncode == 0
        assert sign_in(base, "bob").status_code == 200
        reset = tuneplane(data, "user", "reset-password", "bob", stdin="another passphrase\n")
        assert reset.returncode == 0, reset.stderr
        assert sign_in(base, "bob").status_code == 401
        assert sign_in(base, "bob", "another passphrase").status_code == 200
    missing = tuneplane(data, "user", "disable", "nobody")
    assert (missing.returncode, missing.stderr.strip()) == (
        2,
        "tuneplane: login: no account named 'nobody'",
    )


def test_serve_prints_the_first_administrator_link_until_an_account_exists(
    tmp_path: Path,
) -> None:
    data, output = tmp_path / "data", tmp_path / "serve.log"
    with running_server("--data-dir", str(data), output=output) as base:
        deadline = time.monotonic() + 10
        while "welcome#" not in output.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        link = re.search(r"/welcome#(\S+)", output.read_text())
        assert link is not None, output.read_text()
        made = httpx.post(
            f"{base}/api/v1/setup",
            json={"token": link.group(1), "login": "ada", "password": PASSWORD},
        )
        assert made.status_code == 200, made.text
        assert made.cookies.get("tuneplane_session")
        spent = httpx.post(
            f"{base}/api/v1/setup",
            json={"token": link.group(1), "login": "eve", "password": PASSWORD},
        )
        assert spent.status_code == 401
        assert tuneplane(data, "user", "list").stdout.splitlines() == ["ada\tadmin\tactive"]
    with running_server("--data-dir", str(data), output=output) as base:
        time.sleep(0.3)
    assert "welcome#" not in output.read_text()


def test_projects_from_before_accounts_stay_public_and_serve_says_so(tmp_path: Path) -> None:
    data, output = tmp_path / "data", tmp_path / "serve.log"
    with running_server("--data-dir", str(data), env=SECRET) as base:
        batch = {"logs": [log("e1", 1, {"reward": 1.0}, project="arena", run="r1")]}
        auth = {"Authorization": "Bearer cli-secret"}
        assert httpx.post(f"{base}/ingest", json=batch, headers=auth).status_code == 200
    with running_server("--data-dir", str(data), env=SECRET, output=output) as base:
        assert [p["project"] for p in httpx.get(f"{base}/api/v1/projects").json()] == ["arena"]
        time.sleep(0.3)
    printed = output.read_text()
    assert "1 public project: anyone who can reach this server reads their runs" in printed
    assert "tuneplane project private NAME" in printed

    made_private = tuneplane(data, "project", "private", "arena")
    assert made_private.stdout.strip() == "project 'arena' is private now"
    with sqlite3.connect(data / "tuneplane.db") as connection:
        assert connection.execute("SELECT visibility FROM projects").fetchall() == [("private",)]
    with running_server("--data-dir", str(data), env=SECRET) as base:
        assert httpx.get(f"{base}/api/v1/projects").json() == []
        assert httpx.get(f"{base}/api/v1/projects/arena/runs/r1").status_code == 404
    unknown = tuneplane(data, "project", "public", "nothing")
    assert unknown.returncode == 2
    assert "no project named 'nothing'" in unknown.stderr


def test_a_personal_key_runs_a_job_into_a_project_only_its_owner_sees(tmp_path: Path) -> None:
    from tests.client.runs import tuneplane_run

    data = tmp_path / "data"
    assert tuneplane(data, "user", "add", "ada", stdin=PASSWORD + "\n").returncode == 0
    with running_server("--data-dir", str(data)) as base:
        signed = sign_in(base, "ada")
        cookies = {"tuneplane_session": signed.cookies["tuneplane_session"]}
        made = httpx.post(
            f"{base}/api/v1/keys",
            json={"name": "cluster", "scope": "write"},
            cookies=cookies,
            headers={"Origin": base, "X-CSRF-Token": signed.json()["csrf_token"]},
        )
        assert made.status_code == 201, made.text
        key = made.json()["key"]
        # The runner takes the personal key as it takes the admin key; no admin.key here.
        done = tuneplane_run(
            base, tmp_path / "elsewhere", "keyed", "20", "0", TUNEPLANE_API_KEY=key
        )
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        mine = httpx.get(
            f"{base}/api/v1/projects/e2e/runs/keyed", headers={"Authorization": f"Bearer {key}"}
        )
        assert mine.status_code == 200
        assert mine.json()["status"] == "succeeded"
        assert mine.json()["you"] == {
            "logs": True, "trajectory_bodies": True, "write": True, "share": True, "manage": True,
        }  # fmt: skip
        assert httpx.get(f"{base}/api/v1/projects/e2e/runs/keyed").status_code == 404
        assert httpx.get(f"{base}/api/v1/projects").json() == []


def test_an_account_made_elsewhere_spends_the_first_administrator_link(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_server("--data-dir", str(data)) as base:
        assert httpx.get(f"{base}/api/v1/session").json()["first_admin_pending"] is True
        assert tuneplane(data, "user", "add", "ada", stdin=PASSWORD + "\n").returncode == 0
        # The sign-in page offers the password form now, not the one-time link.
        assert httpx.get(f"{base}/api/v1/session").json()["first_admin_pending"] is False
