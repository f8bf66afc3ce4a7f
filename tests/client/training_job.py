"""A small training job for the runner tests, run as ``python training_job.py STEPS CODE
[wait | gate=PATH]``: reports three metrics per step (a NaN now and then), prints to both
streams (invalid UTF-8, an overlong line, a last line without a newline), exits with CODE.

``wait`` prints "ready" and sleeps (for signal tests); ``gate=PATH`` waits for PATH to exist
before training (for tests that change the world first)."""

import math
import os
import sys
import time

import tuneplane


def expected_stdout(steps: int) -> list[bytes]:
    lines = [f"step {step} loss {1.0 / (step + 1):.4f}".encode() for step in range(steps)]
    return [*lines, b"bytes \xff\xfe end", b"x" * 20_000, b"done"]


def expected_stderr(steps: int) -> list[bytes]:
    return [f"warn {step}".encode() for step in range(0, steps, 10)]


def metrics(step: int, steps: int) -> dict[str, float]:
    reward = math.nan if step % 50 == 7 else step * 0.5
    return {"train/loss": 1.0 / (step + 1), "train/reward": reward, "eval/acc": step / steps}


def main() -> None:
    steps, code = int(sys.argv[1]), int(sys.argv[2])
    mode = sys.argv[3] if len(sys.argv) > 3 else ""
    if mode == "wait":
        print("ready", flush=True)
        time.sleep(60)
    if mode.startswith("gate="):
        deadline = time.monotonic() + 60  # a failed test must not leave us waiting for ever
        while not os.path.exists(mode.removeprefix("gate=")) and time.monotonic() < deadline:
            time.sleep(0.02)
    for step in range(steps):
        tuneplane.report(metrics(step, steps), step=step)
        print(f"step {step} loss {1.0 / (step + 1):.4f}")
        if step % 10 == 0:
            print(f"warn {step}", file=sys.stderr)
    sys.stdout.flush()
    sys.stdout.buffer.write(b"bytes \xff\xfe end\n")
    sys.stdout.buffer.flush()
    print("x" * 20_000)
    print("done", end="")
    sys.exit(code)


if __name__ == "__main__":
    main()
