"""The matched view's trials at scale: two rounds of 10,000 trials each (a baseline and a
compared run), then the time to serve a page of one transition's trials
(``GET /api/v1/evaluation/matched/trials``) and to open one trial's two 1,024-message
trajectories side by side (``GET …/matched/trials/<trial>``).

Outcomes are posted through the run protocol (an attempt's ingest token, 32 results a
request, 8 concurrent senders); the first 200 regressing trials of each side get a short
trajectory, and the measured trial a 1,024-message one on each side (tool calls and their
results, about 400 KiB), diverging halfway. Each read is timed over 30 requests after 3
warm-ups from a keep-alive client on the same machine; the figure is the median, with p95.
Targets: a page of trials ≤ 100 ms, the two trajectories ≤ 200 ms.

    python benchmarks/matched_trials.py                     # SQLite and PostgreSQL
    python benchmarks/matched_trials.py --engine sqlite --trials 2000
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from evaluation_reads import on_engines, timed, timing_row
from ingest_arena import Server, machine, served_code

#: Left and right statuses cycle with different periods, so every transition occurs.
LEFT = ("success", "success", "failure", "success", "unscored", "success", "failure")
RIGHT = ("failure", "success", "success", "success", "failure")
MEASURED = "t000000"
MESSAGES = 1_024
PAGE_TARGET_MS, PAIR_TARGET_MS = 100.0, 200.0


def statuses(side: int, trials: int) -> dict[str, str]:
    cycle = LEFT if side == 0 else RIGHT
    return {f"t{i:06d}": cycle[i % len(cycle)] for i in range(trials)}


def long_conversation(side: int) -> list[dict[str, Any]]:
    """1,024 messages: a question, then tool calls and results; the right's commands differ
    from the middle on, and one of its results is a traceback."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    for k in range((MESSAGES - 1) // 2):
        command = f"grep -rn pattern{k} src/" if side == 0 or k < 256 else f"sed -n {k}p f.py"
        messages.append(
            {
                "role": "assistant",
                "content": f"Looking at step {k}.",
                "tool_calls": [{"id": f"c{k}", "name": "bash", "arguments": {"cmd": command}}],
                "tokens": {"input": 1000 + k, "output": 40},
            }
        )
        output = "src/module.py:12: match " * 12
        if side == 1 and k == 300:
            output = "Traceback (most recent call last):\n  File 'f.py', line 3\nKeyError: 'x'"
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": output})
    messages.append({"role": "assistant", "content": "Done."})
    return messages[:MESSAGES]


def document(trial_id: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "scope": "evaluation",
        "round_id": "val",
        "trial_id": trial_id,
        "trial_attempt": 0,
        "messages": messages,
        "total_messages": len(messages),
        "complete": True,
        "capture_policy": "all",
    }


def short_texts(outcomes: dict[str, str], other: dict[str, str]) -> list[dict[str, Any]]:
    short = [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]
    regressing = [t for t, s in outcomes.items() if s == "success" and other[t] == "failure"]
    return [document(t, short) for t in regressing[:200] if t != MEASURED]


def send_all(base: str, token: str, route: str, key: str, batches: list[list[Any]]) -> None:
    local = threading.local()
    auth = {"Authorization": f"Bearer {token}"}

    def send(chunk: list[Any]) -> None:
        if not hasattr(local, "client"):
            local.client = httpx.Client(base_url=base, headers=auth, timeout=120)
        local.client.post(route, json={key: chunk}).raise_for_status()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(send, batches))


