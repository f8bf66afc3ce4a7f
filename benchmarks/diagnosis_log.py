"""What diagnosing an attempt with a long log costs: its whole stored log searched, on
SQLite and PostgreSQL, in-process (no HTTP).

A run is made through the app (a real server's routes, in-process); its attempt's log is
then written straight into the store: ``--lines`` lines (200,000 by default) as a
fine-tuning job prints them (the trainer's metric dictionaries, tqdm bars, NCCL INFO lines,
warnings), with a CUDA OOM traceback at a tenth of the log and the other ranks' NCCL
timeouts after it. The figure is the wall time of what the server does for a diagnosis
(``server.diagnoses._gather``: the evidence read from the store, the whole log searched,
the metrics; then the rules), the median of ``--rounds`` rounds, and its first findings.
Run from the repository root::

    python benchmarks/diagnosis_log.py                       # both engines
    python benchmarks/diagnosis_log.py --engine sqlite --lines 1000000
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import insert, select

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest_arena import machine, postgres_store, postgres_version, served_code

from tuneplane.diagnostics import diagnose
from tuneplane.server.app import create_app
from tuneplane.server.diagnoses import _gather
from tuneplane.server.settings import Secret, Settings
from tuneplane.server.state import AppState
from tuneplane.store.schema import log_lines, runs

OOM = """\
[rank3]: Traceback (most recent call last):
[rank3]:   File "/job/train.py", line 88, in <module>
[rank3]:     trainer.train()
[rank3]:   File "/venv/lib/python3.11/site-packages/transformers/trainer.py", line 2241, in train
[rank3]:     return inner_training_loop(
[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 3 has a \
total capacity of 79.10 GiB of which 1.21 GiB is free.""".splitlines()
TIMEOUT = (
    "[rank{r}]:[E ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=4121, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
    "Timeout(ms)=600000) ran for 600043 milliseconds before timing out."
)


def log_texts(count: int, rng: random.Random) -> list[str]:
    texts: list[str] = []
    for i in range(count):
        kind = rng.random()
        if kind < 0.6:
            texts.append(
                f"{{'loss': {rng.uniform(0.2, 2.5):.4f}, 'grad_norm': {rng.uniform(0.1, 3):.4f}, "
                f"'learning_rate': {rng.uniform(1e-6, 2e-5):.3e}, 'epoch': {i / count:.2f}}}"
            )
        elif kind < 0.85:
            done = i * 100 // count
            bar = "█" * (done // 10)
            texts.append(f" {done}%|{bar:<10}| {i}/{count} [12:01<3:22:10, 1.21s/it]")
        elif kind < 0.97:
            texts.append(
                f"node-{i % 8}:{4000 + i % 64}:{4100 + i % 64} [{i % 8}] NCCL INFO Channel "
                f"{i % 32:02d}/0 : {i % 8}[{i % 8}] -> {(i + 1) % 8}[{(i + 1) % 8}] via P2P/IPC"
            )
        else:
            texts.append(
                "/venv/lib/python3.11/site-packages/torch/utils/checkpoint.py:464: UserWarning: "
                "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly"
            )
    at = count // 10
    texts[at : at + len(OOM)] = OOM
    for r in range(8):
        texts[at + len(OOM) + 50 + r] = TIMEOUT.format(r=r)
    return texts


def seed(client: TestClient, state: AppState, texts: list[str]) -> int:
    client.post("/api/v1/projects/bench/runs", json={"run": "long-log"}).raise_for_status()
    client.post("/api/v1/projects/bench/runs/long-log/attempts").raise_for_status()
    with state.database.engine.begin() as connection:
        run_id = connection.execute(select(runs.c.id).where(runs.c.name == "long-log")).scalar()
        for at in range(0, len(texts), 10_000):
            connection.execute(
                insert(log_lines),
                [{"run_id": run_id, "attempt": 1, "seq": at + i, "stream": "stderr",
                  "time": 1.0, "text": text} for i, text in enumerate(texts[at : at + 10_000])],
            )  # fmt: skip
    assert isinstance(run_id, int)
    return run_id


def measure(engine: str, database_url: str, data_dir: Path, args: argparse.Namespace) -> str:
    texts = log_texts(args.lines, random.Random(7))
    settings = Settings(data_dir=data_dir, database_url=database_url, ingest_secret=Secret("s"))
    with TestClient(create_app(settings)) as client:
        key = (data_dir / "admin.key").read_text().strip()
        client.headers["Authorization"] = f"Bearer {key}"
        state: AppState = client.app.state.tuneplane  # type: ignore[attr-defined]
        run_id = seed(client, state, texts)
        seconds, findings = [], []
        for _ in range(args.rounds):
            started = time.perf_counter()
            evidence = _gather(state, run_id, 1, "failed")
            findings = diagnose(evidence)
            seconds.append(time.perf_counter() - started)
    first = findings[0]
    cited = first.citations[0]
    found = ", ".join(f.code for f in findings)
    return (
        f"| {engine} | {args.lines:,} | {statistics.median(seconds):.3f} | {max(seconds):.3f} "
        f"| {found} | line {cited.line} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    print(machine(), served_code())
    print("| engine | lines | median s | slowest s | findings | first cited |")
    print("|---|---:|---:|---:|---|---|")
    with tempfile.TemporaryDirectory() as workdir:
        if args.engine in ("sqlite", "both"):
            url = f"sqlite:///{workdir}/sqlite/tuneplane.db"
            print(measure("sqlite", url, Path(workdir) / "sqlite", args), flush=True)
        if args.engine in ("postgresql", "both"):
            with postgres_store(args.pg_url) as store:
                engine = f"postgresql {postgres_version(args.pg_url)}"
                print(measure(engine, store[1], Path(workdir) / "pg", args), flush=True)


if __name__ == "__main__":
    main()
