"""What refusing a huge file costs an import: each kind of file an importer reads, made a
sparse gigabyte after a valid beginning, read by its importer in a process of its own.

For each kind the child process reports the seconds its importer took (imports aside)
and its peak resident memory (``ru_maxrss``), and what the importer said: refused, with
the start of the problem, or accepted. The targets are at most 1 s and 100 MiB each.

The valid beginnings are the real files in ``shared/fixtures`` (Harbor's trial directory,
its ATIF trajectory, lm-eval's run), copied into a temporary directory first; NeMo-RL's
step file is written as its writer writes one. Run from the root of the checkout to
measure (the child imports ``tuneplane`` from the current directory, so an older checkout
can be measured with this script)::

    python benchmarks/importer_bounds.py
    python benchmarks/importer_bounds.py --kinds reward.txt,result.json --memory-cap-gib 12
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

GIB = 1 << 30
FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
ETL = "etl_checkpoint_resume_bug/example_runs/run_2025-11-19__14-39-23"
TRIAL = FIXTURES / "harbor" / "xdotli-harbor-datagen" / ETL
LMEH = FIXTURES / "lm-eval" / "containers-olot" / "tests" / "data" / "lmeh"
STAMP = "2025-04-30T18-24-41.082644"
TASK = "etl_checkpoint_resume_bug"

#: What the child runs: ``problems`` is the list of what the importer refused.
_CHILD = """
import json, resource, sys, time
from pathlib import Path
from tuneplane.importers.problems import ImportRefused
{imports}
def refused(call):
    try:
        call()
    except ImportRefused as exc:
        return exc.problems
    return []
work = Path(sys.argv[1])
start = time.perf_counter()
problems = {expression}
seconds = time.perf_counter() - start
said = "accepted"
if problems:
    said = "refused: " + (problems[0].field + ": " if problems[0].field else "")
    said += problems[0].rule[:72]
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({{"seconds": seconds, "peak_mib": peak, "said": said}}))
"""


def _trial(work: Path) -> Path:
    return Path(shutil.copytree(TRIAL, work / "trial"))


def _reward_json(work: Path) -> Path:
    trial = _trial(work)
    (trial / "verifier" / "reward.txt").unlink()
    (trial / "verifier" / "reward.json").write_text('{"reward": 0}\n')
    return trial / "verifier" / "reward.json"


def _lm_eval(work: Path, name: str) -> Path:
    (work / "lmeh").mkdir()
    for file in (f"results_{STAMP}.json", f"samples_gsm8k_{STAMP}.jsonl"):
        shutil.copyfile(LMEH / file, work / "lmeh" / file)
    return work / "lmeh" / name


def _nemo_rl(work: Path) -> Path:
    # One sample as NeMo-RL's log_batched_dict_as_jsonl writes it: every value a 1-list.
    line = {"content": [["What is 1 + 1?", "It is 2."]], "rewards": [1.0], "idx": 0}
    path = work / "train_data_step1.jsonl"
    path.write_text(json.dumps(line) + "\n")
    return path


def _plan(work: Path) -> Path:
    digests = {name: "1" * 64 for name in ("dataset", "verifier", "runtime", "harness")}
    plan = {
        "round": "val",
        "checkpoint": {"name": "org/model@1"},
        "digests": digests,
        "trials": [{"task": TASK, "repeat": 0, "attempts": [{"retry": 0, "directory": "trial"}]}],
    }
    path = work / "import-plan.json"
    path.write_text(json.dumps(plan))
    return path


def _snapshot(work: Path) -> Path:
    path = work / "snapshot.json"
    path.write_text('{"format": "tuneplane-import-snapshot", "version": 1}')
    return path


#: kind -> (what writes its valid file, returning the file to grow; imports; expression)
KINDS: dict[str, tuple[Callable[[Path], Path], str, str]] = {
    "reward.txt": (
        lambda work: _trial(work) / "verifier" / "reward.txt",
        "from tuneplane.importers.harbor import read_attempt",
        f"read_attempt(work / 'trial', {TASK!r}, 'trials[0]')[1]",
    ),
    "reward.json": (
        _reward_json,
        "from tuneplane.importers.harbor import read_attempt",
        f"read_attempt(work / 'trial', {TASK!r}, 'trials[0]')[1]",
    ),
    "result.json": (
        lambda work: _trial(work) / "result.json",
        "from tuneplane.importers.harbor import read_attempt",
        f"read_attempt(work / 'trial', {TASK!r}, 'trials[0]')[1]",
    ),
    "trajectory.json": (
        lambda work: _trial(work) / "agent" / "trajectory.json",
        "from tuneplane.importers.atif import read_conversation",
        "read_conversation(work / 'trial')[1]",
    ),
    "lm-eval results": (
        lambda work: _lm_eval(work, f"results_{STAMP}.json"),
        "from tuneplane.importers.lm_eval_files import read_run",
        "refused(lambda: read_run(str(work / 'lmeh')))",
    ),
    "lm-eval samples": (
        lambda work: _lm_eval(work, f"samples_gsm8k_{STAMP}.jsonl"),
        "from tuneplane.importers.lm_eval_files import read_run",
        "refused(lambda: read_run(str(work / 'lmeh')))",
    ),
    "NeMo-RL step file": (
        _nemo_rl,
        "from tuneplane.importers.nemo_rl import import_nemo_rl",
        "refused(lambda: import_nemo_rl(str(work)))",
    ),
    "import plan": (
        _plan,
        "from tuneplane.importers.plan import load_plan",
        "refused(lambda: load_plan(str(work / 'import-plan.json')))",
    ),
    "snapshot": (
        _snapshot,
        "from tuneplane.importers.snapshot import read_snapshot",
        "refused(lambda: read_snapshot(str(work / 'snapshot.json')))",
    ),
}


def measure(kind: str, cap_gib: float | None) -> dict[str, object]:
    write, imports, expression = KINDS[kind]
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        with open(write(work), "r+b") as handle:
            handle.truncate(GIB)

        def cap() -> None:
            if cap_gib is not None:
                limit = int(cap_gib * GIB)
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        code = _CHILD.format(imports=imports, expression=expression)
        done = subprocess.run(
            [sys.executable, "-c", code, str(work)], capture_output=True, text=True, preexec_fn=cap
        )
    if done.returncode != 0:
        last = done.stderr.strip().splitlines()[-1:] or ["?"]
        return {"kind": kind, "seconds": None, "peak_mib": None, "said": f"failed: {last[0]}"}
    return {"kind": kind, **json.loads(done.stdout)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated kinds")
    parser.add_argument(
        "--memory-cap-gib", type=float, help="address space of each child (for old code)"
    )
    options = parser.parse_args()
    print("| kind | seconds | peak MiB | what the importer said |")
    print("|---|---:|---:|---|")
    for kind in options.kinds.split(","):
        row = measure(kind, options.memory_cap_gib)
        seconds = "—" if row["seconds"] is None else f"{row['seconds']:.3f}"
        peak = "—" if row["peak_mib"] is None else f"{row['peak_mib']:.0f}"
        print(f"| {kind} | {seconds} | {peak} | {row['said']} |", flush=True)


if __name__ == "__main__":
    main()
