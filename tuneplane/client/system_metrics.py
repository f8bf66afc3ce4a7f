"""System metrics: CPU, memory and, where an NVIDIA GPU and its management library are
present, each GPU's utilisation, memory, temperature and power, as ``system/…`` series.

The reporter's sender thread takes a sample every ``TUNEPLANE_SYSTEM_METRICS_SECONDS`` (10 by
default, 0 turns it off) and queues it at the step the run has reached. A series holds one
point per step: while the step does not move (a step longer than the interval), no sample is
queued, so a sample never replaces an earlier one. The first sample comes one interval after
the sender starts (CPU use is measured over an interval).

Names (percentages 0 to 100, sizes in GB of 10^9 bytes)::

    system/cpu_percent             system/memory_percent      system/memory_used_gb
    system/process_cpu_percent     system/process_memory_gb
    system/gpu<i>/utilization_percent   system/gpu<i>/memory_percent
    system/gpu<i>/memory_used_gb        system/gpu<i>/temperature_c   system/gpu<i>/power_w

GPUs are read through NVML's Python binding (``pip install nvidia-ml-py``, imported as
``pynvml``); without it, or without a GPU, there are no ``gpu`` series. A query a device
does not support is left out of its sample.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any, Final

from tuneplane.client.queue import PointQueue

PREFIX: Final = "system/"
_GB: Final = 1e9

logger = logging.getLogger("tuneplane")


class Gpus:
    """The machine's NVIDIA GPUs through NVML, or none."""

    def __init__(self, nvml: ModuleType | None, handles: list[Any]) -> None:
        self._nvml = nvml
        self._handles = handles

    @classmethod
    def open(cls) -> Gpus:
        try:
            nvml = importlib.import_module("pynvml")
            nvml.nvmlInit()
            handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        except Exception:  # no binding, no driver, no device: no GPU series
            return cls(None, [])
        return cls(nvml, handles)

    def __len__(self) -> int:
        return len(self._handles)

    def sample(self) -> dict[str, float]:
        nvml: Any = self._nvml
        metrics: dict[str, float] = {}
        for index, handle in enumerate(self._handles):
            name = f"{PREFIX}gpu{index}/"
            queries: tuple[tuple[str, Callable[..., Any], tuple[Any, ...], float], ...] = (
                ("utilization_percent", _utilization, (nvml, handle), 1),
                ("temperature_c", nvml.nvmlDeviceGetTemperature, (handle, 0), 1),  # the die
                ("power_w", nvml.nvmlDeviceGetPowerUsage, (handle,), 1e-3),  # milliwatts
            )
            for leaf, query, arguments, scale in queries:
                with contextlib.suppress(Exception):  # not supported by this device
                    metrics[name + leaf] = float(query(*arguments)) * scale
            with contextlib.suppress(Exception):
                memory = nvml.nvmlDeviceGetMemoryInfo(handle)
                metrics[name + "memory_used_gb"] = memory.used / _GB
                metrics[name + "memory_percent"] = 100 * memory.used / memory.total
        return metrics


def _utilization(nvml: Any, handle: Any) -> float:
    return float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)


class SystemSampler:
    """Samples of this machine and of the process that reports."""

    def __init__(self, interval: float) -> None:
        import psutil  # on the sender thread: init() and report() never pay for it

        self.interval = interval
        self._psutil = psutil
        self._process = psutil.Process()
        # CPU use is measured between two calls: this one starts the first interval.
        psutil.cpu_percent(None)
        self._process.cpu_percent(None)
        self._gpus = Gpus.open()

    def sample(self) -> dict[str, float]:
        psutil = self._psutil
        memory = psutil.virtual_memory()
        metrics = {
            f"{PREFIX}cpu_percent": float(psutil.cpu_percent(None)),
            f"{PREFIX}memory_percent": float(memory.percent),
            f"{PREFIX}memory_used_gb": (memory.total - memory.available) / _GB,
        }
        with contextlib.suppress(psutil.Error):  # e.g. no access to our own /proc entry
            metrics[f"{PREFIX}process_cpu_percent"] = float(self._process.cpu_percent(None))
            metrics[f"{PREFIX}process_memory_gb"] = self._process.memory_info().rss / _GB
        metrics.update(self._gpus.sample())
        return metrics


def open_sampler(interval: float | None) -> SystemSampler | None:
    """A sampler every ``interval`` seconds; None when that is off (None or 0) or psutil
    cannot read this machine (said once)."""
    if not interval:
        return None
    try:
        return SystemSampler(interval)
    except Exception as exc:
        logger.warning(
            "tuneplane: system metrics are not sampled (%s: %s)", type(exc).__name__, exc
        )
        return None


class SystemSeries:
    """The sender's side: samples due every interval, queued one per step reached."""

    def __init__(self, sampler: SystemSampler, queue: PointQueue) -> None:
        self._sampler = sampler
        self._queue = queue
        self.due = time.monotonic() + sampler.interval
        # A resumed run's last step has its sample already: wait for the next one.
        self._step = queue.reached_step()

    @classmethod
    def start(cls, interval: float | None, queue: PointQueue) -> SystemSeries | None:
        sampler = open_sampler(interval)
        return None if sampler is None else cls(sampler, queue)

    def sample(self) -> None:
        self.due = time.monotonic() + self._sampler.interval
        step = max(self._queue.reached_step(), 0)
        if step <= self._step:
            return
        self._step = step
        points: dict[object, object] = dict(self._sampler.sample().items())
        self._queue.put_at(points, step)
