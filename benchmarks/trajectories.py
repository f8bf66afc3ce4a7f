"""Trajectories at scale, against a real ``tuneplane serve`` process on SQLite and PostgreSQL.

Reads with 1,000,000 indexed trajectories: one run (``bench/rollouts``) gets 1,000,000 index
rows written straight into the ``trajectories`` table in bulk (SQLAlchemy Core inserts of
rows built by the store's own ``_row``: 31,250 steps x 32 rollouts, the five categories in
turn, bodies long expired), then one more step of 32 real rollouts of 100 messages through
``POST /api/v1/ingest/trajectories``, so their bodies are in blob storage. On PostgreSQL the
table is then vacuumed and analyzed (what autovacuum does to a table that grew this much);
SQLite keeps no statistics, and the server never makes any. Timed over HTTP from one
keep-alive client, warm (5 untimed requests, then ``--repeat`` timed ones): median and p95 of

* the rollout page of one step and category:
  ``GET …/trajectories?scope=training&category=low_reward&step=S&limit=100`` (S varies);
* the same category over all steps, its next page (``after``) and a page at 90% of the run;
* the first page (50 messages) of one real 100-message trajectory: ``GET …/trajectories/{id}``.

Each figure should be at most 100 ms. Then each read's SQL (captured from the store's own
``list_index`` and ``steps_with_rollouts``) is timed in-process and its plan printed
(``EXPLAIN QUERY PLAN`` / ``EXPLAIN ANALYZE``). ``--candidate-index COLS`` times the reads
again with and without one more index on ``trajectories`` (created and dropped in the
scratch store, the order alternating), to try a fix.

Uploads through the SDK: 10,000 training rollouts of 100 messages (200-800 characters each)
in one run, 32 per step over 313 steps (the per-step cap keeps all of them), through
``Reporter.trajectory()``: *paced*, the loop waits before each step until the queue has room
for it (nothing is dropped: the rate is delivery's), and *burst*, as fast as the calls go
(the queue's drops are the figure). Reported: trajectories/s and MB/s of message JSON from
the first call until ``flush()`` returned and the list route's ``total`` counts every
trajectory sent, the calling thread's time per call (median, p99), and what was dropped or
left out.

    python benchmarks/trajectories.py                                 # both engines, ~10 min
    python benchmarks/trajectories.py --engine sqlite --index-rows 100000 --uploads 1000
    python benchmarks/trajectories.py --part reads --candidate-index run_id,scope,step
"""

from __future__ import annotations

import argparse
import hashlib
import math
import random
import re
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
from sqlalchemy import Engine, create_engine, event, insert, select
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).parent))
from ingest_arena import (
    Server,
    machine,
    percentile,
    postgres_store,
    postgres_version,
    served_code,
    sqlite_store,
)

from tuneplane.contract.limits import ROLLOUT_SAMPLES_PER_STEP, TRAJECTORY_PAGE_DEFAULT
from tuneplane.contract.trajectories import CATEGORIES, digest, parse_trajectory
from tuneplane.store.credentials import TokenScope
from tuneplane.store.schema import projects, runs, trajectories
from tuneplane.store.trajectories import Upload, _row
from tuneplane.store.trajectory_reads import list_index, steps_with_rollouts

PROJECT = "bench"
READ_RUN = "rollouts"
TARGET_MS = 100.0
MESSAGES = 100
PER_STEP = ROLLOUT_SAMPLES_PER_STEP
READ_NAMES = (
    "step + category page",
    "category page 1",
    "category page 2 (after)",
    "category page at 90% (after)",
    "trajectory, first 50 messages",
)
DAY = 86400.0
#: The words of the messages' text (compressible about as well as English prose).
TEXT = (
    "the model reward policy step token answer question tool call python result value check "
    "error retry plan first then next because so we need to compute sum of list file open "
    "read write test passed failed assert expected got function return loop"
)
#: What a rollout of each category says of itself (``invalid_reward``: a NaN reward).
DIAGNOSIS: dict[str, tuple[str | None, float]] = {
    "failure": ("failure", 0.0),
    "anomaly": ("anomaly", 0.4),
    "low_reward": ("low_reward", 0.05),
    "invalid_reward": (None, math.nan),
    "representative": ("representative", 0.7),
}


