"""Real Inspect AI logs, written by running small Inspect tasks with Inspect's own mock model
(``mockllm/model``: no network, no provider) in a process of their own.

``python3 -m tests.importers.inspect_logs OUT`` writes:

- ``OUT/eval/*.eval`` and ``OUT/json/*.json``: the task ``arith`` (2 epochs), in each format:
  ``add-1`` and ``7`` answer right (``C``), ``add-2`` wrong (``I``), and ``boom``'s solver
  raises every time (one retry, then the error);
- ``OUT/graded/*.eval``: the task ``graded``, one sample per score value of ``GRADED``.

The mock model adds with a tool: it calls ``add(x, y)`` with the numbers of the question,
then answers what the tool returned.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

#: The ``graded`` task's samples and the score each gets (``value-<i>``).
GRADED: Final[list[Any]] = [1, 0, 0.5, "P", True, "I", "C", 2, "correct", "N"]
ARITH: Final = [
    ("add-1", "1+2?", "3"),
    ("add-2", "2+2?", "5"),
    ("boom", "3+3?", "6"),
    (7, "3+4?", "7"),
]


def write_logs(out: Path) -> None:
    """Run the tasks in a process of their own (Inspect sets up logging and signal
    handlers of its own) and wait for it."""
    env = {**os.environ, "XDG_DATA_HOME": str(out / "data"), "XDG_CACHE_HOME": str(out / "cache")}
    subprocess.run(
        [sys.executable, "-m", "tests.importers.inspect_logs", str(out)],
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )


def _main(out: Path) -> None:
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import Score, match, mean, scorer
    from inspect_ai.solver import generate, solver, system_message, use_tools
    from inspect_ai.tool import tool

    @tool
    def add() -> Any:
        async def execute(x: int, y: int) -> int:
            """Add two numbers.

            Args:
                x: The first number.
                y: The second number.
            """
            return x + y

        return execute

    @solver
    def sandbox_check() -> Any:
        async def solve(state: Any, generate: Any) -> Any:
            if state.sample_id == "boom":
                raise RuntimeError("the sandbox went away")
            return state

        return solve

    @scorer(metrics=[mean()])
    def graded() -> Any:
        async def score(state: Any, target: Any) -> Any:
            return Score(value=GRADED[state.metadata["index"]], answer=state.output.completion)

        return score

    @scorer(metrics=[mean()])
    def length() -> Any:
        async def score(state: Any, target: Any) -> Any:
            return Score(value=len(state.output.completion))

        return score

    def reply(messages: Any, tools: Any, tool_choice: Any, config: Any) -> Any:
        last = messages[-1]
        if last.role == "tool":
            output = ModelOutput.from_content("mockllm/model", last.text)
        else:
            x, y = (int(n) for n in re.findall(r"\d+", last.text)[:2])
            output = ModelOutput.for_tool_call("mockllm/model", "add", {"x": x, "y": y})
        # Usage given, so the mock model counts no tokens (that would fetch an encoding).
        output.usage = ModelUsage(input_tokens=20, output_tokens=5, total_tokens=25)
        return output

    model = get_model("mockllm/model", custom_outputs=reply)
    arith = Task(
        name="arith",
        version=2,
        dataset=[Sample(id=i, input=q, target=t) for i, q, t in ARITH],
        solver=[system_message("You add numbers."), sandbox_check(), use_tools(add()), generate()],
        scorer=[match(), length()],
    )
    options: dict[str, Any] = {"display": "none", "fail_on_error": False}
    for kind in ("eval", "json"):
        eval(arith, model=model, epochs=2, retry_on_error=1, log_dir=str(out / kind),
             log_format=kind, **options)  # fmt: skip
    samples = [
        Sample(id=f"value-{i}", input=f"{i}+1?", target="x", metadata={"index": i})
        for i in range(len(GRADED))
    ]
    task = Task(name="graded", dataset=samples, solver=[use_tools(add()), generate()],
                scorer=graded())  # fmt: skip
    eval(task, model=model, log_dir=str(out / "graded"), log_format="eval", **options)


if __name__ == "__main__":
    _main(Path(sys.argv[1]))
