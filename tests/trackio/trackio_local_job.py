"""Training scripts that log with the real Trackio client in local mode (no server URL:
Trackio writes its own SQLite files under ``TRACKIO_DIR``). Run in the Trackio venv, so it
imports nothing of ours. Argument: a JSON list of runs, logged one after another::

    [{"project": "p", "name": "r", "config": {...}, "resume": "never", "steps": 5,
      "system": 2, "alerts": 1, "sleep": 0.0}]

Step ``i`` of a run (counted from where it resumes) logs ``values(i)`` of
``tests.trackio.local_data``, which the tests read to know what to expect."""

import json
import sys
import time

import trackio


def values(step):
    # The same arithmetic as tests/trackio/local_data.py (this script cannot import it).
    bad = {2: float("nan"), 3: float("inf"), 4: float("-inf")}.get(step % 10, float(step))
    return {"loss": 1.0 / (step + 1), "nested": {"acc": step / 100}, "bad": bad, "note": "x"}


for job in json.loads(sys.argv[1]):
    run = trackio.init(
        project=job["project"],
        name=job["name"],
        config=job.get("config"),
        resume=job.get("resume", "never"),
        group=job.get("group"),
        auto_log_cpu=False,
        auto_log_gpu=False,
    )
    first = run._next_step
    for step in range(first, first + job.get("steps", 0)):
        trackio.log(values(step))
        if job.get("sleep"):
            time.sleep(job["sleep"])
    for sample in range(job.get("system", 0)):
        trackio.log_system({"gpu": {"util": float(sample)}, "memory_gb": 2.0})
    for number in range(job.get("alerts", 0)):
        level = trackio.AlertLevel.ERROR if number % 2 else trackio.AlertLevel.WARN
        trackio.alert(f"alert {number}", text=f"text {number}", level=level)
    trackio.finish()