# --------------------------------------------------------------------------- documents


@dataclass
class MessagePool:
    """Distinct messages of 200-800 characters; a conversation draws 100 of them."""

    messages: list[dict[str, Any]]
    sizes: list[int]
    rng: random.Random = field(default_factory=lambda: random.Random(7))

    @classmethod
    def build(cls, count: int = 4000, seed: int = 1) -> MessagePool:
        rng = random.Random(seed)
        words_of_text = TEXT.split()
        messages, sizes = [], []
        for i in range(count):
            length = rng.randint(200, 800)
            words: list[str] = []
            while sum(len(w) + 1 for w in words) < length:
                words.append(rng.choice(words_of_text))
            content = " ".join(words)[:length]
            message = {"role": "user" if i % 2 == 0 else "assistant", "content": content}
            messages.append(message)
            sizes.append(len(orjson.dumps(message)))
        return cls(messages, sizes)

    def conversation(self, count: int = MESSAGES) -> tuple[list[dict[str, Any]], int]:
        """``count`` messages, user and assistant in turn, and their JSON size in bytes."""
        start = self.rng.randrange(0, len(self.messages) - count, 2)
        picked = self.messages[start : start + count]
        return picked, sum(self.sizes[start : start + count]) + count + 1


def rollout(step: int, slot: int, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The wire document of rollout ``slot`` of ``step`` (its category: slot mod 5)."""
    diagnostic, reward = DIAGNOSIS[CATEGORIES[slot % len(CATEGORIES)]]
    document: dict[str, Any] = {
        "scope": "training",
        "step": step,
        "trajectory_id": f"r{slot}",
        "messages": messages,
        "total_messages": len(messages),
        "complete": True,
        "capture_policy": "sampled",
        "reward": None if math.isnan(reward) else reward,
        "reward_invalid": math.isnan(reward),
    }
    if diagnostic is not None:
        document["diagnostic"] = diagnostic
    return document


# --------------------------------------------------------------------------- seeding


def store_engine(store_args: list[str]) -> Engine:
    """An engine of our own on the server's store (not the server's pool)."""
    if store_args[0] == "--database-url":
        url = make_url(store_args[1]).set(drivername="postgresql+psycopg")
        return create_engine(url)
    return create_engine(f"sqlite:///{Path(store_args[1]) / 'tuneplane.db'}")


def run_id_of(engine: Engine, run: str) -> int:
    query = (
        select(runs.c.id)
        .join(projects, projects.c.id == runs.c.project_id)
        .where(projects.c.name == PROJECT, runs.c.name == run)
    )
    with engine.connect() as connection:
        return int(connection.execute(query).scalar_one())


def templates(run_id: int, attempt: int, pool: MessagePool) -> dict[str, dict[str, Any]]:
    """One index row per category, exactly as the store writes it (``_row``)."""
    scope = TokenScope(run_id, 0, attempt, PROJECT, READ_RUN, time.time() + DAY, "0" * 64)
    rows: dict[str, dict[str, Any]] = {}
    for slot, category in enumerate(CATEGORIES):
        parsed, problems = parse_trajectory("t", rollout(0, slot, pool.conversation()[0]))
        assert parsed is not None, problems
        body = parsed.encoded()
        row = _row(scope, Upload(parsed, body, digest(body), zlib.compress(body, 1)), 0.0, 7)
        assert row["category"] == category, (row["category"], category)
        rows[category] = row
    return rows


def seed_index(engine: Engine, run_id: int, attempt: int, count: int) -> float:
    """``count`` rollouts' index rows of steps 0, 1, … (32 each), received a step every
    20 s from 15 days ago: their bodies expired (the sweeper removed them) long ago."""
    started = time.perf_counter()
    shapes = templates(run_id, attempt, MessagePool.build(400))
    first = time.time() - 15 * DAY
    chunk: list[dict[str, Any]] = []
    for i in range(count):
        step, slot = divmod(i, PER_STEP)
        identity = f"training/{step}/r{slot}"
        received = first + step * 20.0
        row = dict(shapes[CATEGORIES[slot % len(CATEGORIES)]])
        row.update(
            identity=identity,
            step=step,
            trajectory_id=f"r{slot}",
            digest=hashlib.sha256(identity.encode()).hexdigest(),
            received_at=received,
            expires_at=received + 7 * DAY,
            removed_at=received + 7 * DAY + 60,
            body_state="expired",
            body_key=None,
        )
        chunk.append(row)
        if len(chunk) == 20_000 or i == count - 1:
            with engine.begin() as connection:
                connection.execute(insert(trajectories), chunk)
            chunk = []
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.exec_driver_sql("VACUUM (ANALYZE) trajectories")
    return time.perf_counter() - started


# --------------------------------------------------------------------------- the API


class Api:
    """The admin's keep-alive client (the data directory's admin key)."""

    def __init__(self, server: Server, data_dir: Path) -> None:
        key = (data_dir / "admin.key").read_text().strip()
        self.base = server.base
        self.client = httpx.Client(
            base_url=server.base, headers={"Authorization": f"Bearer {key}"}, timeout=120
        )

    def attempt(self, run: str) -> tuple[str, int]:
        """A new run and its first execution attempt: the ingest token and the number."""
        self.client.post(f"/api/v1/projects/{PROJECT}/runs", json={"run": run}).raise_for_status()
        answer = self.client.post(f"/api/v1/projects/{PROJECT}/runs/{run}/attempts")
        answer.raise_for_status()
        return answer.json()["token"], int(answer.json()["attempt"])

    def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        answer = self.client.get(path, params=params)
        if answer.status_code != 200:
            raise RuntimeError(f"GET {path} {params}: HTTP {answer.status_code}: {answer.text}")
        return answer.json()

    def upload(self, token: str, documents: list[dict[str, Any]]) -> None:
        auth = {"Authorization": f"Bearer {token}"}
        for start in range(0, len(documents), 16):
            answer = self.client.post(
                "/api/v1/ingest/trajectories",
                content=orjson.dumps({"trajectories": documents[start : start + 16]}),
                headers={**auth, "Content-Type": "application/json"},
            )
            if answer.status_code != 200 or answer.json()["new"] != len(documents[start:][:16]):
                raise RuntimeError(f"upload: HTTP {answer.status_code}: {answer.text[:300]}")


# --------------------------------------------------------------------------- reads


@dataclass
class Read:
    name: str
    path: str
    params: Callable[[int], dict[str, Any]]
    check: Callable[[Any, dict[str, Any]], None]
    #: ``list_index``'s filters and ``after`` (None: not a list read).
    filters: dict[str, Any] | None = None
    after: int | None = None


def _check_step_page(body: Any, params: dict[str, Any]) -> None:
    items = body["items"]
    assert len(items) == body["total"] == 6, (len(items), body["total"])
    assert all(i["step"] == params["step"] and i["category"] == "low_reward" for i in items)


def _check_category_page(body: Any, _params: dict[str, Any]) -> None:
    assert len(body["items"]) == 100, len(body["items"])
    assert body["next"] is not None
    assert body["total"] == 10_000, body["total"]  # counted up to 10,000: "more than"
    assert body["total_is_lower_bound"]
    assert all(item["category"] == "low_reward" for item in body["items"])


def _check_body_page(body: Any, _params: dict[str, Any]) -> None:
    assert len(body["messages"]) == TRAJECTORY_PAGE_DEFAULT, body["body"]
    assert body["next_offset"] == TRAJECTORY_PAGE_DEFAULT, body["next_offset"]
    assert body["message_count"] == MESSAGES, body["message_count"]


def reads(api: Api, steps: int, real_ids: list[int], deep_after: int) -> list[Read]:
    base = f"/api/v1/projects/{PROJECT}/runs/{READ_RUN}/trajectories"
    rng = random.Random(3)
    picked = [rng.randrange(steps) for _ in range(64)]
    category = {"scope": "training", "category": "low_reward"}
    page = {**category, "limit": 100}
    first_next = api.get(base, page)["next"]
    return [
        Read(
            READ_NAMES[0],
            base,
            lambda i: {**page, "step": picked[i % len(picked)]},
            _check_step_page,
            {**category, "step": picked[0]},
        ),
        Read(READ_NAMES[1], base, lambda _i: page, _check_category_page, category),
        Read(
            READ_NAMES[2],
            base,
            lambda _i: {**page, "after": first_next},
            _check_category_page,
            category,
            first_next,
        ),
        Read(
            READ_NAMES[3],
            base,
            lambda _i: {**page, "after": deep_after},
            _check_category_page,
            category,
            deep_after,
        ),
        Read(
            READ_NAMES[4],
            f"{base}/{{}}",
            lambda i: {"id": real_ids[i % len(real_ids)]},
            _check_body_page,
        ),
    ]


def timed(api: Api, read: Read, repeat: int, budget: float) -> list[float]:
    """Milliseconds of ``repeat`` requests after 5 warm-ups (fewer past ``budget`` s)."""

    def get(i: int) -> tuple[httpx.Response, dict[str, Any]]:
        params = read.params(i)
        if "id" in params:
            return api.client.get(read.path.format(params["id"])), params
        return api.client.get(read.path, params=params), params

    for i in range(5):
        answer, params = get(i)
        read.check(answer.json(), params)
    samples: list[float] = []
    deadline = time.monotonic() + budget
    for i in range(repeat):
        started = time.perf_counter()
        answer, params = get(i)
        samples.append((time.perf_counter() - started) * 1000)
        if answer.status_code != 200:
            raise RuntimeError(f"{read.name}: HTTP {answer.status_code}: {answer.text[:300]}")
        if i % 16 == 0:
            read.check(answer.json(), params)
        if time.monotonic() > deadline and len(samples) >= 20:
            break
    return sorted(samples)


def figures(engine: str, name: str, samples: list[float]) -> str:
    median = statistics.median(samples)
    verdict = "met" if median <= TARGET_MS else "**missed**"
    return (
        f"| {engine} | {name} | {median:.1f} | {percentile(samples, 0.95):.1f} | "
        f"{samples[-1]:.1f} | {len(samples)} | {verdict} |"
    )


def captured_sql(engine: Engine, run_id: int, read: Read) -> list[tuple[str, Any]]:
    """The statements the store's own read functions send for ``read``."""
    assert read.filters is not None
    captured: list[tuple[str, Any]] = []

    def listen(_c: Any, _cursor: Any, statement: str, parameters: Any, *_rest: Any) -> None:
        captured.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", listen)
    try:
        with engine.connect() as connection:
            filters = {name: read.filters.get(name) for name in read.filters}
            list_index(connection, run_id, filters, read.after, 100)
            steps_with_rollouts(connection, run_id)
    finally:
        event.remove(engine, "before_cursor_execute", listen)
    return captured


