"""The alert engine of one server process: judges alert rules as points and evaluation
outcomes arrive, after their write has committed, and stores the episodes that open or
resolve (docs/alerts.md).

The ingest routes only hand it their batch (:meth:`AlertEngine.after_arena`,
:meth:`~AlertEngine.after_scalars`, :meth:`~AlertEngine.after_observations`). Their cost
when no rule watches the batch's series is a few dictionary lookups: each project's rules
are held in memory with, per series name, the rules whose pattern matches it. A batch some
rule watches is queued for the engine's one task, which judges it with the pure functions
of ``diagnostics.alert_rules`` and writes only what changed. Batches of one run that arrive
while its last job still waits join that job (up to :data:`JOIN_MAX`): under load a run's
points are judged many batches at a time, at C speed, rather than batch by batch. Nothing
it does can fail the request: the queue is bounded (a full one drops the batch with a
warning) and every error is logged.

Rules change through the API; each change bumps the project's version in the store, which
every process polls every :data:`VERSION_POLL_SECONDS`, so several servers on one
PostgreSQL agree within that time. Which episodes are open is re-read every
:data:`WATCH_TTL_SECONDS` for the same reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import operator
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from starlette.concurrency import run_in_threadpool

from tuneplane.contract.alert_rules import Rule, Transition
from tuneplane.contract.arena import ArenaBatch
from tuneplane.contract.observations import Observation
from tuneplane.contract.protocol import ScalarBatch
from tuneplane.diagnostics.alert_rules import (
    SeriesRules,
    Watch,
    judge_eval_drop,
    judge_series,
    matches,
)
from tuneplane.server.alert_rounds import round_difference
from tuneplane.store import alert_episodes, alert_rules
from tuneplane.store.database import Database

logger = logging.getLogger("tuneplane")
#: Batches waiting to be judged before new ones are dropped.
QUEUE_MAX: Final = 10_000
#: Batches one queued job of a run may gather.
JOIN_MAX: Final = 512
#: How long the alert task lets batches gather once its queue is empty: an alert opens at
#: most this much later (the dashboard's live stream sends at this pace too), and a busy
#: run's batches are judged a quarter second at a time.
GATHER_SECONDS: Final = 0.25
VERSION_POLL_SECONDS: Final = 1.0
WATCH_TTL_SECONDS: Final = 5.0
#: Series names remembered per project with the rules that match them.
_MEMO_MAX: Final = 50_000
_POINT_KINDS: Final = frozenset({"nan", "threshold", "change", "stall"})
#: Seconds shutdown waits for the engine's loops to end.
STOP_SECONDS: Final = 10.0
_STOP: Final = object()


@dataclass(slots=True)
class _Index:
    """A project's rules, and which of them watch each series name."""

    loaded: alert_rules.ProjectRules
    point_rules: tuple[Rule, ...]
    memo: dict[str, SeriesRules] = field(default_factory=dict)

    @classmethod
    def of(cls, loaded: alert_rules.ProjectRules) -> _Index:
        kept = tuple(rule for rule in loaded.rules if rule.spec.kind in _POINT_KINDS)
        return cls(loaded, kept)

    def match(self, name: str) -> SeriesRules:
        found = self.memo.get(name)
        if found is None:
            if len(self.memo) >= _MEMO_MAX:
                self.memo.clear()
            found = SeriesRules.of(
                tuple(r for r in self.point_rules if matches(r.spec.metric or "", name))
            )
            self.memo[name] = found
        return found


@dataclass(slots=True)
class _RunWatches:
    loaded_at: float
    open_rules: set[int]
    watches: dict[tuple[int, str], Watch] = field(default_factory=dict)


#: New points per series, as (steps, values) in the order they are judged (a batch's in
#: step order, batch after batch; None: NaN or ±inf), and whether some value is None.
Series = dict[str, tuple[list[int], Sequence[float | None], bool]]
#: What gives them (of the series ``watched`` says yes to): called only when some rule
#: watches the batch.
PointsOf = Callable[[Callable[[str], bool]], Series]
#: Points being gathered, per series.
_Gathered = dict[str, tuple[list[int], list[float | None]]]


