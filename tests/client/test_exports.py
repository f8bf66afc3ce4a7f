"""``register_export`` against a real server, on SQLite and PostgreSQL: a local directory's
digest is the documented one (file names and bytes, not where it lies), a URI keeps the
digest given or none and says which, bad arguments are refused without raising, and an
export journaled while the server is down arrives with ``tuneplane sync``."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.client.runs import PROJECT, Server
from tests.client.test_events import reporting
from tests.client.test_spool import spooling, tuneplane_sync
from tests.client.world import dead_url
from tuneplane.client.exports import directory_digest, register_export


def exports(server: Server, run: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = server.get(f"/api/v1/projects/{PROJECT}/runs/{run}/exports")
    return found


def hf_directory(where: Path) -> Path:
    (where / "sub").mkdir(parents=True)
    (where / "config.json").write_text('{"model_type": "gpt2"}')
    (where / "sub" / "weights.bin").write_bytes(bytes(range(256)) * 4)
    return where


def by_hand(files: dict[str, bytes]) -> str:
    """docs/sdk.md's digest, written out: sorted relative paths, each with its bytes' hash."""
    outer = hashlib.sha256()
    for name in sorted(files):
        outer.update(f"{name}\0{hashlib.sha256(files[name]).hexdigest()}\n".encode())
    return outer.hexdigest()


def test_the_digest_covers_names_and_bytes_not_the_place(tmp_path: Path) -> None:
    first = hf_directory(tmp_path / "a")
    expected = by_hand(
        {"config.json": b'{"model_type": "gpt2"}', "sub/weights.bin": bytes(range(256)) * 4}
    )
    assert directory_digest(first) == (expected, 2, 22 + 1024)
    moved = shutil.copytree(first, tmp_path / "elsewhere" / "b")
    assert directory_digest(moved)[0] == expected
    (moved / "sub" / "weights.bin").rename(moved / "sub" / "weights2.bin")
    assert directory_digest(moved)[0] != expected
    (first / "config.json").write_text('{"model_type": "llama"}')
    assert directory_digest(first)[0] != expected


def test_exports_are_listed_with_their_digests(server: Server, tmp_path: Path) -> None:
    run = f"exports-{server.base.rsplit(':', 1)[1]}"
    model = hf_directory(tmp_path / "checkpoint-500")
    given = "ab" * 32
    with reporting(server, run) as reporter:
        assert register_export(reporter, model, step=500)
        assert register_export(reporter, "s3://bucket/ckpt-600", step=600, digest=given)
        assert register_export(reporter, "hf://org/model", format="hf")
        # Refused, said, never raised: a path that is not there, a format or digest unknown.
        assert not register_export(reporter, tmp_path / "missing", step=1)
        assert not register_export(reporter, model, format="onnx")
        assert not register_export(reporter, "s3://b/x", digest="not-a-digest")
        assert reporter.flush(10)
    listed = exports(server, run)
    assert [(e["step"], e["uri"], e["digest_method"]) for e in listed] == [
        (500, str(model), "sha256-files-v1"),
        (600, "s3://bucket/ckpt-600", "given"),
        (None, "hf://org/model", "none"),
    ]
    assert listed[0]["digest"] == directory_digest(model)[0]
    assert (listed[0]["files"], listed[0]["bytes"], listed[0]["format"]) == (2, 1046, "hf")
    assert (listed[1]["digest"], listed[2]["digest"], listed[1]["files"]) == (given, None, None)
    assert all(e["attempt"] == 1 and e["export_id"] for e in listed)


def test_an_export_journaled_offline_arrives_with_sync(server: Server, tmp_path: Path) -> None:
    run = f"exports-spool-{server.base.rsplit(':', 1)[1]}"
    spool = tmp_path / run
    token = server.start_attempt(run)
    model = hf_directory(tmp_path / "final")
    reporter = spooling(dead_url(), token, spool)
    assert register_export(reporter, model, step=9)
    assert reporter.close(timeout=2).events_spooled == 1
    assert exports(server, run) == []
    done = tuneplane_sync(str(spool), "--server", server.base)
    assert done.returncode == 0, done.stderr
    assert [(e["step"], e["digest"]) for e in exports(server, run)] == [
        (9, directory_digest(model)[0])
    ]


def test_without_a_run_the_module_function_answers_false(tmp_path: Path) -> None:
    code = f"import tuneplane; print(tuneplane.register_export({str(tmp_path)!r}, step=1))"
    env = {"PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.stdout.strip() == "False", done.stderr
