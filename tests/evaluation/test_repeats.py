"""pass@k and the clustered interval of repeated tasks (evaluation.repeats): exact values
worked out by hand, and the interval's width against an independent-trials one."""

from __future__ import annotations

import math

import pytest

from tuneplane.evaluation.outcomes import wilson_interval
from tuneplane.evaluation.repeats import (
    TaskOutcomes,
    by_task,
    clustered_rate,
    pass_at,
    pass_at_k,
)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, 0.4),  # pass@1 is the task's success rate
        (5, 2, 2, 1 - 3 / 10),  # 1 - C(3,2)/C(5,2)
        (5, 2, 3, 1 - 1 / 10),  # 1 - C(3,3)/C(5,3)
        (5, 2, 4, 1.0),  # fewer failures than draws: one draw succeeds
        (5, 0, 3, 0.0),
        (10, 1, 5, 0.5),  # 1 - C(9,5)/C(10,5) = 1 - 126/252
    ],
)
def test_pass_at_k_is_the_unbiased_estimator(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(("n", "c", "k"), [(3, 1, 4), (3, 1, 0), (3, 4, 1)])
def test_pass_at_k_refuses_what_it_cannot_say(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError, match="pass@"):
        pass_at_k(n, c, k)


def test_trials_group_by_task_and_only_verdicts_count() -> None:
    tasks = by_task(
        [
            ("gsm8k-12-r0", "success"),
            ("gsm8k-12-r1", "failure"),
            ("gsm8k-12-r2", "infra_error"),  # no verdict
            ("gsm8k-13-r0", "success"),
            ("plain-id", "failure"),  # names no repeat: a task of its own
            ("other", "unscored"),
        ]
    )
    assert tasks == {
        "gsm8k-12": TaskOutcomes(2, 1),
        "gsm8k-13": TaskOutcomes(1, 1),
        "plain-id": TaskOutcomes(1, 0),
    }


def test_pass_at_each_k_averages_the_tasks_run_that_often() -> None:
    tasks = {"a": TaskOutcomes(2, 1), "b": TaskOutcomes(1, 1), "c": TaskOutcomes(3, 0)}
    assert pass_at(tasks) == {
        1: (pytest.approx((0.5 + 1.0 + 0.0) / 3), 3),
        2: (pytest.approx((1.0 + 0.0) / 2), 2),
        3: (0.0, 1),
    }
    assert pass_at({"a": TaskOutcomes(1, 1), "b": TaskOutcomes(1, 0)}) == {}  # no repeats


def test_the_clustered_interval_is_the_cr1_sandwich_and_wider_when_repeats_agree() -> None:
    # Four tasks, four repeats each, every task all-or-nothing: 8 of 16 succeed.
    agreeing = {f"t{i}": TaskOutcomes(4, 4 if i < 2 else 0) for i in range(4)}
    found = clustered_rate(agreeing)
    assert found is not None
    residuals = [(4 - 0.5 * 4) ** 2] * 2 + [(0 - 0.5 * 4) ** 2] * 2
    error = math.sqrt(sum(residuals) * 4 / 3) / 16
    assert found.rate == 0.5
    assert found.low == pytest.approx(max(0.0, 0.5 - 1.959963984540054 * error))
    assert found.high == pytest.approx(min(1.0, 0.5 + 1.959963984540054 * error))
    assert found.tasks == 4
    assert "CR1" in found.method
    low, high = wilson_interval(8, 16)
    assert found.high - found.low > high - low  # 16 trials are really 4 draws
    assert clustered_rate({"only": TaskOutcomes(5, 2)}) is None