@dataclass(frozen=True, slots=True)
class _PointsJob:
    project: str
    run_id: int
    #: The batches' points, in the order they were stored.
    batches: list[PointsOf]


@dataclass(frozen=True, slots=True)
class _RoundsJob:
    project: str
    run_id: int
    attempt: int
    round_ids: tuple[str, ...]


class ArenaPoints:
    """An Arena batch's series names and, when a rule watches some, their points: the names
    are gathered once for both."""

    __slots__ = ("_logs", "_names")

    def __init__(self, batch: ArenaBatch) -> None:
        self._logs = batch.logs
        self._names: Collection[str] | None = None

    def names(self) -> Collection[str]:
        if self._names is None:
            logs = self._logs
            one = len(logs) == 1
            self._names = (
                logs[0].metrics.keys() if one else set().union(*(log.metrics for log in logs))
            )
        return self._names

    def __call__(self, watched: Callable[[str], bool]) -> Series:
        logs = self._logs
        if len(logs) == 1:  # the worker's usual batch: one event
            step = logs[0].step
            return {
                name: ([step], [value], False)
                for name, value in logs[0].metrics.items()
                if watched(name)
            }
        size = len(self.names())
        if all(len(log.metrics) == size for log in logs):
            # The usual batch: every event holds every name (each has as many as all of
            # them together). Only watched series are gathered, at C speed.
            wanted = [name for name in logs[0].metrics if watched(name)]
            steps = [log.step for log in logs]
            columns = _columns(wanted, [log.metrics for log in logs])
            if not _ordered(steps):
                return {
                    name: (*_in_step_order(steps, list(column)), False)
                    for name, column in zip(wanted, columns, strict=True)
                }
            return dict(zip(wanted, ((steps, column, False) for column in columns), strict=True))
        found: _Gathered = {}
        for log in logs:
            step = log.step
            for name, value in log.metrics.items():
                held = found.get(name)
                if held is None:
                    found[name] = ([step], [value])
                else:
                    held[0].append(step)
                    held[1].append(value)
        return {name: (*_in_step_order(*held), False) for name, held in found.items()}


def _columns(names: list[str], dicts: list[dict[str, float]]) -> list[Sequence[float]]:
    """Each name's values over ``dicts`` (each of which holds every name)."""
    if len(names) < 2:
        return [[metrics[name] for metrics in dicts] for name in names]
    return list(zip(*map(operator.itemgetter(*names), dicts), strict=True))


def _ordered(steps: list[int]) -> bool:
    return len(steps) < 2 or all(map(operator.le, steps, steps[1:]))


def _in_step_order(
    steps: list[int], values: list[float | None]
) -> tuple[list[int], list[float | None]]:
    if _ordered(steps):
        return steps, values
    ordered = sorted(zip(steps, values, strict=True), key=lambda point: point[0])
    return [step for step, _ in ordered], [value for _, value in ordered]


def _joined(batches: list[PointsOf]) -> PointsOf:
    """The points of several batches of one run, each series' in the order they arrived
    (batch after batch, each batch in step order)."""
    if len(batches) == 1:
        return batches[0]

    def points(watched: Callable[[str], bool]) -> Series:
        joined: _Gathered = {}
        invalid_names: set[str] = set()
        for gather in batches:
            for name, (steps, values, invalid) in gather(watched).items():
                held = joined.setdefault(name, ([], []))
                held[0].extend(steps)
                held[1].extend(values)
                if invalid:
                    invalid_names.add(name)
        return {name: (*held, name in invalid_names) for name, held in joined.items()}

    return points


