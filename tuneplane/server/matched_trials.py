"""The trials behind the matched view's counts: a transition's trials a page at a time, and
one trial's two trajectories side by side.

Both take the matched view's parameters (``left=project/run/round_id``, ``left_attempt``,
``right``, ``right_attempt``). A trial's task and repeat are those its ID names when a plan
derived it (``<task>-r<repeat>``); any other ID is its own task, without a repeat."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import Response

from tuneplane.contract.errors import InvalidInput, NotFound, Violation
from tuneplane.contract.ids import ID_RULE, id_problem, task_and_repeat
from tuneplane.contract.limits import MATCHED_TRIALS_PAGE_DEFAULT, MATCHED_TRIALS_PAGE_MAX
from tuneplane.evaluation.alignment import first_divergence, first_failed_tool_call
from tuneplane.evaluation.matched import TRANSITION_NAMES, transition_of
from tuneplane.server.evaluation import Attempt, ChosenRound, chosen_round
from tuneplane.server.guard import GuardedRoute
from tuneplane.server.responses import JSON
from tuneplane.server.state import AppState, app_state
from tuneplane.server.trajectories import stored_messages
from tuneplane.store.evaluation import TrialRow
from tuneplane.store.matched_trials import MatchedTrial, RoundRef, matched_page, matched_trial
from tuneplane.store.trajectory_reads import body_state

router = APIRouter(prefix="/api/v1", tags=["evaluation"], route_class=GuardedRoute)
TrialId = Annotated[str, Path(min_length=1, max_length=128, description="a trial ID")]


def _sides(
    request: Request, left: str, right: str, left_attempt: int | None, right_attempt: int | None
) -> tuple[ChosenRound, ChosenRound]:
    with app_state(request).database.connect() as connection:
        return (
            chosen_round(connection, left, "left", left_attempt, counts=False),
            chosen_round(connection, right, "right", right_attempt, counts=False),
        )


def _ref(side: ChosenRound) -> RoundRef:
    return RoundRef(side.run_id, side.attempt, side.state.round_id)


def _where(side: ChosenRound) -> dict[str, Any]:
    """What names the side's round: with the trial, it opens the trajectory page."""
    return {
        "project": side.project,
        "run": side.run,
        "round_id": side.state.round_id,
        "execution_attempt": side.attempt,
    }


def _outcome(row: TrialRow | None, text: Any | None, now: float) -> dict[str, Any] | None:
    if row is None:
        return None
    trajectory = None
    if text is not None:
        trajectory = {
            "id": text.id,
            "message_count": text.message_count,
            "total_messages": text.total_messages,
            "body": body_state(text, now),
        }
    return {
        "status": row.status,
        "eligible": row.eligible,
        "reward": row.reward,
        "trial_attempt": row.trial_attempt,
        "attempts": row.attempts,
        "error_type": row.error_type,
        "reason_code": row.reason_code,
        "reason": row.reason,
        "trajectory": trajectory,
    }


def _trial_json(trial: MatchedTrial, now: float) -> dict[str, Any]:
    task, repeat = task_and_repeat(trial.trial_id)
    left = None if trial.left is None else trial.left.status
    right = None if trial.right is None else trial.right.status
    return {
        "trial_id": trial.trial_id,
        "task": task,
        "repeat": repeat,
        "transition": transition_of(left, right),
        "left": _outcome(trial.left, trial.left_trajectory, now),
        "right": _outcome(trial.right, trial.right_trajectory, now),
    }


@router.get("/evaluation/matched/trials")
def list_matched_trials(
    request: Request,
    left: str,
    right: str,
    transition: Annotated[str, Query(description=f"one of {', '.join(TRANSITION_NAMES)}")],
    left_attempt: Attempt = None,
    right_attempt: Attempt = None,
    after: Annotated[str | None, Query(description="the last trial ID of the page before")] = None,
    limit: Annotated[int, Query(ge=1, le=MATCHED_TRIALS_PAGE_MAX)] = MATCHED_TRIALS_PAGE_DEFAULT,
) -> Response:
    """The trials of one transition between the two rounds, by trial ID: each with its
    task and repeat, both sides' current outcomes (status, reward, error type, reason)
    and the trajectory of each side's current attempt. Pass ``next`` as ``after``."""
    problems = []
    if transition not in TRANSITION_NAMES:
        problems.append(Violation("transition", f"must be one of {', '.join(TRANSITION_NAMES)}"))
    if after is not None and id_problem(after) is not None:
        problems.append(Violation("after", f"must be a trial ID ({ID_RULE})"))
    if problems:
        raise InvalidInput(tuple(problems))
    chosen = _sides(request, left, right, left_attempt, right_attempt)
    with app_state(request).database.connect() as connection:
        page = matched_page(connection, _ref(chosen[0]), _ref(chosen[1]), transition, after, limit)
    now = time.time()
    return JSON(
        {
            "transition": transition,
            "left": _where(chosen[0]),
            "right": _where(chosen[1]),
            "trials": [_trial_json(trial, now) for trial in page],
            "next": page[-1].trial_id if len(page) == limit else None,
        }
    )


def _side_text(
    state: AppState, side: ChosenRound, text: Any | None
) -> tuple[dict[str, Any] | None, list[dict[str, Any]] | None]:
    if text is None:
        return None, None
    return stored_messages(state, side.run_id, text.id, f"{side.project}/{side.run}")


@router.get("/evaluation/matched/trials/{trial_id}")
def read_matched_trial(
    request: Request,
    trial_id: TrialId,
    left: str,
    right: str,
    left_attempt: Attempt = None,
    right_attempt: Attempt = None,
) -> Response:
    """One trial on both sides with every message of each side's current attempt's
    trajectory, aligned by message index: the first message where they differ and, on
    each side, the first tool call whose result reads as failed (and by which rule)."""
    if id_problem(trial_id) is not None:
        raise InvalidInput((Violation("trial_id", ID_RULE),))
    state = app_state(request)
    chosen = _sides(request, left, right, left_attempt, right_attempt)
    with state.database.connect() as connection:
        trial = matched_trial(connection, _ref(chosen[0]), _ref(chosen[1]), trial_id)
    if trial.left is None and trial.right is None:
        raise NotFound(f"trial_id: trial {trial_id!r} is in neither round")
    texts = [
        _side_text(state, side, found)
        for side, found in zip(chosen, (trial.left_trajectory, trial.right_trajectory), strict=True)
    ]
    answer = _trial_json(trial, time.time())
    for name, side, (index, messages) in zip(("left", "right"), chosen, texts, strict=True):
        failed = None if messages is None else first_failed_tool_call(messages)
        answer[name] = {
            **_where(side),
            "outcome": answer[name],
            "trajectory": index,
            "messages": messages,
            "first_failed_tool_call": None if failed is None else asdict(failed),
        }
    left_messages, right_messages = (messages for _, messages in texts)
    compared = left_messages is not None and right_messages is not None
    answer["compared"] = compared
    answer["first_divergence"] = (
        first_divergence(left_messages or [], right_messages or []) if compared else None
    )
    answer["aligned_by"] = "message index"
    return JSON(answer)
