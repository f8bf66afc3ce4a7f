"""A run's group, tags and note from ``tuneplane.init()`` and ``tuneplane run``, and
``tuneplane runs delete``, against a real server on each engine."""

from __future__ import annotations

import io
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest

import tuneplane
from tests.client.runs import PROJECT, Server, runner_env
from tests.client.test_init import script
from tuneplane.cli import build_parser
from tuneplane.cli.delete import runs_delete
from tuneplane.contract.ids import id_for_name


def fresh() -> str:
    return f"meta-{uuid.uuid4().hex[:10]}"


def test_init_stores_group_tags_and_notes_with_a_new_run(server: Server) -> None:
    run = fresh()
    done = script(
        server,
        f"""
        import tuneplane
        r = tuneplane.init(project="{PROJECT}", name="{run}", group="sweep-7",
                           tags=("grpo", "seed-1"), notes="first try\\nlr too high?")
        assert r.reporting, r
        tuneplane.finish()
        # Resuming with others changes nothing: the dashboard and PATCH change them.
        tuneplane.init(project="{PROJECT}", name="{run}", group="other", tags=["x"])
        tuneplane.finish()
        """,
    )
    assert done.returncode == 0, done.stderr
    stored = server.run(run)
    assert (stored["group"], stored["tags"], stored["note"]) == (
        "sweep-7", ["grpo", "seed-1"], "first try\nlr too high?",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"tags": ["has space"]}, "tags[0]: letters, digits"),
        ({"group": "a" * 129}, "group: must be at most 128"),
        ({"notes": "\x00"}, "notes: must be printable"),
    ],
)
def test_init_refuses_bad_metadata_naming_it(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        tuneplane.init(project=PROJECT, name="never", server="http://127.0.0.1:9", **arguments)  # type: ignore[arg-type]


def test_tuneplane_run_takes_group_tags_and_a_note(server: Server) -> None:
    run = fresh()
    done = subprocess.run(
        [sys.executable, "-m", "tuneplane.cli", "run", "--server", server.base,
         "--data-dir", str(server.data_dir), "--project", PROJECT, "--run", run,
         "--group", "seeds", "--tag", "a", "--tag", "b", "--note", "from the runner",
         "--", sys.executable, "-c", "pass"],
        env=runner_env(), stdin=subprocess.DEVNULL, capture_output=True, timeout=90,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    stored = server.run(run)
    assert (stored["group"], stored["tags"], stored["note"]) == (
        "seeds",
        ["a", "b"],
        "from the runner",
    )
    # Names as people give them: both are kept beside the IDs derived from them.
    named = subprocess.run(
        [sys.executable, "-m", "tuneplane.cli", "run", "--server", server.base,
         "--data-dir", str(server.data_dir), "--project", "Runner evals 2.0",
         "--run", f"sft {run}", "--", sys.executable, "-c", "pass"],
        env=runner_env(), stdin=subprocess.DEVNULL, capture_output=True, timeout=90,
    )  # fmt: skip
    assert named.returncode == 0, named.stderr
    project = id_for_name("Runner evals 2.0", fallback="project")
    shown = server.get(f"/api/v1/projects/{project}/runs/{id_for_name(f'sft {run}')}")
    assert shown["display_name"] == f"sft {run}"
    (listed,) = [p for p in server.get("/api/v1/projects") if p["project"] == project]
    assert listed["display_name"] == "Runner evals 2.0"
    bad = subprocess.run(
        [sys.executable, "-m", "tuneplane.cli", "run", "--project", PROJECT, "--run", run,
         "--tag", "no good", "--", sys.executable, "-c", "pass"],
        env=runner_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2
    assert "--tag: letters, digits" in bad.stderr


def _delete(server: Server, *argv: str, stdin: io.StringIO | None = None) -> int:
    """``tuneplane runs delete`` as the command line parses it."""
    args = build_parser().parse_args(["runs", "delete", *argv, "--server", server.base,
                                      "--data-dir", str(server.data_dir)])  # fmt: skip
    return runs_delete(args, stdin=stdin)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_runs_delete_asks_first_then_deletes(
    server: Server, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TUNEPLANE_API_KEY", raising=False)
    monkeypatch.delenv("TUNEPLANE_URL", raising=False)
    run = fresh()
    server.start_attempt(run)
    target = f"{PROJECT}/{run}"
    assert _delete(server, target, stdin=_Terminal("wrong\n")) == 0
    assert server.run(run)["run"] == run  # not confirmed: still there
    assert _delete(server, target, stdin=io.StringIO("")) == 2  # no terminal, no --yes
    assert "pass --yes" in capsys.readouterr().err
    assert _delete(server, target, stdin=_Terminal(f"{run}\n")) == 0
    assert "deleted" in capsys.readouterr().out
    gone = httpx.get(f"{server.base}/api/v1/projects/{PROJECT}/runs/{run}",
                     headers={"Authorization": f"Bearer {server.key}"})  # fmt: skip
    assert gone.status_code == 404
    assert _delete(server, target, "--yes") == 1
    assert f"no run {target}" in capsys.readouterr().err
    assert _delete(server, "no-slash", "--yes") == 2


def test_runs_delete_with_a_key_that_may_not(
    server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = fresh()
    server.start_attempt(run)
    monkeypatch.setenv("TUNEPLANE_API_KEY", "tpk_" + "x" * 43)
    assert _delete(server, f"{PROJECT}/{run}", "--yes") == 4
    assert server.run(run)["run"] == run
