"""The runs list's search at 10,000 runs, against a real ``tuneplane serve`` on SQLite and
PostgreSQL: a filtered, sorted page (``GET /api/v1/projects/bench/runs?q=&sort=&columns=
&limit=50``) must answer in 100 ms or less.

The project ``bench`` is made through the run API; its 10,000 runs (``run-00000`` …) are
then written straight into the server's store, as an importer would, each with a config
(``lr``, ``model``, ``seed``, ``batch_size``, ``optimizer.name``), a group (``sweep-0`` …
``sweep-49``), one or two tags, a status, and three summary metrics (``reward``, ``loss``,
``train/kl``), so the search reads what it would read in a real project. PostgreSQL's
tables are analyzed after the seed (as autovacuum would soon do).

Every query is sent ``--repeat`` times (after 3 warm-ups) from one keep-alive client with
the admin key, and its median and 95th percentile are reported. Each answer's
``X-Total-Count`` is checked against the same filter evaluated in Python over the seeded
rows, and its first page against Python's order.

    python benchmarks/run_search.py                       # both engines
    python benchmarks/run_search.py --engine sqlite --runs 2000
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine, create_engine, insert, select, text
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

from tuneplane.store.schema import metrics, projects, run_tags, runs

PAGE = 50
MODELS = ["qwen2.5-7b", "qwen2.5-1.5b", "llama-3-8b", "mistral-7b"]
TAGS = ["baseline", "ablation", "long", "lora", "dpo"]
STATUSES = ["succeeded", "failed", "running", "cancelled"]

Seeded = dict[str, Any]


@dataclass(frozen=True)
class Query:
    label: str
    params: dict[str, str]
    keep: Callable[[Seeded], bool]
    #: Python's sort key of the page (None values are placed last by the caller).
    order: Callable[[Seeded], Any] | None = None
    descending: bool = False


QUERIES = [
    Query("newest first", {"sort": "-created_at"}, lambda r: True, lambda r: r["i"], True),
    Query(
        "config filter, metric sort, 3 columns",
        {"q": "config.lr < 1e-4 and config.model = qwen2.5-7b", "sort": "-reward.last",
         "columns": "config.lr,reward.last,loss.min"},
        lambda r: r["config"]["lr"] < 1e-4 and r["config"]["model"] == "qwen2.5-7b",
        lambda r: r["reward_last"], True,
    ),
    Query(
        "metric filters, config sort",
        {"q": "reward.last > 0.8 and loss.min < 0.3", "sort": "config.lr"},
        lambda r: r["reward_last"] > 0.8 and r["loss_min"] < 0.3,
        lambda r: r["config"]["lr"],
    ),
    Query(
        "tag, group and status, name sort",
        {"q": "tag = ablation and group = sweep-3 and status != failed", "sort": "name"},
        lambda r: "ablation" in r["tags"] and r["group"] == "sweep-3" and r["status"] != "failed",
        lambda r: r["name"],
    ),
    Query(
        "nested config and a bare word",
        {"q": "config.optimizer.name = adamw seed-7", "sort": "-train/kl.max"},
        lambda r: r["config"]["optimizer"]["name"] == "adamw" and "seed-7" in (
            r["name"] + str(r["config"]) + r["group"] + " ".join(r["tags"]) + r["status"]
        ),
        lambda r: r["kl_max"], True,
    ),
]  # fmt: skip


def store_engine(store_args: list[str], data_dir: Path) -> Engine:
    if store_args[0] == "--database-url":
        return create_engine(make_url(store_args[1]).set(drivername="postgresql+psycopg"))
    return create_engine(f"sqlite:///{data_dir / 'tuneplane.db'}")


def seed(engine: Engine, count: int, rng: random.Random) -> list[Seeded]:
    """``count`` runs of project ``bench`` with configs, groups, tags and metrics."""
    rows: list[Seeded] = []
    now = time.time() - count
    for i in range(count):
        config = {
            "lr": rng.choice([1e-6, 3e-6, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3]),
            "model": rng.choice(MODELS),
            "seed": f"seed-{i % 10}",
            "batch_size": rng.choice([8, 16, 32, 64]),
            "optimizer": {"name": rng.choice(["adamw", "sgd", "lion"])},
        }
        rows.append({
            "i": i, "name": f"run-{i:05d}", "config": config, "group": f"sweep-{i % 50}",
            "tags": rng.sample(TAGS, rng.choice([1, 2])), "status": rng.choice(STATUSES),
            "reward_last": rng.random(), "loss_min": rng.random(), "kl_max": rng.random(),
            "created_at": now + i,
        })  # fmt: skip
    with engine.begin() as connection:
        project_id = connection.execute(
            select(projects.c.id).where(projects.c.name == "bench")
        ).scalar_one()
        connection.execute(insert(runs), [
            {"project_id": project_id, "name": r["name"], "config": r["config"],
             "created_at": r["created_at"], "updated_at": r["created_at"], "status": r["status"],
             "run_group": r["group"], "point_count": 300, "last_step": 99}
            for r in rows
        ])  # fmt: skip
        ids = dict(
            connection.execute(
                select(runs.c.name, runs.c.id).where(runs.c.project_id == project_id)
            ).all()
        )
        connection.execute(insert(run_tags), [
            {"run_id": ids[r["name"]], "tag": tag} for r in rows for tag in r["tags"]
        ])  # fmt: skip
        connection.execute(insert(metrics), [
            {"run_id": ids[r["name"]], "name": name, "count": 100, "min_value": low,
             "max_value": high, "last_value": last, "first_step": 0, "last_step": 99}
            for r in rows
            for name, low, high, last in (
                ("reward", 0.0, 1.0, r["reward_last"]),
                ("loss", r["loss_min"], 2.0, r["loss_min"] + 0.1),
                ("train/kl", 0.0, r["kl_max"], r["kl_max"] / 2),
            )
        ])  # fmt: skip
        if connection.dialect.name == "postgresql":
            connection.execute(text("ANALYZE runs; ANALYZE metrics; ANALYZE run_tags"))
    return rows


def expected(rows: list[Seeded], query: Query) -> tuple[int, list[str]]:
    kept = [r for r in rows if query.keep(r)]
    if query.order is not None:
        kept.sort(key=lambda r: r["i"], reverse=query.descending)  # the tie-break
        kept.sort(key=query.order, reverse=query.descending)
    return len(kept), [r["name"] for r in kept[:PAGE]]


def measure(engine_name: str, store: list[str], data_dir: Path, args: argparse.Namespace,
            workdir: Path) -> list[str]:  # fmt: skip
    server = Server([*store, "--data-dir", str(data_dir)] if store[0] != "--data-dir" else store,
                    workdir / f"{engine_name}.log", "bench-secret")  # fmt: skip
    lines = []
    try:
        key = (data_dir / "admin.key").read_text().strip()
        client = httpx.Client(base_url=server.base, headers={"Authorization": f"Bearer {key}"},
                              timeout=60)  # fmt: skip
        made = client.post("/api/v1/projects/bench/runs", json={"run": "first"})
        assert made.status_code == 201, made.text
        client.delete("/api/v1/projects/bench/runs/first")
        started = time.perf_counter()
        rows = seed(store_engine(store, data_dir), args.runs, random.Random(7))
        print(f"  seeded {args.runs} runs in {time.perf_counter() - started:.1f} s", flush=True)
        for query in QUERIES:
            params = {**query.params, "limit": str(PAGE)}
            times = []
            for attempt in range(3 + args.repeat):
                began = time.perf_counter()
                answer = client.get("/api/v1/projects/bench/runs", params=params)
                elapsed = (time.perf_counter() - began) * 1000
                if answer.status_code != 200:
                    raise SystemExit(f"{query.label}: {answer.status_code} {answer.text}")
                if attempt >= 3:
                    times.append(elapsed)
            total, page = expected(rows, query)
            got = [run["run"] for run in answer.json()]
            assert int(answer.headers["x-total-count"]) == total, (query.label, total)
            assert got == page, (query.label, got[:5], page[:5])
            times.sort()
            lines.append(
                f"| {engine_name} | {query.label} | {total} | {statistics.median(times):.1f} "
                f"| {percentile(times, 0.95):.1f} |"
            )
            print(lines[-1], flush=True)
        client.close()
    finally:
        server.stop()
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args(argv)
    print("machine: " + ", ".join(f"{k} {v}" for k, v in machine().items()))
    print("serving: " + ", ".join(f"{k} {v}" for k, v in served_code().items()), flush=True)
    table = ["| engine | query | matching runs | median ms | p95 ms |", "|---|---|---:|---:|---:|"]
    with tempfile.TemporaryDirectory(prefix="tuneplane-search-") as tmp:
        workdir = Path(tmp)
        if args.engine in ("sqlite", "both"):
            with sqlite_store(workdir) as store:
                print("sqlite:", flush=True)
                table += measure("sqlite", store, Path(store[1]), args, workdir)
        if args.engine in ("postgresql", "both"):
            print(f"postgresql {postgres_version(args.pg_url)}:", flush=True)
            with postgres_store(args.pg_url) as store:
                table += measure("postgresql", store, workdir / "pg-data", args, workdir)
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