def explain(engine: Engine, run_id: int, read: Read) -> list[str]:
    """Each statement of a list read: its median time in-process and its plan."""
    lines = [f"  {read.name} ({read.filters}, after={read.after}):"]
    postgres = engine.dialect.name == "postgresql"
    prefix = "EXPLAIN (ANALYZE, BUFFERS) " if postgres else "EXPLAIN QUERY PLAN "
    with engine.connect() as connection:
        for statement, parameters in captured_sql(engine, run_id, read):
            spent = []
            for _ in range(7):
                started = time.perf_counter()
                connection.exec_driver_sql(statement, parameters).fetchall()
                spent.append((time.perf_counter() - started) * 1000)
            shown = " ".join(statement.split())
            shown = re.sub(r"SELECT (trajectories\.\w+, )+\w+\.\w+ FROM", "SELECT * FROM", shown)
            lines.append(f"    {statistics.median(spent):8.2f} ms  {shown}")
            for row in connection.exec_driver_sql(prefix + statement, parameters):
                lines.append("        " + (row[0] if postgres else f"{row[1]}:{row[3]}"))
    return lines


def _candidates(engine: Engine, indexes: list[str], present: bool) -> None:
    with engine.begin() as connection:
        for number, columns in enumerate(indexes):
            connection.exec_driver_sql(f"DROP INDEX IF EXISTS ix_bench_candidate_{number}")
            if present:
                connection.exec_driver_sql(
                    f"CREATE INDEX ix_bench_candidate_{number} ON trajectories ({columns})"
                )
        if present and engine.dialect.name == "postgresql":
            connection.exec_driver_sql("ANALYZE trajectories")


