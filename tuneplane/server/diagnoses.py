"""Failure diagnoses: made when an attempt ends failed, on request again; listed on the
run page. A diagnosis runs beside ingest, never in its way: whatever becomes of it (done,
failed, timed out) the run's status stays what the job reported."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from typing import Annotated, Any, Final

import httpx
from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from tuneplane.diagnostics import (
    Evidence,
    Finding,
    LogExtent,
    LogLine,
    Series,
    diagnose,
    explain,
    find_hits,
)
from tuneplane.server.guard import GuardedRoute
from tuneplane.server.outbound import OutboundPolicy, Refused
from tuneplane.server.responses import JSON
from tuneplane.server.settings import DiagnosisSettings
from tuneplane.server.state import AppState, app_state
from tuneplane.store import catalog
from tuneplane.store import diagnoses as records
from tuneplane.store.diagnoses import AttemptEvidence

router = APIRouter(prefix="/api/v1", tags=["diagnoses"], route_class=GuardedRoute)
RUN = "/projects/{project}/runs/{run}"
#: Seconds a diagnosis may take before it is recorded as failed, and the language model
#: its explanation.
DIAGNOSIS_TIMEOUT: Final = 60.0
EXPLAIN_TIMEOUT: Final = 120.0
logger = logging.getLogger("tuneplane")


def evidence_of(stored: AttemptEvidence, ending: str) -> Evidence:
    log = stored.log
    return Evidence(
        lines=[
            LogLine(index, "stderr" if stream == "stderr" else "stdout", text, seq)
            for index, stream, text, seq in log.lines
        ],
        extent=LogExtent(log.stored, log.searched, log.missing, log.stopped),
        exit_code=stored.exit_code,
        ending=ending,
        series=[Series(name, values) for name, values in stored.series],
        transport=stored.health,
        config=stored.config,
    )


def _gather(state: AppState, run_id: int, attempt: int, ending: str) -> Evidence:
    with state.database.connect() as connection:
        return evidence_of(records.gather(connection, run_id, attempt, find_hits), ending)


async def _findings(
    state: AppState, run_id: int, attempt: int, ending: str
) -> tuple[Evidence | None, list[Finding] | None, str | None]:
    """(evidence, findings, None), or (…, None, why the diagnosis failed)."""
    evidence = None
    try:
        evidence = await asyncio.wait_for(
            run_in_threadpool(_gather, state, run_id, attempt, ending), DIAGNOSIS_TIMEOUT
        )
        return evidence, diagnose(evidence), None
    except TimeoutError:
        return evidence, None, f"the diagnosis took longer than {DIAGNOSIS_TIMEOUT:g} s"
    except Exception as exc:  # a diagnosis that fails is recorded as failed, nothing more
        return evidence, None, f"{type(exc).__name__}: {exc}"


async def _explanation(
    settings: DiagnosisSettings,
    outbound: OutboundPolicy,
    evidence: Evidence,
    findings: list[Finding],
) -> dict[str, Any]:
    """The language model's explanation, or why there is none; never raises. It is called
    by the outbound policy, and a redirect is an answer like any other (not 200: failed)."""
    headers = {} if settings.key is None else {"Authorization": f"Bearer {settings.key.reveal()}"}
    body = explain.request_body(settings.model, evidence, findings)
    try:
        async with outbound.client(EXPLAIN_TIMEOUT) as client:
            answer = await client.post(
                settings.url + "/chat/completions", json=body, headers=headers
            )
        if answer.status_code != 200:
            raise ValueError(f"{settings.url} answered {answer.status_code}")
        text = explain.read_answer(answer.json())
    except Refused as exc:
        error = f"TUNEPLANE_DIAGNOSIS_URL refused by policy: {exc}"
        return {"state": "failed", "model": settings.model, "error": error}
    except (httpx.HTTPError, ValueError) as exc:
        return {"state": "failed", "model": settings.model, "error": str(exc) or type(exc).__name__}
    return {"state": "done", "model": settings.model, "text": text}


async def run_diagnosis(state: AppState, run_id: int, attempt: int, trigger: str) -> int | None:
    """Diagnose one attempt and record the outcome (None: diagnosed already): the rule
    findings first, then, when configured, the written explanation. Only a re-run's own
    errors (no such attempt, the store down) reach the caller."""
    diagnosis = await state.database.write(records.begin, run_id, attempt, trigger, key=run_id)
    if diagnosis is None:
        return None
    evidence, findings, error = await _findings(
        state, run_id, attempt, "lost" if trigger == "lost" else "failed"
    )
    as_json = None if findings is None else [finding.to_json() for finding in findings]
    extent = None if evidence is None or evidence.extent is None else evidence.extent.to_json()
    try:
        await state.database.write(records.finish, diagnosis, as_json, error, extent, key=run_id)
    except Exception as exc:
        logger.warning("tuneplane: diagnosis %d could not be recorded: %s", diagnosis, exc)
        return diagnosis
    llm = state.settings.diagnosis
    if llm is not None and evidence is not None and findings is not None:
        # Said at once: the answer and the page show the explanation is on its way.
        running = {"state": "running", "model": llm.model}
        await state.database.write(records.explain, diagnosis, running, key=run_id)
        _in_background(state, _explain(state, llm, run_id, diagnosis, evidence, findings))
    state.live.notify(run_id)
    return diagnosis


async def _diagnose_quietly(state: AppState, run_id: int, attempt: int, trigger: str) -> None:
    try:
        await run_diagnosis(state, run_id, attempt, trigger)
    except Exception as exc:  # the store is down, say: the job's status is stored already
        logger.warning("tuneplane: no diagnosis of run %d attempt %d: %s", run_id, attempt, exc)


def _in_background(state: AppState, work: Coroutine[Any, Any, None]) -> None:
    task = asyncio.get_running_loop().create_task(work)
    state.background.add(task)
    task.add_done_callback(state.background.discard)


async def _explain(
    state: AppState,
    llm: DiagnosisSettings,
    run_id: int,
    diagnosis: int,
    evidence: Evidence,
    findings: list[Finding],
) -> None:
    """The written explanation, after the findings are recorded; never raises."""
    try:
        pending = {"state": "running", "model": llm.model}
        await state.database.write(records.explain, diagnosis, pending, key=run_id)
        explanation = await _explanation(llm, state.outbound, evidence, findings)
        await state.database.write(records.explain, diagnosis, explanation, key=run_id)
        state.live.notify(run_id)
    except Exception as exc:
        logger.warning("tuneplane: diagnosis %d: no explanation recorded: %s", diagnosis, exc)


async def check_language_model(state: AppState) -> None:
    """Say at start when the outbound policy refuses TUNEPLANE_DIAGNOSIS_URL, rather than
    only in the first explanation; each call is judged again all the same."""
    llm = state.settings.diagnosis
    problem = None if llm is None else await state.outbound.problem_with(llm.url)
    if problem is not None:
        logger.warning("tuneplane: TUNEPLANE_DIAGNOSIS_URL: %s", problem)


def start_diagnosis(state: AppState, run_id: int, attempt: int, trigger: str) -> None:
    """In the background: the request that ended the attempt is answered at once."""
    _in_background(state, _diagnose_quietly(state, run_id, attempt, trigger))


def _lost(state: AppState) -> list[tuple[int, int]]:
    with state.database.connect() as connection:
        return records.lost_attempts(connection, time.time() - state.settings.lost_heartbeat)


async def diagnose_lost_attempts(state: AppState) -> int:
    """Diagnose every running attempt whose heartbeat stopped longer ago than the
    setting says (once each); their status stays what it was."""
    lost = await run_in_threadpool(_lost, state)
    for run_id, attempt in lost:
        await _diagnose_quietly(state, run_id, attempt, "lost")
    return len(lost)


async def watch_lost_attempts(state: AppState) -> None:
    """Look for lost attempts a few times per heartbeat timeout, for the server's life."""
    interval = min(60.0, state.settings.lost_heartbeat / 4)
    while True:
        await asyncio.sleep(interval)
        try:
            await diagnose_lost_attempts(state)
        except Exception as exc:  # the store is down, say: the next look tries again
            logger.warning("tuneplane: looking for lost attempts failed: %s", exc)


