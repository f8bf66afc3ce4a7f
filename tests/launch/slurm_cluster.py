"""A real single-node Slurm for the tests: Debian's slurm-wlm and munge, a slurm.conf of
its own in a temporary directory (free ports, no cgroups, proctrack/linuxproc, no
accounting), one fake GPU declared as GRES for fleet fit, the daemons started with ``-f``
and stopped by the PIDs in their pid files. munge is started as its user when it is not
running, and stopped again by its pid file when this module started it."""

from __future__ import annotations

import contextlib
import os
import pwd
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from tests.serving import free_port

MUNGE_PID = Path("/run/munge/munged.pid")
#: The node's memory as slurm.conf declares it (a job asks 1 GB by default).
NODE_MEMORY_MIB = 4096
NODE_GPUS = 1


@dataclass(frozen=True, slots=True)
class Cluster:
    conf: Path
    directory: Path
    cpus: int

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def command(self, *args: str) -> str:
        done = subprocess.run(args, env=self.env, capture_output=True, text=True, check=True)
        return done.stdout


def _munge_works() -> bool:
    made = subprocess.run(["/usr/bin/munge", "-n"], capture_output=True, check=False)
    if made.returncode != 0:
        return False
    read = subprocess.run(["/usr/bin/unmunge"], input=made.stdout, capture_output=True, check=False)
    return read.returncode == 0


@contextlib.contextmanager
def munge() -> Iterator[None]:
    """munged, as user munge: the one already running, or one started here."""
    if _munge_works():
        yield
        return
    run = Path("/run/munge")
    run.mkdir(parents=True, exist_ok=True)
    os.chown(run, _uid("munge"), -1)
    subprocess.run(["/usr/bin/su", "-s", "/bin/sh", "munge", "-c", "/usr/sbin/munged"], check=True)
    try:
        _wait(_munge_works, "munged to answer")
        yield
    finally:
        _stop_by_pid_file(MUNGE_PID)


def _uid(user: str) -> int:
    return pwd.getpwnam(user).pw_uid


def _wait(ready: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"waited {timeout} s for {what}"
        time.sleep(0.1)


def _stop_by_pid_file(path: Path) -> None:
    with contextlib.suppress(OSError, ValueError):
        pid = int(path.read_text().strip())
        process = psutil.Process(pid)
        process.send_signal(signal.SIGTERM)
        process.wait(10)


def write_conf(directory: Path) -> Path:
    """slurm.conf and gres.conf for this machine as one node of one partition."""
    host = socket.gethostname().split(".")[0]
    cpus = os.cpu_count() or 1
    for name in ("state", "spool"):
        (directory / name).mkdir(parents=True, exist_ok=True)
    devices = []
    for index in range(NODE_GPUS):  # device files of no device: GRES is declared, not used
        devices.append(directory / f"fake-gpu{index}")
        devices[-1].touch()
    files = ",".join(str(d) for d in devices)
    (directory / "gres.conf").write_text(f"NodeName={host} Name=gpu File={files}\n")
    conf = directory / "slurm.conf"
    conf.write_text(
        f"""ClusterName=tuneplane-test
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
StateSaveLocation={directory / "state"}
SlurmdSpoolDir={directory / "spool"}
SlurmctldPidFile={directory / "slurmctld.pid"}
SlurmdPidFile={directory / "slurmd.pid"}
SlurmctldLogFile={directory / "slurmctld.log"}
SlurmdLogFile={directory / "slurmd.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
KillWait=5
MinJobAge=300
GresTypes=gpu
NodeName={host} CPUs={cpus} RealMemory={NODE_MEMORY_MIB} Gres=gpu:{NODE_GPUS} State=UNKNOWN
PartitionName=main Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""
    )
    return conf


@contextlib.contextmanager
def slurm_cluster(directory: Path) -> Iterator[Cluster]:
    """slurmctld and slurmd on this machine, until the block ends."""
    directory.mkdir(parents=True, exist_ok=True)
    conf = write_conf(directory)
    cluster = Cluster(conf, directory, os.cpu_count() or 1)
    with munge():
        try:
            subprocess.run(["/usr/sbin/slurmctld", "-f", str(conf)], env=cluster.env, check=True)
            subprocess.run(["/usr/sbin/slurmd", "-f", str(conf)], env=cluster.env, check=True)
            _wait(lambda: _idle(cluster), "the node to be idle")
            yield cluster
        finally:
            _stop_by_pid_file(directory / "slurmd.pid")
            _stop_by_pid_file(directory / "slurmctld.pid")


def _idle(cluster: Cluster) -> bool:
    done = subprocess.run(
        ["/usr/bin/sinfo", "--noheader", "--format=%t"],
        env=cluster.env,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() == "idle"
