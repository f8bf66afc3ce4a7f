"""What checking a body for repeated keys costs: ``decode_json_body`` on Arena batches.

``decode_json_body`` (``tuneplane/contract/json_body.py``) refuses a JSON object that names a
key twice. orjson, which decodes every body, keeps the last value silently, so the check
compares the colons of the body with those of orjson's own encoding of the result (C speed;
only a body that may repeat a key is decoded again by the standard library, which sees every
key). This script times, on the bodies of ``ingest_arena.py``:

* ``orjson``: ``orjson.loads`` alone, which is what ``decode_json_body`` did on a valid body
  before the check;
* ``decode_json_body``: the function as it is now;
* two ways that were considered and measured slower or incomplete: ``walk+count`` (count
  the keys of the result in Python and compare with the body's colons; a colon inside a
  string needs a second check) and ``stdlib pairs`` (the standard library's decoder with an
  ``object_pairs_hook`` on every body).

Each is run in turn, in an order that alternates from round to round, so a machine whose
speed drifts slows all of them alike; the figure is the median per-call time over the
rounds. Run from the repository root::

    python benchmarks/decode_body.py               # 15 rounds
    python benchmarks/decode_body.py --rounds 31
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest_arena import _full_event, _small_event, machine, served_code

from tuneplane.contract.json_body import decode_json_body


def _count_keys(value: Any) -> int:
    stack, keys = [value], 0
    while stack:
        node = stack.pop()
        if type(node) is dict:
            keys += len(node)
            node = node.values()
        for child in node:
            if type(child) is dict or type(child) is list:
                stack.append(child)
    return keys


def walk_and_count(raw: bytes) -> Any:
    decoded = orjson.loads(raw)
    if _count_keys(decoded) != raw.count(b":"):
        raise ValueError("a colon in a string or a repeated key: check again")
    return decoded


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise ValueError("repeated key")
    return obj


def stdlib_pairs(raw: bytes) -> Any:
    return json.loads(raw, object_pairs_hook=_pairs)


CANDIDATES: dict[str, Callable[[bytes], Any]] = {
    "orjson": orjson.loads,
    "decode_json_body": decode_json_body,
    "walk+count": walk_and_count,
    "stdlib pairs": stdlib_pairs,
}


def bodies() -> dict[str, bytes]:
    rng = random.Random(7)
    return {
        "1x4": orjson.dumps({"logs": [_small_event("small-w00", 0, rng)]}),
        "128x4": orjson.dumps({"logs": [_small_event("small-w00", s, rng) for s in range(128)]}),
        "128x128": orjson.dumps({"logs": [_full_event("full-w00", s, rng) for s in range(128)]}),
    }


def per_call_us(function: Callable[[bytes], Any], raw: bytes, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        function(raw)
    return (time.perf_counter() - start) / calls * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    print("machine:", ", ".join(f"{k} {v}" for k, v in machine().items()))
    print("serving:", ", ".join(f"{k} {v}" for k, v in served_code().items()))
    names = list(CANDIDATES)
    header = " | ".join(f"{name} µs" for name in names)
    print(f"| body | bytes | {header} | check's cost |")
    print("|---|--:|" + "--:|" * len(names) + "--:|")
    for label, raw in bodies().items():
        assert decode_json_body(raw) == orjson.loads(raw)
        calls = max(20, 2_000_000 // len(raw))
        times: dict[str, list[float]] = {name: [] for name in names}
        for round_ in range(args.rounds):
            for name in names if round_ % 2 == 0 else reversed(names):
                times[name].append(per_call_us(CANDIDATES[name], raw, calls))
        medians = {name: statistics.median(values) for name, values in times.items()}
        cells = " | ".join(f"{medians[name]:,.1f}" for name in names)
        cost = medians["decode_json_body"] - medians["orjson"]
        print(f"| {label} | {len(raw):,} | {cells} | +{cost:,.1f} µs |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
