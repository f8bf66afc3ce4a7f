"""``tuneplane projects list`` and ``tuneplane runs list|show|export`` as real processes
against a real server on each engine: tables, ``--json``, CSV, the key found as ``tuneplane
run`` finds it, and one line with its exit code for a refused key, a missing run, a server
that is not there and a bad address."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.client.runs import PROJECT, Server
from tests.serving import free_port


def tuneplane(
    *args: str, server: Server | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The command, with the server's URL and key in the environment as a user sets them."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TUNEPLANE_", "TRACKIO_"))}
    if server is not None:
        base.update(TUNEPLANE_URL=server.base, TUNEPLANE_API_KEY=server.key)
    return subprocess.run(
        [sys.executable, "-m", "tuneplane.cli", *args],
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def seeded_run(server: Server, steps: int = 5) -> str:
    """A run of PROJECT with ``loss`` and ``reward`` at each step, one NaN, and a config."""
    run = f"read-{uuid.uuid4().hex[:8]}"
    headers = {"Authorization": f"Bearer {server.key}"}
    runs = f"{server.base}/api/v1/projects/{PROJECT}/runs"
    created = httpx.post(runs, json={"run": run, "config": {"lr": 0.001}}, headers=headers)
    assert created.status_code == 201, created.text
    token = server.start_attempt(run)
    body = {
        "series": [
            {
                "name": "loss",
                "steps": list(range(steps)),
                "values": [1 / (s + 1) for s in range(steps)],
            },
            {
                "name": "reward",
                "steps": list(range(steps)),
                "values": [s / 10 for s in range(steps)],
            },
        ],
        "invalid": [{"name": "loss", "steps": [steps], "kinds": ["nan"]}],
    }
    sent = httpx.post(
        f"{server.base}/api/v1/ingest/scalars",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
    )
    assert sent.status_code == 200, sent.text
    return run


def test_projects_list_as_a_table_and_as_json(server: Server) -> None:
    seeded_run(server)
    table = tuneplane("projects", "list", server=server)
    assert table.returncode == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert header.split() == ["PROJECT", "RUNS", "UPDATED"]
    assert any(row.split()[0] == PROJECT for row in rows)
    listed = json.loads(tuneplane("projects", "list", "--json", server=server).stdout)
    assert listed == server.get("/api/v1/projects")


def test_runs_list_shows_the_projects_runs(server: Server) -> None:
    run = seeded_run(server)
    deadline = time.monotonic() + 10
    while server.run(run)["alert_count"] < 1:  # the default rule's alert may come after
        assert time.monotonic() < deadline, server.run(run)
        time.sleep(0.05)
    table = tuneplane("runs", "list", PROJECT, server=server)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:2] == ["RUN", "STATUS"]
    (row,) = [line.split() for line in lines[1:] if line.split()[0] == run]
    # Last step 4 and 10 points: the NaN at step 5 is counted apart, as invalid, and fires
    # the project's default NaN-loss rule: one alert.
    assert row[1:5] == ["unknown", "4", "10", "1"]
    listed = json.loads(tuneplane("runs", "list", PROJECT, "--json", server=server).stdout)
    assert run in [r["run"] for r in listed]
    assert _steady(listed) == _steady(server.get(f"/api/v1/projects/{PROJECT}/runs"))


def test_runs_list_passes_query_parameters_through(server: Server) -> None:
    """A filter the server learns later needs no new flag: --param sends it as it is."""
    seeded_run(server)
    passed = tuneplane("runs", "list", PROJECT, "--param", "unknown=1", "--json", server=server)
    assert passed.returncode == 0, passed.stderr
    bad = tuneplane("runs", "list", PROJECT, "--param", "no-equals-sign", server=server)
    assert bad.returncode == 2
    assert bad.stderr == "tuneplane runs list: --param 'no-equals-sign': must be KEY=VALUE\n"


def test_runs_show_prints_facts_config_and_metrics(server: Server) -> None:
    run = seeded_run(server)
    shown = tuneplane("runs", "show", f"{PROJECT}/{run}", server=server)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert f"run:       {PROJECT}/{run}" in text
    assert 'config:    {"lr": 0.001}' in text
    metrics = {line.split()[0]: line.split() for line in text.split("\n\n")[1].splitlines()}
    assert metrics["METRIC"][:2] == ["METRIC", "POINTS"]
    assert metrics["loss"][1:] == ["5", "0.2", "0.2", "1", "5", "1"]  # its last step: the NaN
    assert metrics["reward"][1:] == ["5", "0.4", "0", "0.4", "4", "0"]
    as_json = json.loads(
        tuneplane("runs", "show", f"{PROJECT}/{run}", "--json", server=server).stdout
    )
    assert as_json["run"] == run
    assert [m["metric"] for m in as_json["metrics"]] == ["loss", "reward"]


def _rows(text: str) -> list[dict[str, Any]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_runs_export_writes_every_point_as_csv(server: Server, tmp_path: Path) -> None:
    run = seeded_run(server)
    everything = tuneplane("runs", "export", f"{PROJECT}/{run}", server=server)
    assert everything.returncode == 0, everything.stderr
    rows = _rows(everything.stdout)
    assert everything.stdout.startswith("step,metric,value,log_id,time\n")
    assert len(rows) == 10  # the server's export: the valid points (the NaN is counted apart)
    assert {r["metric"] for r in rows} == {"loss", "reward"}
    assert [float(r["value"]) for r in rows if r["metric"] == "loss"] == [
        1 / (s + 1) for s in range(5)
    ]

    out = tmp_path / "reward.csv"
    only = tuneplane(
        "runs", "export", f"{PROJECT}/{run}", "--metric", "reward", "-o", str(out), server=server
    )
    assert only.returncode == 0, only.stderr
    assert only.stderr == f"tuneplane: 5 points written to {out}\n"
    reward = _rows(out.read_text())
    assert [(r["step"], float(r["value"])) for r in reward] == [(str(s), s / 10) for s in range(5)]
    assert not math.isnan(float(reward[0]["value"]))
    assert list(tmp_path.iterdir()) == [out]


def test_a_missing_run_or_metric_says_so(server: Server, tmp_path: Path) -> None:
    run = seeded_run(server)
    missing = tuneplane("runs", "show", f"{PROJECT}/no-such-run", server=server)
    assert missing.returncode == 1
    assert missing.stdout == ""
    assert missing.stderr.startswith("tuneplane runs show: not found: ")
    assert len(missing.stderr.splitlines()) == 1
    out = tmp_path / "none.csv"
    exported = tuneplane("runs", "export", f"{PROJECT}/nope", "-o", str(out), server=server)
    assert exported.returncode == 1
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []
    no_metric = tuneplane("runs", "export", f"{PROJECT}/{run}", "--metric", "x", server=server)
    assert no_metric.returncode == 1
    assert no_metric.stderr == "tuneplane runs export: no points of metric 'x'\n"
    bad = tuneplane("runs", "show", "just-a-project", server=server)
    assert bad.returncode == 2
    assert bad.stderr == "tuneplane runs show: 'just-a-project': name a run as PROJECT/RUN\n"


def test_a_refused_key_is_one_line_with_exit_code_4(server: Server) -> None:
    refused = tuneplane(
        "projects", "list", server=server, env={"TUNEPLANE_API_KEY": "tpk_not-a-real-key"}
    )
    assert refused.returncode == 4
    assert refused.stderr.startswith("tuneplane projects list: refused (401): ")
    assert len(refused.stderr.splitlines()) == 1


def test_without_a_key_a_private_project_is_not_found(server: Server, tmp_path: Path) -> None:
    """No TUNEPLANE_API_KEY and no admin.key where the command runs: an anonymous read,
    which sees no private project."""
    seeded_run(server)
    anonymous = tuneplane(
        "runs", "list", PROJECT, env={"TUNEPLANE_URL": server.base, "TUNEPLANE_DIR": str(tmp_path)}
    )
    assert anonymous.returncode == 1
    assert anonymous.stderr.startswith("tuneplane runs list: not found: ")


def test_the_admin_key_is_found_in_the_data_directory(server: Server) -> None:
    """As ``tuneplane run`` finds it: TUNEPLANE_API_KEY unset, --data-dir's admin.key."""
    seeded_run(server)
    found = tuneplane(
        "runs", "list", PROJECT, "--server", server.base, "--data-dir", str(server.data_dir)
    )
    assert found.returncode == 0, found.stderr


def test_a_server_that_is_not_there_is_exit_code_3(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    down = tuneplane("projects", "list", "--server", dead, env={"TUNEPLANE_DIR": str(tmp_path)})
    assert down.returncode == 3
    assert down.stderr == (
        f"tuneplane projects list: {dead} is unreachable (ConnectError); is the server "
        "running, and is TUNEPLANE_URL (or --server) its address?\n"
    )


@pytest.mark.parametrize(
    ("args", "env", "line"),
    [
        (["--server", "nodes:8000"], {}, "--server='nodes:8000': "),
        ([], {"TUNEPLANE_URL": "ftp://x"}, "TUNEPLANE_URL='ftp://x': "),
    ],
)
def test_a_bad_server_address_is_refused_before_any_request(
    tmp_path: Path, args: list[str], env: dict[str, str], line: str
) -> None:
    done = tuneplane("projects", "list", *args, env={"TUNEPLANE_DIR": str(tmp_path), **env})
    assert done.returncode == 2
    assert done.stderr.startswith(f"tuneplane: {line}must be an http:// or https:// URL")


def _steady(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs without what changes by the second: how long ago a heartbeat was."""
    return [{**r, "transport": {**r["transport"], "reason": None}} for r in runs]
