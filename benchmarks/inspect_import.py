"""What ``tuneplane import inspect`` costs on a large log: seconds and peak memory.

A real log is written first by Inspect's mock model (tests/importers/inspect_logs.py), then
grown to ``--samples`` samples (its samples copied under new IDs, the planned sample IDs
with them) and written as ``.json`` and as ``.eval`` with Inspect's own writer. Each is
imported in a process of its own, which reports the seconds ``import_inspect`` took
(imports aside), its peak resident memory (``ru_maxrss``) and the trials and trajectories
of the snapshot. Run from the root of the checkout::

    python benchmarks/inspect_import.py --samples 5000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

_GROW = """
import sys
from inspect_ai.log import read_eval_log, write_eval_log
log = read_eval_log(sys.argv[1])
count = int(sys.argv[3])
ones = [s for s in log.samples if s.error is None and s.epoch == 1]
samples = []
for i in range(count):
    sample = ones[i % len(ones)].model_copy(deep=True)
    sample.id, sample.epoch = f"s{i}", 1
    samples.append(sample)
log.samples = samples
log.eval.dataset.sample_ids = [s.id for s in samples]
log.eval.dataset.samples = count
log.eval.config.epochs = 1
for kind in ("json", "eval"):
    write_eval_log(log, f"{sys.argv[2]}/2026-01-01T00-00-00-00-00_arith_big.{kind}", format=kind)
"""

_CHILD = """
import json, resource, sys, time
from tuneplane.importers.inspect_eval import import_inspect
started = time.perf_counter()
imported = import_inspect(sys.argv[1])
seconds = time.perf_counter() - started
(snapshot,) = imported.snapshots.values()
print(json.dumps({"seconds": round(seconds, 2),
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                  "trials": len(snapshot.trials),
                  "trajectories": len(snapshot.trajectories)}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=5000)
    args = parser.parse_args()
    sys.path.insert(0, str(Path.cwd()))
    from tests.importers.inspect_logs import write_logs

    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        write_logs(root / "mock")
        (small,) = (root / "mock" / "eval").glob("*.eval")
        (root / "big").mkdir()
        subprocess.run(
            [sys.executable, "-c", _GROW, str(small), str(root / "big"), str(args.samples)],
            check=True,
        )
        for log in sorted((root / "big").iterdir()):
            done = subprocess.run(
                [sys.executable, "-c", _CHILD, str(log)],
                capture_output=True,
                text=True,
                check=True,
            )
            result = json.loads(done.stdout)
            print(json.dumps({"log": log.suffix, "bytes": log.stat().st_size, **result}))


if __name__ == "__main__":
    main()
