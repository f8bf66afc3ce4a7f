"""Numbers of a round whose tasks were run several times (repeats): pass@k and a success
rate interval that treats each task's repeats as one cluster.

Only scored trials count (a success or a failure); a trial whose ID names no repeat
(``<task>-r<repeat>``, contract.ids) is a task of its own, run once.

- **pass@k** is the unbiased estimator of Chen et al. (2021): for a task run ``n`` times
  with ``c`` successes, ``1 - C(n-c, k) / C(n, k)``, the chance that at least one of ``k``
  repeats drawn without replacement succeeds; averaged over the tasks run at least ``k``
  times (the others cannot say), for each ``k`` from 1 to the most repeats of a task.
- **The clustered interval** is the pooled success rate (successes over scored trials)
  with a cluster-robust standard error over tasks (the CR1 sandwich estimator, which
  corrects for few clusters by G/(G-1)) and a normal 95% interval, clipped to [0, 1]:
  repeats of one task are not independent draws, so an interval that counts them as such
  is too narrow. It needs at least two tasks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from tuneplane.contract.ids import task_and_repeat

CLUSTER_METHOD: Final = "cluster-robust standard error over tasks (CR1), normal 95%"
_Z95: Final = 1.959963984540054


@dataclass(frozen=True, slots=True)
class TaskOutcomes:
    """Scored repeats of one task: how many, and how many succeeded."""

    scored: int
    successes: int


@dataclass(frozen=True, slots=True)
class ClusteredRate:
    rate: float
    low: float
    high: float
    tasks: int
    method: str = CLUSTER_METHOD


def by_task(trials: Iterable[tuple[str, str]]) -> dict[str, TaskOutcomes]:
    """``(trial_id, status)`` pairs grouped by task; statuses other than success and
    failure are left out (they have no verdict to count)."""
    counts: dict[str, list[int]] = {}
    for trial_id, status in trials:
        if status not in ("success", "failure"):
            continue
        task, _repeat = task_and_repeat(trial_id)
        found = counts.setdefault(task, [0, 0])
        found[0] += 1
        found[1] += status == "success"
    return {task: TaskOutcomes(n, c) for task, (n, c) in counts.items()}


def pass_at_k(scored: int, successes: int, k: int) -> float:
    """The unbiased pass@k of one task run ``scored`` times (``k`` at most ``scored``)."""
    if not 1 <= k <= scored or not 0 <= successes <= scored:
        raise ValueError(f"pass@{k} needs 1 <= k <= n = {scored} and 0 <= c <= n")
    if scored - successes < k:
        return 1.0
    return 1.0 - math.comb(scored - successes, k) / math.comb(scored, k)


def pass_at(tasks: dict[str, TaskOutcomes]) -> dict[int, tuple[float, int]]:
    """For each k from 1 to the most repeats of a task: (mean pass@k over the tasks run at
    least k times, how many tasks those are). Empty when no task was repeated."""
    most = max((t.scored for t in tasks.values()), default=0)
    if most < 2:
        return {}
    found: dict[int, tuple[float, int]] = {}
    for k in range(1, most + 1):
        values = [pass_at_k(t.scored, t.successes, k) for t in tasks.values() if t.scored >= k]
        found[k] = (math.fsum(values) / len(values), len(values))
    return found


def clustered_rate(tasks: dict[str, TaskOutcomes]) -> ClusteredRate | None:
    """The pooled success rate with its cluster-robust 95% interval; None with fewer than
    two tasks (no spread between clusters to estimate)."""
    clusters = [t for t in tasks.values() if t.scored]
    if len(clusters) < 2:
        return None
    total = sum(t.scored for t in clusters)
    rate = sum(t.successes for t in clusters) / total
    spread = math.fsum((t.successes - rate * t.scored) ** 2 for t in clusters)
    groups = len(clusters)
    error = math.sqrt(spread * groups / (groups - 1)) / total
    return ClusteredRate(rate, max(0.0, rate - _Z95 * error), min(1.0, rate + _Z95 * error), groups)
