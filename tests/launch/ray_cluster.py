"""A real local Ray cluster for the Ray engine's tests: one head started with the package's
own ``ray start --head``, bound to loopback on free ports, in a temporary directory of its
own, and stopped by its own processes (``ray stop`` would end every Ray of the machine)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import psutil

#: The ports a head listens on besides its workers', each given a free one.
_PORTS = (
    "--port",
    "--dashboard-port",
    "--object-manager-port",
    "--node-manager-port",
    "--ray-client-server-port",
    "--dashboard-agent-listen-port",
    "--dashboard-agent-grpc-port",
    "--runtime-env-agent-port",
    "--metrics-export-port",
)


def _free_ports(count: int) -> list[int]:
    with ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]


def _cluster_processes(temp_dir: str) -> list[psutil.Process]:
    """The processes of the cluster in ``temp_dir``: those started with it in their command
    line (the GCS, the raylet, the dashboard, the monitors) and all their children."""
    found: dict[int, psutil.Process] = {}
    for process in psutil.process_iter(["cmdline"]):
        if process.pid == os.getpid():
            continue  # whatever its own command line says, the caller is not the cluster
        if any(temp_dir in part for part in process.info["cmdline"] or ()):
            found[process.pid] = process
            for child in process.children(recursive=True):
                found[child.pid] = child
    return list(found.values())


def _stop(temp_dir: str) -> None:
    processes = _cluster_processes(temp_dir)
    for process in processes:
        try:
            process.terminate()
        except psutil.NoSuchProcess:
            continue
    _, alive = psutil.wait_procs(processes, timeout=3)
    for process in alive:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            continue


@contextmanager
def ray_cluster(cpus: int = 2) -> Iterator[str]:
    """A single-node Ray cluster with ``cpus`` CPUs and no GPU; yields its dashboard's
    address, where the job submission API is."""
    # A short path: Ray's sockets live under it, and a socket's path has at most 107 bytes.
    temp_dir = tempfile.mkdtemp(prefix="tp-ray-", dir="/tmp")
    ports = _free_ports(len(_PORTS))
    dashboard = ports[1]
    command = [
        str(Path(sys.executable).parent / "ray"),
        "start",
        "--head",
        f"--num-cpus={cpus}",
        "--num-gpus=0",
        "--node-ip-address=127.0.0.1",
        "--dashboard-host=127.0.0.1",
        "--disable-usage-stats",
        f"--temp-dir={temp_dir}",
        *(f"{flag}={port}" for flag, port in zip(_PORTS, ports, strict=True)),
    ]
    # The jobs inherit the head's environment: none of this process's tuneplane settings.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TUNEPLANE_", "TRACKIO_"))}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    try:
        subprocess.run(command, env=env, check=True, capture_output=True, timeout=120, cwd=temp_dir)
        address = f"http://127.0.0.1:{dashboard}"
        _wait_for_jobs_api(address)
        yield address
    finally:
        _stop(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)


def _wait_for_jobs_api(address: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{address}/api/version", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"the Ray dashboard at {address} did not answer"
        time.sleep(0.2)
