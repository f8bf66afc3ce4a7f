"""Builders for Arena ingest bodies used across tests."""

from __future__ import annotations

from typing import Any

PROJECT = "burtenshaw"
RUN = "arena-run-id"


def log(
    log_id: str,
    step: int,
    metrics: dict[str, Any],
    *,
    project: str = PROJECT,
    run: str = RUN,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "project": project,
        "run": run,
        "step": step,
        "log_id": log_id,
        "metrics": metrics,
        **extra,
    }


def alert(
    alert_id: str,
    title: str = "Sandbox cleanup timed out",
    *,
    level: str = "error",
    project: str = PROJECT,
    run: str = RUN,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "project": project,
        "run": run,
        "alert_id": alert_id,
        "title": title,
        "level": level,
        **extra,
    }


def run_url(project: str = PROJECT, run: str = RUN) -> str:
    return f"/api/v1/projects/{project}/runs/{run}"
