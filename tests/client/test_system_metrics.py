"""System metrics in real training processes against a real server: CPU and memory from
``init()`` and under ``tuneplane run``, one point per step reached, off by the setting, and
GPU series read through NVML (the GPU is the world outside: a stand-in ``pynvml`` module
answers as the driver would, with one query a device does not support)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

from tests.client.runs import PROJECT, Server, runner_env
from tuneplane.client.settings import SYSTEM_METRICS_DEFAULT, job_settings
from tuneplane.client.system_metrics import open_sampler

SAMPLED = "TUNEPLANE_SYSTEM_METRICS_SECONDS"
MACHINE = {
    "system/cpu_percent",
    "system/memory_percent",
    "system/memory_used_gb",
    "system/process_cpu_percent",
    "system/process_memory_gb",
}
PERCENTS = {"system/cpu_percent", "system/memory_percent", "system/process_cpu_percent"}

#: Two GPUs as NVML describes them; the second does not report its power draw.
FAKE_NVML = """
class NVMLError(Exception):
    pass

class _Rates:
    def __init__(self, gpu):
        self.gpu = gpu

class _Memory:
    def __init__(self, used, total):
        self.used, self.total = used, total

def nvmlInit():
    pass

def nvmlDeviceGetCount():
    return 2

def nvmlDeviceGetHandleByIndex(index):
    return index

def nvmlDeviceGetUtilizationRates(handle):
    return _Rates(87 if handle == 0 else 12)

def nvmlDeviceGetMemoryInfo(handle):
    return _Memory(used=20 * 10**9, total=80 * 10**9)

def nvmlDeviceGetTemperature(handle, sensor):
    assert sensor == 0  # NVML_TEMPERATURE_GPU
    return 64

def nvmlDeviceGetPowerUsage(handle):
    if handle == 1:
        raise NVMLError("Not Supported")
    return 312500  # milliwatts
"""


def fresh() -> str:
    return f"sys-{uuid.uuid4().hex[:10]}"


def training(server: Server, run: str, steps: int, pause: float, **env: str) -> None:
    """A script that reports ``steps`` steps through ``init()``, ``pause`` seconds apart."""
    code = f"""
        import time, tuneplane
        with tuneplane.init(project="{PROJECT}", name="{run}"):
            for step in range({steps}):
                tuneplane.log({{"train/loss": 1.0 / (step + 1)}})
                time.sleep({pause})
        """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=runner_env(TUNEPLANE_URL=server.base, TUNEPLANE_API_KEY=server.key, **env),
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr


def summaries(server: Server, run: str) -> dict[str, dict[str, object]]:
    metrics = server.get(f"/api/v1/projects/{PROJECT}/runs/{run}/metrics")
    return {m["metric"]: m for m in metrics}


def points(server: Server, run: str, metric: str) -> list[tuple[int, float]]:
    page = server.get(f"/api/v1/projects/{PROJECT}/runs/{run}/points/{metric}", limit=10_000)
    return [(p["step"], p["value"]) for p in page["points"]]


def test_init_samples_cpu_and_memory_at_the_steps_reached(server: Server) -> None:
    run = fresh()
    training(server, run, steps=30, pause=0.05, **{SAMPLED: "0.2"})
    found = summaries(server, run)
    assert set(found) >= MACHINE, sorted(found)
    assert not any(name.startswith("system/gpu") for name in found)  # no GPU here
    for name in MACHINE:
        series = points(server, run, name)
        steps = [step for step, _ in series]
        assert len(series) >= 2, (name, series)
        assert steps == sorted(set(steps)), (name, steps)
        assert steps[0] >= 0, (name, steps)
        assert steps[-1] <= 29, (name, steps)
        for _, value in series:
            assert value >= 0, (name, value)
            assert name not in PERCENTS or value <= 100 * 64, (name, value)
        assert not found[name]["corrected"], name  # a sample never replaces another
    assert all(value > 0 for _, value in points(server, run, "system/process_memory_gb"))
    assert [step for step, _ in points(server, run, "train/loss")] == list(range(30))


def test_a_step_longer_than_the_interval_keeps_one_sample(server: Server) -> None:
    run = fresh()
    # 1.5 s a step, samples every 0.1 s: at most one point per step, never a correction.
    training(server, run, steps=3, pause=1.5, **{SAMPLED: "0.1"})
    series = points(server, run, "system/memory_percent")
    steps = [step for step, _ in series]
    assert 2 <= len(steps) <= 3, steps
    assert steps == sorted(set(steps)), steps
    assert not summaries(server, run)["system/memory_percent"]["corrected"]


def test_the_setting_at_zero_samples_nothing(server: Server) -> None:
    # The default (10 s) would not sample a run this short either: the setting is read
    # as 0, and 0 opens no sampler, is checked on its own.
    job = {
        "TUNEPLANE_JOB_ENDPOINT": server.base,
        "TUNEPLANE_JOB_RUN_ID": f"{PROJECT}/any",
        "TUNEPLANE_JOB_TOKEN": "tpi_unused",
    }
    assert job_settings({**job, SAMPLED: "0"}).system_interval == 0
    assert job_settings(job).system_interval == SYSTEM_METRICS_DEFAULT
    assert job_settings({**job, SAMPLED: "0.5", "RANK": "1"}).system_interval == 0
    assert open_sampler(0) is None
    assert open_sampler(0.5) is not None
    run = fresh()
    training(server, run, steps=10, pause=0.05, **{SAMPLED: "0"})
    assert set(summaries(server, run)) == {"train/loss"}


def test_gpus_are_sampled_through_nvml_and_unsupported_queries_left_out(
    server: Server, tmp_path: Path
) -> None:
    (tmp_path / "pynvml.py").write_text(FAKE_NVML)
    run = fresh()
    training(server, run, steps=20, pause=0.05, PYTHONPATH=str(tmp_path), **{SAMPLED: "0.2"})
    found = summaries(server, run)
    gpus = {name for name in found if name.startswith("system/gpu")}
    leaves = ("utilization_percent", "memory_percent", "memory_used_gb", "temperature_c")
    assert gpus == {f"system/gpu{i}/{leaf}" for i in (0, 1) for leaf in leaves} | {
        "system/gpu0/power_w"
    }
    assert {value for _, value in points(server, run, "system/gpu0/utilization_percent")} == {87.0}
    assert {value for _, value in points(server, run, "system/gpu1/memory_percent")} == {25.0}
    assert {value for _, value in points(server, run, "system/gpu0/memory_used_gb")} == {20.0}
    assert {value for _, value in points(server, run, "system/gpu0/power_w")} == {312.5}


def test_the_runner_s_training_process_samples_the_machine(server: Server) -> None:
    run = fresh()
    code = textwrap.dedent(
        """
        import time, tuneplane
        for step in range(30):
            tuneplane.report({"train/loss": 1.0 / (step + 1)})
            time.sleep(0.05)
        """
    )
    done = subprocess.run(
        [
            sys.executable, "-m", "tuneplane.cli", "run", "--server", server.base,
            "--data-dir", str(server.data_dir), "--project", PROJECT, "--run", run,
            "--", sys.executable, "-c", code,
        ],
        env=runner_env(**{SAMPLED: "0.2"}),
        capture_output=True,
        text=True,
        timeout=90,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert set(summaries(server, run)) >= MACHINE
