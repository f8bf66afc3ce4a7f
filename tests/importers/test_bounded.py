"""Every kind of file an import reads is read up to its limit and no further: a sparse
1 GiB file, and one a byte over the limit, are refused naming the file and the limit; a
valid file of exactly the limit is read. The real fixtures are the valid bases."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.coordinator.cohort import write_plan as write_eval_plan
from tests.importers.cohort import TWIN_COHORT, TWIN_TASK, TWIN_TRIAL, plan, write_plan
from tests.importers.lm_eval_runs import TWIN_RUN, TWIN_STAMP
from tests.importers.nemo_rl_logs import write_train_step
from tuneplane.contract import limits
from tuneplane.coordinator.plan import load_eval_plan
from tuneplane.importers.atif import read_conversation
from tuneplane.importers.bounded import describe
from tuneplane.importers.harbor import read_attempt
from tuneplane.importers.harbor_import import import_harbor
from tuneplane.importers.lm_eval_files import read_run
from tuneplane.importers.nemo_rl import read_step
from tuneplane.importers.nemo_rl_files import step_file
from tuneplane.importers.plan import load_plan
from tuneplane.importers.problems import ImportRefused, Problem
from tuneplane.importers.rollout_snapshot import read_all
from tuneplane.importers.snapshot import Snapshot, write_snapshot

GIB = 1 << 30


def _refusals(read: Callable[[], object]) -> list[Problem]:
    try:
        read()
    except ImportRefused as refused:
        return refused.problems
    return []


def _trial(tmp: Path) -> Path:
    return Path(shutil.copytree(TWIN_COHORT / TWIN_TRIAL, tmp / "trial"))


def _attempt(tmp: Path) -> list[Problem]:
    return read_attempt(tmp / "trial", TWIN_TASK, "trials[0]")[1]


def _reward_json(tmp: Path) -> Path:
    trial = _trial(tmp)
    (trial / "verifier" / "reward.txt").unlink()
    (trial / "verifier" / "reward.json").write_text('{"reward": 0}\n')
    return trial / "verifier" / "reward.json"


def _lm_eval(tmp: Path, name: str) -> Path:
    run = tmp / "lmeh"
    run.mkdir()
    for file in (f"results_{TWIN_STAMP}.json", f"samples_arithmetic_2dm_{TWIN_STAMP}.jsonl"):
        shutil.copyfile(TWIN_RUN / file, run / file)
    return run / name.format(TWIN_STAMP)


def _snapshot(tmp: Path) -> Path:
    attempt = {"retry": 0, "directory": TWIN_TRIAL}
    plan_file = write_plan(tmp, plan([{"task": TWIN_TASK, "repeat": 0, "attempts": [attempt]}]))
    write_snapshot(import_harbor(plan_file, str(TWIN_COHORT)), str(tmp / "snapshot.json"))
    return tmp / "snapshot.json"


def _step(path: Path) -> Snapshot:
    found = step_file(str(path))
    assert found is not None
    return read_step(found)


def _rollouts(tmp: Path) -> Path:
    rollouts = _step(write_train_step(tmp, 3, [1.0, 0.0]))
    assert rollouts.is_rollouts
    write_snapshot(rollouts, str(tmp / "rollouts.json"))
    return tmp / "rollouts.json"


@dataclass(frozen=True)
class Kind:
    """A kind of file: a valid one written beneath a test's directory (returned), how an
    import reads it (its problems), its limit, and whether the limit is per line."""

    name: str
    limit: int
    write: Callable[[Path], Path]
    read: Callable[[Path], list[Problem]]
    per_line: bool = False


KINDS = [
    Kind(
        "reward.txt",
        limits.IMPORT_REWARD_MAX_BYTES,
        lambda tmp: _trial(tmp) / "verifier" / "reward.txt",
        _attempt,
    ),
    Kind("reward.json", limits.IMPORT_REWARD_MAX_BYTES, _reward_json, _attempt),
    Kind(
        "result.json",
        limits.IMPORT_TRIAL_RESULT_MAX_BYTES,
        lambda tmp: _trial(tmp) / "result.json",
        _attempt,
    ),
    Kind(
        "trajectory.json",
        limits.IMPORT_ATIF_MAX_BYTES,
        lambda tmp: _trial(tmp) / "agent" / "trajectory.json",
        lambda tmp: read_conversation(tmp / "trial")[1],
    ),
    Kind(
        "lm-eval results",
        limits.IMPORT_LM_EVAL_RESULTS_MAX_BYTES,
        lambda tmp: _lm_eval(tmp, "results_{}.json"),
        lambda tmp: _refusals(lambda: read_run(str(tmp / "lmeh"))),
    ),
    Kind(
        "lm-eval samples",
        limits.IMPORT_LM_EVAL_SAMPLE_LINE_MAX_BYTES,
        lambda tmp: _lm_eval(tmp, "samples_arithmetic_2dm_{}.jsonl"),
        lambda tmp: _refusals(lambda: read_run(str(tmp / "lmeh"))),
        per_line=True,
    ),
    Kind(
        "NeMo-RL step file",
        limits.IMPORT_NEMO_RL_LINE_MAX_BYTES,
        lambda tmp: write_train_step(tmp, 1, [1.0, 0.0, 1.0, 0.0]),
        lambda tmp: _refusals(lambda: _step(tmp / "train_data_step1.jsonl")),
        per_line=True,
    ),
    Kind(
        "import plan",
        limits.IMPORT_PLAN_MAX_BYTES,
        lambda tmp: Path(write_plan(tmp, plan([{"task": "t", "repeat": 0, "attempts": []}]))),
        lambda tmp: _refusals(lambda: load_plan(str(tmp / "import-plan.json"))),
    ),
    Kind(
        "evaluation plan",
        limits.IMPORT_PLAN_MAX_BYTES,
        lambda tmp: write_eval_plan(tmp, ["hello-a"]),
        lambda tmp: _refusals(lambda: load_eval_plan(str(tmp / "plan.json"))),
    ),
    Kind(
        "task.toml",
        limits.IMPORT_TASK_CONFIG_MAX_BYTES,
        lambda tmp: write_eval_plan(tmp, ["hello-a"]).parent / "tasks" / "hello-a" / "task.toml",
        lambda tmp: _refusals(lambda: load_eval_plan(str(tmp / "plan.json"))),
    ),
    Kind(
        "snapshot",
        limits.IMPORT_SNAPSHOT_MAX_BYTES,
        _snapshot,
        lambda tmp: _refusals(lambda: read_all([str(tmp / "snapshot.json")])),
    ),
    Kind(
        "rollout snapshot",
        limits.IMPORT_SNAPSHOT_MAX_BYTES,
        _rollouts,
        lambda tmp: _refusals(lambda: read_all([str(tmp / "rollouts.json")])),
    ),
]


def _grow(file: Path, kind: Kind, size: int) -> None:
    """``file`` still valid but of ``size`` bytes (its first line, for a per-line limit):
    blanks where its format allows them, after the document or before the line's end."""
    data = file.read_bytes()
    if kind.per_line:
        first, rest = data.split(b"\n", 1)
        data = first + b" " * (size - len(first)) + b"\n" + rest
    else:
        data += b" " * (size - len(data))
    file.write_bytes(data)