def load(base: str, api_key: str, trials: int) -> float:
    """Both rounds with their outcomes and trajectories; answers the seconds it took."""
    started = time.perf_counter()
    sides = [statuses(0, trials), statuses(1, trials)]
    headers = {"Authorization": f"Bearer {api_key}"}
    for side, run in enumerate(("base", "tuned")):
        with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
            client.post("/api/v1/projects/bench/runs", json={"run": run}).raise_for_status()
            token = client.post(f"/api/v1/projects/bench/runs/{run}/attempts").json()["token"]
        declaration = {
            "event_id": "population",
            "type": "population",
            "round_id": "val",
            "expected": trials,
            "text_samples": trials,
        }
        events = [
            {
                "event_id": f"r{trial}",
                "type": "trial",
                "round_id": "val",
                "trial_id": trial,
                "trial_attempt": 0,
                "status": status,
                "eligible": False,
            }
            for trial, status in sides[side].items()
        ]
        batches = [[declaration]] + [events[i : i + 32] for i in range(0, len(events), 32)]
        send_all(base, token, "/api/v1/ingest/observations", "events", batches)
        texts = short_texts(sides[side], sides[1 - side])
        batches = [texts[i : i + 16] for i in range(0, len(texts), 16)]
        batches.append([document(MEASURED, long_conversation(side))])
        send_all(base, token, "/api/v1/ingest/trajectories", "trajectories", batches)
    return time.perf_counter() - started


def check(client: httpx.Client, sides: dict[str, str]) -> None:
    """The answers are what was loaded: a full page, the long pair and its marks."""
    page = client.get(
        "/api/v1/evaluation/matched/trials",
        params={**sides, "transition": "success_to_failure", "limit": 100},
    ).json()
    assert len(page["trials"]) == 100, page
    assert page["trials"][0]["left"]["trajectory"] is not None
    pair = client.get(f"/api/v1/evaluation/matched/trials/{MEASURED}", params=sides).json()
    assert len(pair["left"]["messages"]) == MESSAGES, pair["left"]["trajectory"]
    assert len(pair["right"]["messages"]) == MESSAGES
    assert pair["first_divergence"] == 513, pair["first_divergence"]
    assert pair["right"]["first_failed_tool_call"]["message"] == 602


def measure(engine: str, store_args: list[str], trials: int, workdir: Path) -> list[str]:
    server = Server(store_args, workdir / f"{engine}.log", secret="not-used-here")  # noqa: S106
    try:
        data_dir = Path(store_args[store_args.index("--data-dir") + 1])
        key = (data_dir / "admin.key").read_text().strip()
        seconds = load(server.base, key, trials)
        sides = {"left": "bench/base/val", "right": "bench/tuned/val"}
        route = "/api/v1/evaluation/matched/trials"
        deep = f"t{trials * 9 // 10:06d}"
        with httpx.Client(
            base_url=server.base, timeout=60, headers={"Authorization": f"Bearer {key}"}
        ) as client:
            check(client, sides)
            pages = {
                "success → failure, first page of 100": ("success_to_failure", 100, None),
                "success → failure, page of 100 at 90%": ("success_to_failure", 100, deep),
                "failure → success, page of 200": ("failure_to_success", 200, None),
                "not scored → scored, page of 100": ("unscored_to_scored", 100, None),
            }
            reads = {
                name: timed(client, route, {**sides, "transition": t, "limit": n, **after})
                for name, (t, n, a) in pages.items()
                for after in [{"after": a} if a else {}]
            }
            pair = timed(client, f"{route}/{MEASURED}", sides)
            # How busy the machine is: a read of a handful of rows (a few ms when it is quiet).
            reference = timed(client, "/api/v1/projects/bench/runs/base/evaluation", {})
    finally:
        server.stop()
    rows = [f"| {engine} | load 2 x {trials:,} outcomes + trajectories | {seconds:.1f} s | | |"]
    rows += [timing_row(engine, name, figures, PAGE_TARGET_MS) for name, figures in reads.items()]
    rows.append(timing_row(engine, "two 1,024-message trajectories", pair, PAIR_TARGET_MS))
    rows.append(timing_row(engine, "reference: one round's counts", reference, PAGE_TARGET_MS))
    print("\n".join(rows), flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    print("machine: " + ", ".join(f"{k} {v}" for k, v in machine().items()))
    print("serving: " + ", ".join(f"{k} {v}" for k, v in served_code().items()))
    # Each engine's rows are printed as it finishes (measure()), under this header.
    print("| engine | read | median | p95 | target met |\n|---|---|--:|--:|---|", flush=True)
    on_engines(args.engine, args.pg_url, lambda *a: measure(*a[:2], args.trials, a[2]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