@router.get(RUN + "/diagnoses")
def list_diagnoses(request: Request, project: str, run: str) -> Response:
    """The run's diagnoses, newest first: each with its attempt, what triggered it, its
    state (``running``, ``done``, ``failed``), findings (code, title, confidence, detail,
    next action, the log lines or metric points cited) or the error that stopped it, and
    ``log_cut`` with ``log``: whether the findings rest on less than the whole log, and
    how much of it was read."""
    with app_state(request).database.connect() as connection:
        run_id = catalog.get_run(connection, project, run).id
        found = records.list_diagnoses(connection, run_id)
    return JSON({"diagnoses": found})


@router.post(RUN + "/diagnoses", status_code=201)
async def rerun_diagnosis(
    request: Request,
    project: str,
    run: str,
    attempt: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
) -> Response:
    """Diagnose an attempt again (default: the latest) and answer its record."""
    state = app_state(request)

    def find() -> tuple[int, int]:
        with state.database.connect() as connection:
            found = catalog.get_run(connection, project, run)
            return found.id, attempt or found.attempt_count

    run_id, chosen = await run_in_threadpool(find)
    diagnosis = await run_diagnosis(state, run_id, chosen, "rerun")
    assert diagnosis is not None  # a re-run always makes one

    def read() -> dict[str, Any]:
        with state.database.connect() as connection:
            rows = records.list_diagnoses(connection, run_id)
        return next(row for row in rows if row["id"] == diagnosis)

    return JSON(await run_in_threadpool(read), status_code=201)