def _names_the_file_and_limit(problems: list[Problem], file: Path, kind: Kind) -> None:
    text = "\n".join(map(str, problems))
    assert str(file) in text, text
    assert describe(kind.limit) in text, text
    assert len(problems) == 1, text
    if kind.per_line:
        assert problems[0].field.startswith("line "), text


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_a_sparse_gigabyte_file_is_refused_naming_it_and_its_limit(
    tmp_path: Path, kind: Kind
) -> None:
    file = kind.write(tmp_path)
    with open(file, "r+b") as handle:  # a valid beginning, then a gigabyte of holes
        handle.truncate(GIB)
    _names_the_file_and_limit(kind.read(tmp_path), file, kind)


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_a_byte_over_the_limit_is_refused_and_the_limit_itself_is_read(
    tmp_path: Path, kind: Kind
) -> None:
    file = kind.write(tmp_path)
    assert kind.read(tmp_path) == []
    _grow(file, kind, kind.limit)
    assert kind.read(tmp_path) == []
    _grow(file, kind, kind.limit + 1)
    _names_the_file_and_limit(kind.read(tmp_path), file, kind)


@pytest.mark.parametrize(("extra", "refused"), [(0, False), (1, True), (1 << 20, True)])
def test_a_plan_from_a_pipe_is_read_up_to_its_limit(
    tmp_path: Path, extra: int, refused: bool
) -> None:
    # `--plan <(...)`: a pipe has no size to check, so only reading past the limit stops it.
    limit = limits.IMPORT_PLAN_MAX_BYTES
    text = json.dumps(plan([{"task": "t", "repeat": 0, "attempts": []}])).encode()
    pipe = tmp_path / "plan.fifo"
    os.mkfifo(pipe)

    def write() -> None:
        try:
            with open(pipe, "wb") as handle:
                handle.write(text + b" " * (limit + extra - len(text)))
        except BrokenPipeError:
            pass  # the reader stopped one byte past the limit

    writer = threading.Thread(target=write)
    writer.start()
    problems = _refusals(lambda: load_plan(str(pipe)))
    writer.join()
    assert bool(problems) == refused
    if refused:
        rule = "holds more: an import plan is read up to 16 MiB; it was not read"
        assert str(problems[0]) == f"{pipe}: {rule}"


