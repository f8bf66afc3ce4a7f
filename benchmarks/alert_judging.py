"""What judging alert rules costs per Arena batch, in-process (no HTTP, no store).

The alert engine (``tuneplane/server/alerting.py``) judges each stored batch some rule
watches: it gathers the watched series' new points and runs each matching rule over them.
This script feeds ``AlertEngine._judge`` the batches of ``ingest_arena.py`` (one-event
"small" ones of 4 metrics, 128 x 128 "full" ones) of one run, with two rule sets of 20:

* ``thresholds``: 20 thresholds on ``reward`` (one watched series, many rules);
* ``mix``: the 20 rules of ``ingest_arena.py --rules 20`` (every kind, globs included).

No rule fires on this load. The figure is CPU time per batch (``time.process_time``), the
median over rounds that alternate the rule sets. Run from the repository root::

    python benchmarks/alert_judging.py                # 5 rounds
    python benchmarks/alert_judging.py --rounds 11 --small 50000
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest_arena import FULL_EVENTS, _full_event, _small_event, machine, rule_bodies, served_code

from tuneplane.contract.alert_rules import parse_rule
from tuneplane.contract.arena import ArenaBatch, parse_arena_batch
from tuneplane.diagnostics.alert_rules import Rule
from tuneplane.server.alerting import AlertEngine, ArenaPoints, _Index, _RunWatches
from tuneplane.store.alert_rules import ProjectRules

RULE_SETS: dict[str, list[dict[str, Any]]] = {
    "thresholds": [{"kind": "threshold", "metric": "reward", "op": "above", "value": 1e9}] * 20,
    "mix": rule_bodies(20),
}


def index_of(bodies: list[dict[str, Any]]) -> _Index:
    # eval_drop rules are judged per round, not per batch: the engine leaves them out too.
    rules = tuple(Rule(i + 1, parse_rule(body)) for i, body in enumerate(bodies))
    return _Index.of(ProjectRules(project_id=1, version=1, rules=rules))


def batches(shape: str, count: int) -> list[ArenaBatch]:
    rng = random.Random(shape)
    if shape == "small":
        return [
            parse_arena_batch({"logs": [_small_event("p", "r", step, rng)]})
            for step in range(count)
        ]
    return [
        parse_arena_batch(
            {"logs": [_full_event("p", "r", b * FULL_EVENTS + e, rng) for e in range(FULL_EVENTS)]}
        )
        for b in range(count)
    ]


def judge_all(index: _Index, fed: list[ArenaBatch]) -> float:
    """CPU µs per batch, judging ``fed`` in order on one run's fresh watches."""
    held = _RunWatches(time.monotonic(), set())
    started = time.process_time()
    for batch in fed:
        if AlertEngine._judge(index, held, 1, ArenaPoints(batch)):
            raise SystemExit("a rule fired: the load is meant to leave every rule quiet")
    return (time.process_time() - started) / len(fed) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--small", type=int, default=20_000, metavar="N")
    parser.add_argument("--full", type=int, default=100, metavar="N")
    args = parser.parse_args()
    print(f"machine: {machine()}; serving: {served_code()}")
    fed = {"small": batches("small", args.small), "full": batches("full", args.full)}
    indexes = {name: index_of(bodies) for name, bodies in RULE_SETS.items()}
    print("| batches | rules | µs per batch (median) | min | max |")
    print("|---|---|--:|--:|--:|")
    for shape, shaped in fed.items():
        took: dict[str, list[float]] = {name: [] for name in indexes}
        for round_no in range(args.rounds):
            order = list(indexes) if round_no % 2 == 0 else list(reversed(indexes))
            for name in order:
                took[name].append(judge_all(indexes[name], shaped))
        for name, values in took.items():
            print(
                f"| {shape} | {name} | {statistics.median(values):,.1f} | "
                f"{min(values):,.1f} | {max(values):,.1f} |"
            )


if __name__ == "__main__":
    main()
