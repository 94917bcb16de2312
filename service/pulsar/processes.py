"""The launcher's process plumbing: cgroups per broker, Java properties files, waiting for a port,
and stopping a JVM (SIGCONT first: a stopped JVM holds SIGTERM pending)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from service.pulsar.runtime import PulsarLaunchError

CGROUP_ROOT = Path("/sys/fs/cgroup")


def cgroups_writable() -> bool:
    if os.environ.get("LOADMGR_PULSAR_CGROUPS", "1") == "0":
        return False
    return all(
        os.access(CGROUP_ROOT / ctl, os.W_OK) and (CGROUP_ROOT / ctl / "cgroup.procs").exists()
        for ctl in ("cpu", "cpuacct")
    )


def in_cgroup(name: str, cpus: float | None) -> list[str]:
    """A shell prefix that moves itself into cpu and cpuacct cgroup ``name`` and execs the command,
    so the JVM starts inside it (the JVM reads its container's CPU limits and usage at start)."""
    for ctl in ("cpu", "cpuacct"):
        (CGROUP_ROOT / ctl / name).mkdir(exist_ok=True)
    if cpus is not None:
        period = 100_000
        (CGROUP_ROOT / "cpu" / name / "cpu.cfs_period_us").write_text(str(period))
        (CGROUP_ROOT / "cpu" / name / "cpu.cfs_quota_us").write_text(str(int(cpus * period)))
    procs = " ".join(str(CGROUP_ROOT / ctl / name / "cgroup.procs") for ctl in ("cpu", "cpuacct"))
    return ["sh", "-c", f'for f in {procs}; do echo $$ > "$f"; done; exec "$@"', "sh"]


def write_properties(path: Path, values: Mapping[str, str]) -> None:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()), encoding="utf-8")


def wait_port(
    port: int,
    deadline: float,
    proc: subprocess.Popen[bytes],
    name: str,
    log_path: Path,
    host: str = "127.0.0.1",
) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:]
            raise PulsarLaunchError(f"{name} exited {proc.returncode}:\n{tail}")
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1):
            return
        time.sleep(0.3)
    raise PulsarLaunchError(f"{name} did not listen on {host}:{port} in time")


def terminate(proc: subprocess.Popen[Any], grace: float) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGCONT)
        if grace > 0:
            proc.terminate()
        else:
            proc.kill()
    try:
        proc.wait(timeout=max(grace, 1.0))
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(timeout=10)