def alternate(
    api: Api, engine: Engine, selected: list[Read], args: argparse.Namespace
) -> list[str]:
    """The reads without and with the candidate indexes, in alternating order, ``--rounds``
    times each (a quarter of ``--repeat`` and an eighth of ``--budget`` a read each time)."""
    samples: dict[tuple[str, bool], list[float]] = {}
    for round_ in range(args.rounds):
        for present in (False, True) if round_ % 2 == 0 else (True, False):
            _candidates(engine, args.candidate_index, present)
            for read in selected:
                taken = timed(api, read, args.repeat // 4, args.budget / 8)
                samples.setdefault((read.name, present), []).extend(taken)
    _candidates(engine, args.candidate_index, False)
    rows = []
    for read in selected:
        before, after = (sorted(samples[(read.name, flag)]) for flag in (False, True))
        rows.append(
            f"| {engine.dialect.name} | {read.name} | {statistics.median(before):.1f} "
            f"({percentile(before, 0.95):.1f}) | {statistics.median(after):.1f} "
            f"({percentile(after, 0.95):.1f}) |"
        )
    return rows


def reads_part(api: Api, engine: Engine, args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """Seed, upload the real step, time the reads; (rows of figures, explanations)."""
    token, attempt = api.attempt(READ_RUN)
    run_id = run_id_of(engine, READ_RUN)
    seconds = seed_index(engine, run_id, attempt, args.index_rows)
    steps = math.ceil(args.index_rows / PER_STEP)
    print(f"  seeded {args.index_rows:,} index rows in {seconds:.1f} s", flush=True)
    pool = MessagePool.build()
    api.upload(token, [rollout(steps, slot, pool.conversation()[0]) for slot in range(PER_STEP)])
    with engine.connect() as connection:
        real_ids = list(
            connection.execute(
                select(trajectories.c.id)
                .where(trajectories.c.run_id == run_id, trajectories.c.step == steps)
                .order_by(trajectories.c.id)
            ).scalars()
        )
        deep_after = connection.execute(
            select(trajectories.c.id)
            .where(trajectories.c.run_id == run_id)
            .order_by(trajectories.c.id)
            .offset(args.index_rows * 9 // 10)
            .limit(1)
        ).scalar_one()
    assert len(real_ids) == PER_STEP, real_ids
    listed = api.get(f"/api/v1/projects/{PROJECT}/runs/{READ_RUN}/trajectories", {"limit": 1})
    assert listed["total"] == 10_000, listed["total"]
    assert listed["total_is_lower_bound"]
    selected = [r for r in reads(api, steps, real_ids, deep_after) if r.name in args.read]
    name = engine.dialect.name
    rows = [
        f"| {name} | seed {args.index_rows:,} index rows + {PER_STEP} uploads | "
        f"{seconds:.1f} s | | | | |"
    ]
    for read in selected:
        rows.append(figures(name, read.name, timed(api, read, args.repeat, args.budget)))
        print(rows[-1], flush=True)
    notes = []
    for read in selected:
        if read.filters is not None:
            notes += explain(engine, run_id, read)
    if args.candidate_index:
        _candidates(engine, args.candidate_index, True)
        engine.dispose()  # pysqlite's statement cache keeps plans made before the indexes
        notes += ["  with the candidate indexes:"]
        notes += [
            line for read in selected if read.filters for line in explain(engine, run_id, read)
        ]
        notes += [
            f"  without / with indexes on ({'), ('.join(args.candidate_index)}), median (p95) ms:",
            *alternate(api, engine, selected, args),
        ]
    return rows, notes


# --------------------------------------------------------------------------- SDK uploads


@dataclass
class UploadResult:
    engine: str
    mode: str
    count: int
    seconds: float
    megabytes: float
    calls_us: list[float]
    accepted: int
    dropped: int
    left_out: int
    stored: int
    flushed: bool

    def markdown(self) -> str:
        calls = sorted(self.calls_us)
        return (
            f"| {self.engine} | {self.mode} | {self.stored / self.seconds:,.0f} | "
            f"{self.megabytes / self.seconds:.1f} | {statistics.median(calls):,.0f} | "
            f"{percentile(calls, 0.99):,.0f} | {self.count:,} / {self.accepted:,} / "
            f"{self.dropped:,} / {self.left_out:,} / {self.stored:,} | {self.seconds:.1f} s |"
        )


def stored_count(api: Api, run: str, expected: int, wait: float = 60.0) -> int:
    """The list route's ``total`` for the run, once it reaches ``expected`` (or in time)."""
    deadline = time.monotonic() + wait
    while True:
        listed = api.get(f"/api/v1/projects/{PROJECT}/runs/{run}/trajectories", {"limit": 1})
        total = int(listed["total"])
        if total >= min(expected, 10_000) or time.monotonic() > deadline:
            return total
        time.sleep(0.05)


def sdk_upload(api: Api, engine: str, mode: str, count: int, pool: MessagePool) -> UploadResult:
    """``count`` rollouts through ``Reporter.trajectory()``, 32 per step; ``paced`` waits
    before each step until the queue has room for the whole step."""
    from tuneplane.client.reporter import Reporter

    run = f"sdk-{mode}"
    token, attempt = api.attempt(run)
    reporter = Reporter(api.base, f"{PROJECT}/{run}", token, attempt=attempt)
    room = reporter.health().trajectories_queue_capacity - PER_STEP
    calls: list[float] = []
    accepted, megabytes = 0, 0.0
    clock = time.perf_counter_ns
    started = time.perf_counter()
    for i in range(count):
        step, slot = divmod(i, PER_STEP)
        messages, size = pool.conversation()
        if mode == "paced" and slot == 0:
            while reporter.health().trajectories_queue_size > room:
                time.sleep(0.002)
        diagnostic, reward = DIAGNOSIS[CATEGORIES[slot % len(CATEGORIES)]]
        before = clock()
        ok = reporter.trajectory(
            scope="training",
            step=step,
            trajectory_id=f"r{slot}",
            messages=messages,
            reward=reward,
            diagnostic=diagnostic,  # type: ignore[arg-type]
            capture_policy="sampled",
        )
        calls.append((clock() - before) / 1000)
        accepted += ok
        megabytes += size / 1e6 if ok else 0
    flushed = reporter.flush(timeout=900)
    health = reporter.health()
    stored = stored_count(api, run, health.trajectories_sent)
    seconds = time.perf_counter() - started
    reporter.close(timeout=30)
    return UploadResult(
        engine,
        mode,
        count,
        seconds,
        megabytes,
        calls,
        accepted,
        health.trajectories_dropped,
        health.trajectories_not_uploaded,
        stored,
        flushed,
    )


# --------------------------------------------------------------------------- main


def measure(
    engine: str, store_args: list[str], data_dir: Path, args: argparse.Namespace, workdir: Path
) -> tuple[list[str], list[str], list[UploadResult]]:
    server = Server(store_args, workdir / f"{engine}.log", secret="not-used-here")  # noqa: S106
    database = store_engine(store_args)
    read_rows: list[str] = []
    notes: list[str] = []
    uploads: list[UploadResult] = []
    try:
        api = Api(server, data_dir)
        if args.part in ("reads", "both"):
            read_rows, notes = reads_part(api, database, args)
        pool = MessagePool.build()
        for mode in args.mode if args.part in ("uploads", "both") else []:
            uploads.append(sdk_upload(api, engine, mode, args.uploads, pool))
            print(uploads[-1].markdown(), flush=True)
    finally:
        server.stop()
        database.dispose()
    problems = [line for line in server.log_text().splitlines() if "ERROR" in line]
    notes += [f"  server log: {line}" for line in problems[:10]]
    return read_rows, notes, uploads


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--part", choices=["reads", "uploads", "both"], default="both")
    parser.add_argument("--index-rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=200, help="timed requests per read")
    parser.add_argument("--budget", type=float, default=25.0, help="seconds per read at most")
    parser.add_argument("--read", action="append", choices=READ_NAMES, help="(repeatable)")
    parser.add_argument(
        "--candidate-index", action="append", metavar="COLS", help="e.g. run_id,scope,step"
    )
    parser.add_argument("--rounds", type=int, default=4, help="with --candidate-index")
    parser.add_argument("--uploads", type=int, default=10_000)
    parser.add_argument("--mode", action="append", choices=["paced", "burst"])
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args(argv)
    if args.index_rows < 60_000:  # the checks expect more than 10,000 rows of a category
        parser.error("--index-rows must be at least 60,000")
    args.read = args.read or list(READ_NAMES)
    args.mode = args.mode or ["paced", "burst"]
    return args


READ_HEADER = [
    "| engine | read | median ms | p95 ms | max ms | requests | ≤ 100 ms |",
    "|---|---|--:|--:|--:|--:|---|",
]
UPLOAD_HEADER = [
    "| engine | mode | trajectories/s | MB/s | call median µs | call p99 µs "
    "| called / accepted / dropped / left out / stored | until stored |",
    "|---|---|--:|--:|--:|--:|--:|--:|",
]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print("machine: " + ", ".join(f"{k} {v}" for k, v in machine().items()))
    print("serving: " + ", ".join(f"{k} {v}" for k, v in served_code().items()), flush=True)
    read_rows, notes, uploads = list(READ_HEADER), [], []
    with tempfile.TemporaryDirectory(prefix="tuneplane-traj-") as tmp:
        workdir = Path(tmp)
        if args.engine in ("sqlite", "both"):
            with sqlite_store(workdir) as store:
                print("sqlite:", flush=True)
                result = measure("sqlite", store, Path(store[1]), args, workdir)
                read_rows += result[0]
                notes += ["sqlite:", *result[1]]
                uploads += result[2]
        if args.engine in ("postgresql", "both"):
            print(f"postgresql {postgres_version(args.pg_url)}:", flush=True)
            with postgres_store(args.pg_url) as store:
                data_dir = workdir / "pg-data"
                store = [*store, "--data-dir", str(data_dir)]
                result = measure("postgresql", store, data_dir, args, workdir)
                read_rows += result[0]
                notes += ["postgresql:", *result[1]]
                uploads += result[2]
    print("\n".join(notes))
    if args.part != "uploads":
        print("\n".join(read_rows))
    if uploads:
        print("\n".join(UPLOAD_HEADER + [u.markdown() for u in uploads]))
    lost = [u for u in uploads if u.stored != min(u.accepted - u.dropped, 10_000) or not u.flushed]
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
