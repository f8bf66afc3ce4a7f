"""A training script that logs with the real Trackio client (run in its own venv, so it
imports nothing of ours). Argument: a JSON object::

    {"project": "p", "name": "r", "config": {...}, "resume": "never", "group": "g", "steps": 5,
     "system": true, "alert": true, "nan_at": 2, "nan": "nan"}

(``nan_at``: the step offset whose loss is ``float(nan)``, "nan", "inf" or "-inf".)

``TRACKIO_SERVER_URL`` and ``TRACKIO_WRITE_TOKEN`` say where to, as a user sets them. Prints
the run's next step as JSON at the end."""

import json
import sys

import trackio

job = json.loads(sys.argv[1])
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
for offset in range(job.get("steps", 0)):
    loss = float(job["nan"]) if offset == job.get("nan_at") else 1.0 / (first + offset + 1)
    trackio.log({"loss": loss, "nested": {"acc": 0.5}, "note": "text"})
if job.get("system"):
    trackio.log_system({"cpu": {"utilization": 12.5}, "memory_gb": 3.0})
if job.get("alert"):
    trackio.alert("loss spiked", text="at the last step", level=trackio.AlertLevel.ERROR)
trackio.finish()
print(json.dumps({"first_step": first}))