def test_a_gigabyte_import_stays_within_constant_memory(tmp_path: Path) -> None:
    """``tuneplane import harbor`` over a trial whose reward.txt, result.json and
    trajectory.json are each a sparse gigabyte refuses all three with little memory (the
    whole files were read before: 9 GiB for the reward, 2 GiB for the others)."""
    trial = _trial(tmp_path)
    for name in ("verifier/reward.txt", "result.json", "agent/trajectory.json"):
        with open(trial / name, "r+b") as handle:
            handle.truncate(GIB)
    attempt = {"retry": 0, "directory": "trial"}
    plan_file = write_plan(
        tmp_path, plan([{"task": TWIN_TASK, "repeat": 0, "attempts": [attempt]}])
    )
    command = [
        sys.executable,
        "-m",
        "tuneplane.cli",
        "import",
        "harbor",
        "--plan",
        plan_file,
        "--root",
        str(tmp_path),
        "--out",
        str(tmp_path / "snapshot.json"),
        "--trace-limit",
        "1",
    ]
    # A parent of its own, so the peak is this import's alone (no other child of the
    # tests counts); the address space is capped so that reading whole files fails fast
    # rather than taking the machine's memory.
    measure = (
        "import resource, subprocess, sys\n"
        "def cap():\n"
        "    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True, preexec_fn=cap)\n"
        "sys.stderr.write(done.stderr)\n"
        "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", measure, *command], capture_output=True, text=True, check=True
    )
    returncode, peak_kib = map(int, done.stdout.split())
    assert returncode == 2, done.stderr
    for name, limit in (
        ("verifier/reward.txt", "4 KiB"),
        ("result.json", "32 MiB"),
        ("agent/trajectory.json", "32 MiB"),
    ):
        said = [line for line in done.stderr.splitlines() if f"{trial / name}:" in line]
        assert len(said) == 1, done.stderr
        assert f"read up to {limit}" in said[0]
    assert peak_kib < 200 * 1024, f"peak {peak_kib // 1024} MiB"
