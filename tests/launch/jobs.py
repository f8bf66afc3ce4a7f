"""Recipes for the launch tests, and the tiny job they run.

``job.py`` reports a few points with the SDK (it runs under ``tuneplane run``, which the
local engine starts it with), prints a line, and then does what its mode says: ``ok`` exits
0, ``fail`` exits 3, ``wait`` sleeps until it is stopped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

JOB = """
import sys, time
import tuneplane

mode = sys.argv[1]
for step in range(3):
    tuneplane.report({"train/loss": 1.0 / (step + 1)}, step=step)
print(f"job {mode} says hello", flush=True)
if mode == "wait":
    time.sleep(120)
sys.exit(3 if mode == "fail" else 0)
"""

#: A recipe on the local engine in this interpreter's environment (which has tuneplane).
TINY = f"""
description = "a tiny job that reports three points"
engine = "local"
command = ["python", "job.py", "{{mode}}"]
rules = [{{ check = "batch % world_size == 0", message = "whole batches per rank" }}]

[source]
path = "src"

[runtime]
python = "{sys.prefix}"

[parameters]
type = "object"
required = ["mode"]

[parameters.properties]
mode = {{ type = "string", enum = ["ok", "fail", "wait"] }}
lr = {{ type = "number", minimum = 0, default = 0.001 }}
batch = {{ type = "integer", default = 8 }}
world_size = {{ type = "integer", default = 2 }}
"""


def git(*args: str, cwd: Path) -> str:
    command = ["git", *args]  # from PATH, as the source check runs it
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def source_repository(where: Path) -> tuple[str, str]:
    """A git repository holding job.py: its file:/// URL and its one commit."""
    where.mkdir()
    git("init", "--quiet", cwd=where)
    (where / "job.py").write_text(JOB)
    git("add", "job.py", cwd=where)
    git(
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@example.com",
        "commit",
        "--quiet",
        "-m",
        "job",
        cwd=where,
    )
    return f"file://{where}", git("rev-parse", "HEAD", cwd=where)


def write_recipes(directory: Path) -> Path:
    """The recipes directory: tiny (a local source), from_git (a git source), and recipes
    each check fails on."""
    directory.mkdir()
    (directory / "src").mkdir()
    (directory / "src" / "job.py").write_text(JOB)
    (directory / "tiny.toml").write_text(TINY)
    url, commit = source_repository(directory.parent / "repository")
    git_source = f'[source]\ngit = "{url}"\ncommit = "{commit}"'
    (directory / "from_git.toml").write_text(TINY.replace('[source]\npath = "src"', git_source))
    missing = git_source.replace(commit, "0" * 40)
    (directory / "gone_commit.toml").write_text(TINY.replace('[source]\npath = "src"', missing))
    (directory / "no_dir.toml").write_text(TINY.replace('path = "src"', 'path = "nowhere"'))
    (directory / "image.toml").write_text(
        TINY.replace(f'python = "{sys.prefix}"', 'image = "ghcr.io/example/trainer:1"')
    )
    (directory / "no_env.toml").write_text(
        TINY.replace(f'python = "{sys.prefix}"', f'python = "{directory / "src"}"')
    )
    (directory / "too_big.toml").write_text(TINY + "\n[resources]\ncpus = 4096\n")
    (directory / "gpu.toml").write_text(TINY + "\n[resources]\ngpus = 1\n")
    noted = TINY.replace('"{mode}"]', '"{mode}", "{note}"]')
    noted = noted.replace("world_size = {", 'note = { type = "string" }\nworld_size = {')
    (directory / "noted.toml").write_text(noted)
    (directory / "short.toml").write_text(TINY + "\n[resources]\ntime_minutes = 0.05\n")
    return directory
