"""A stand-in for a NeMo-RL GRPO training, run by the follower's tests under ``tuneplane
run``: like NeMo-RL it makes ``LOG_DIR/exp_NNN`` and writes ``train_data_step{N}.jsonl``
(and ``val_data_step{N}.jsonl`` at step 2) one step after another, with the writer of
``tests/importers/nemo_rl_logs.py``; then it prints how long its steps took and exits
with ``EXIT_CODE``.

    python nemo_rl_training.py LOG_DIR STEPS SECONDS_PER_STEP EXIT_CODE
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.importers.nemo_rl_logs import write_train_step, write_val_step

ROLLOUTS_PER_STEP = 40


def rewards(step: int) -> list[float]:
    return [
        float((i + step) % 4 == 0) if i % 10 else float("nan") for i in range(ROLLOUTS_PER_STEP)
    ]


def main() -> int:
    log_dir, steps, seconds, code = (
        Path(sys.argv[1]),
        int(sys.argv[2]),
        float(sys.argv[3]),
        int(sys.argv[4]),
    )
    experiment = log_dir / f"exp_{len(list(log_dir.glob('exp_*'))) + 1:03d}"
    experiment.mkdir(parents=True)
    started = time.monotonic()
    for step in range(1, steps + 1):
        time.sleep(seconds)  # the step's work
        if step == 2:
            write_val_step(experiment, step, [1.0, 0.0, float("nan")])
        write_train_step(experiment, step, rewards(step))
        print(f"step {step} done", flush=True)
    print(f"training took {time.monotonic() - started:.3f}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