def _scalar_points(batch: ScalarBatch) -> PointsOf:
    def points(watched: Callable[[str], bool]) -> Series:
        found: _Gathered = {}
        for entry in batch.series:
            held = found.setdefault(entry.name, ([], []))
            held[0].extend(entry.steps)
            held[1].extend(entry.values)
        for invalid in batch.invalid:
            held = found.setdefault(invalid.name, ([], []))
            held[0].extend(invalid.steps)
            held[1].extend([None] * len(invalid.steps))
        invalid_names = {invalid.name for invalid in batch.invalid}
        return {
            name: (*_in_step_order(*held), name in invalid_names) for name, held in found.items()
        }

    return points


class AlertEngine:
    def __init__(self, database: Database, notify: Callable[[int], None] = lambda _: None) -> None:
        self._database = database
        self._notify = notify
        self._indexes: dict[str, _Index | None] = {}
        #: Times each project's rules were forgotten (a load that overlapped one is dropped).
        self._forgotten: dict[str, int] = {}
        self._runs: dict[int, _RunWatches] = {}
        self._queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=QUEUE_MAX)
        #: Set whenever webhook deliveries were queued: the sender wakes.
        self.delivery_wanted = asyncio.Event()
        #: Jobs that failed (logged), and batches dropped from a full queue.
        self.failures = 0
        self.dropped = 0
        #: Set at shutdown: the engine's loops end at their next wait, never in the middle
        #: of a read on a worker thread (whose connection would outlive the database).
        self.stopping = asyncio.Event()
        #: Each run's last queued points job while it has not begun: the run's later batches
        #: join it, so they are judged in order and together.
        self._last_points: dict[int, _PointsJob] = {}

    # --- called by the ingest routes, after their write committed ------------------------

    def after_arena(self, batch: ArenaBatch, run_id: int) -> None:
        points = ArenaPoints(batch)
        self._after_points(batch.project, run_id, points.names(), points)

    def after_scalars(self, project: str, run_id: int, batch: ScalarBatch) -> None:
        self._after_points(project, run_id, batch.names, _scalar_points(batch))

    def after_observations(
        self, project: str, run_id: int, attempt: int, events: Iterable[Observation]
    ) -> None:
        rounds = {
            outcome.round_id
            for event in events
            if (outcome := event.trial or event.population) is not None
        }
        if not rounds:
            return
        if project in self._indexes:
            index = self._indexes[project]
            if index is None or not _has_kind(index, "eval_drop"):
                return
        self._submit(_RoundsJob(project, run_id, attempt, tuple(sorted(rounds))))

    def _after_points(
        self, project: str, run_id: int, names: Iterable[str], points: PointsOf
    ) -> None:
        try:
            self._queue_points(project, run_id, names, points)
        except Exception as exc:  # never into the request that stored the points
            self.failures += 1
            logger.warning("tuneplane: alert rules of run %d not judged: %s", run_id, exc)

    def _queue_points(
        self, project: str, run_id: int, names: Iterable[str], points: PointsOf
    ) -> None:
        if project in self._indexes:  # else the engine's task loads the project's rules
            index = self._indexes[project]
            if index is None or not index.point_rules or not self._wanted(index, run_id, names):
                return  # no such project yet, or no rule watches these series
        waiting = self._last_points.get(run_id)
        if waiting is not None and len(waiting.batches) < JOIN_MAX:
            waiting.batches.append(points)  # the run's last job, not begun: judged with it
            return
        self._submit(_PointsJob(project, run_id, [points]))

    def _wanted(self, index: _Index, run_id: int, names: Iterable[str]) -> bool:
        held = self._runs.get(run_id)
        fresh = held is not None and time.monotonic() - held.loaded_at < WATCH_TTL_SECONDS
        for name in names:
            for rule in index.match(name).rules:
                if rule.run_id is not None and rule.run_id != run_id:
                    continue
                # A stall rule is judged here only to resolve an open episode.
                if rule.spec.kind != "stall" or not fresh or rule.id in held.open_rules:  # type: ignore[union-attr]
                    return True
        return False

    def _submit(self, job: Any) -> None:
        try:
            self._queue.put_nowait(job)
            if isinstance(job, _PointsJob):
                self._last_points[job.run_id] = job
            else:  # what comes after this job must not join one before it
                self._last_points.pop(job.run_id, None)
        except asyncio.QueueFull:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                logger.warning(
                    "tuneplane: alert rules: %d batches not judged (queue full)", self.dropped
                )

    # --- the engine's task -----------------------------------------------------------------

    async def run_forever(self) -> None:
        """Judge queued batches, one after another; poll the rule versions. Once the queue
        is empty the task lets :data:`GATHER_SECONDS` pass before it looks again: what
        arrived meanwhile is taken in one go (a wake-up per batch would cost more than
        judging a small one), and a run's batches join in one job."""
        polling = asyncio.create_task(self._poll_versions())
        try:
            while not self.stopping.is_set():
                if self._queue.empty():
                    await asyncio.sleep(GATHER_SECONDS)
                job = await self._queue.get()
                if job is _STOP:
                    break
                try:
                    await self._handle(job)
                except Exception as exc:  # a rule or the store failed: ingest goes on
                    self.failures += 1
                    self._runs.pop(job.run_id, None)
                    logger.warning(
                        "tuneplane: alert rules of run %d not judged: %s", job.run_id, exc
                    )
                finally:
                    run_id = job.run_id
                    if self._last_points.get(run_id) is job:  # it ended before judging
                        del self._last_points[run_id]
                    self._queue.task_done()
        finally:
            if not self.stopping.is_set():
                polling.cancel()  # cancelled itself: a read of the poll may be cut short
            await asyncio.gather(polling, return_exceptions=True)

    async def drain(self) -> None:
        """Wait until every queued batch has been judged (for tests and shutdown)."""
        await self._queue.join()

    async def _handle(self, job: Any) -> None:
        index = await self.index(job.project)
        if index is None:
            return
        if isinstance(job, _RoundsJob):
            transitions = await self._judge_rounds(index, job)
        else:
            transitions = await self._judge_points(index, job)
        if transitions:
            await self.store(job.run_id, transitions)

    async def index(self, project: str) -> _Index | None:
        index = self._indexes.get(project)
        if index is None:
            forgotten = self._forgotten.get(project, 0)
            loaded = await run_in_threadpool(self._load, project)
            index = None if loaded is None else _Index.of(loaded)
            # Rules changed here while they were read: what was read is not kept.
            if self._forgotten.get(project, 0) == forgotten:
                self._indexes[project] = index
        return index

    def _load(self, project: str) -> alert_rules.ProjectRules | None:
        with self._database.connect() as connection:
            return alert_rules.load_rules(connection, project)

    async def watches(self, run_id: int) -> _RunWatches:
        held = self._runs.get(run_id)
        if held is None or time.monotonic() - held.loaded_at >= WATCH_TTL_SECONDS:
            opened = await run_in_threadpool(self._open_watches, run_id)
            if held is None:
                held = self._runs[run_id] = _RunWatches(time.monotonic(), set())
            held.loaded_at = time.monotonic()
            held.open_rules = {rule for rule, _ in opened}
            for key, watch in held.watches.items():
                watch.open = key in opened
            for key in opened - held.watches.keys():
                held.watches[key] = Watch(open=True)
        return held

    def _open_watches(self, run_id: int) -> set[tuple[int, str]]:
        with self._database.connect() as connection:
            return alert_episodes.open_watches(connection, run_id)

    async def _judge_points(self, index: _Index, job: _PointsJob) -> list[Transition]:
        held = await self.watches(job.run_id)
        if self._last_points.get(job.run_id) is job:
            del self._last_points[job.run_id]  # begun: later batches wait for a job of their own
        return self._judge(index, held, job.run_id, _joined(job.batches))

    @staticmethod
    def _judge(index: _Index, held: _RunWatches, run_id: int, points: PointsOf) -> list[Transition]:
        transitions: list[Transition] = []
        watches = held.watches
        series = points(lambda name: bool(index.match(name).rules))
        for name, (steps, values, invalid) in series.items():
            if not steps:
                continue
            watching = index.match(name)
            extent = watching.extent_of(values, invalid)  # once for all the series' rules
            for rule in watching.to_judge(extent, held.open_rules):
                if rule.run_id is not None and rule.run_id != run_id:
                    continue
                watch = watches.get((rule.id, name))
                if watch is None:
                    watch = watches[rule.id, name] = Watch()
                found = judge_series(rule, name, watch, steps, values, extent)
                if found:
                    transitions += found
                    # Until the store says which stay open: never folded away meanwhile.
                    held.open_rules.add(rule.id)
        return transitions

    async def _judge_rounds(self, index: _Index, job: _RoundsJob) -> list[Transition]:
        rules = [
            rule
            for rule in index.loaded.rules
            if rule.spec.kind == "eval_drop" and rule.applies_to(job.run_id)
        ]
        if not rules:
            return []
        held = await self.watches(job.run_id)
        project_id = index.loaded.project_id
        differences = await run_in_threadpool(self._differences, project_id, job, rules)
        transitions = []
        for rule in rules:
            watch = held.watches.setdefault((rule.id, ""), Watch())
            for round_id in job.round_ids:
                if rule.spec.round_id not in (None, round_id):
                    continue
                label = f"{round_id} (execution attempt {job.attempt})"
                found = judge_eval_drop(rule, watch, label, differences.get((rule.id, round_id)))
                if found is not None:
                    transitions.append(found)
        return transitions

    def _differences(
        self, project_id: int, job: _RoundsJob, rules: list[Rule]
    ) -> dict[tuple[int, str], float | None]:
        with self._database.connect() as connection:
            return {
                (rule.id, round_id): round_difference(
                    connection, project_id, job.run_id, job.attempt, round_id, rule
                )
                for rule in rules
                for round_id in job.round_ids
            }

    async def store(self, run_id: int, transitions: list[Transition]) -> None:
        """Record what the rules judged; the run's cached watches follow."""
        fired = await self._database.write(
            alert_episodes.apply_transitions, run_id, transitions, key=run_id
        )
        held = self._runs.get(run_id)
        if held is not None:
            for t in transitions:
                held.watches.setdefault((t.rule_id, t.subject), Watch()).open = t.opens
            held.open_rules = {rule for (rule, _), w in held.watches.items() if w.open}
        if fired:
            self._notify(run_id)
            self.delivery_wanted.set()

    # --- rule changes ----------------------------------------------------------------------

    def forget(self, project: str) -> None:
        """Drop a project's rules (changed here): the next batch loads them again."""
        self._indexes.pop(project, None)
        self._forgotten[project] = self._forgotten.get(project, 0) + 1

    async def stop(self, tasks: list[asyncio.Task[None]]) -> None:
        """End the engine's loops (``tasks``: those started beside it), waiting for the
        reads they are in the middle of."""
        self.stopping.set()
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait(_STOP)
        _done, pending = await asyncio.wait(tasks, timeout=STOP_SECONDS)
        for task in pending:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def pause(self, seconds: float) -> bool:
        """Wait ``seconds``, or less when the engine stops; False once it stops."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stopping.wait(), seconds)
        return not self.stopping.is_set()

    async def _poll_versions(self) -> None:
        while await self.pause(VERSION_POLL_SECONDS):
            if not self._indexes:
                continue
            with contextlib.suppress(Exception):  # the store is down: try again next time
                self._apply_versions(await run_in_threadpool(self._read_versions))

    def _read_versions(self) -> dict[int, int]:
        with self._database.connect() as connection:
            return alert_rules.rule_versions(connection)

    def _apply_versions(self, versions: dict[int, int]) -> None:
        for project, index in list(self._indexes.items()):
            if index is None:
                self._indexes.pop(project)  # a project that did not exist may exist now
            elif versions.get(index.loaded.project_id, 0) != index.loaded.version:
                self._indexes.pop(project)


def _has_kind(index: _Index, kind: str) -> bool:
    return any(rule.spec.kind == kind for rule in index.loaded.rules)
