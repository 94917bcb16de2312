"""The host's usage as a Pulsar broker reports it: CPU, memory and NIC in/out, each with its limit.

CPU is measured against what the process may use: a cgroup CPU quota if one is set (v2 ``cpu.max``
or v1 ``cpu.cfs_quota_us``/``cpu.cfs_period_us``), else the CPUs of its affinity mask. Usage and limit
are in percent of one core (a 4-core limit is 400), as Pulsar's ``LinuxBrokerHostUsageImpl``
reports. Under a cgroup, usage comes from the cgroup's own CPU time so neighbours do not count.
NIC usage and limits are in Kbit/s; the limit is ``loadBalancerOverrideBrokerNicSpeedGbps`` when
set, else the sum of the physical NICs' link speeds (0 when unknown: Pulsar then reports no limit).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from balancer.models import ResourceUsage, SystemResourceUsage

VIRTUAL_NIC_PREFIXES = ("lo", "docker", "veth", "br-", "virbr", "cni", "flannel", "cali", "tun", "tap")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def cgroup_cpu_limit(root: Path) -> float | None:
    """Cores allowed by the cgroup quota, or None when unlimited or not under a cgroup."""
    v2 = _read(root / "cpu.max")
    if v2 is not None:
        parts = v2.split()
        if len(parts) == 2 and parts[0] != "max":
            return int(parts[0]) / int(parts[1])
        return None
    quota = _read(root / "cpu" / "cpu.cfs_quota_us") or _read(root / "cpu.cfs_quota_us")
    period = _read(root / "cpu" / "cpu.cfs_period_us") or _read(root / "cpu.cfs_period_us")
    if quota is not None and period is not None and int(quota) > 0 and int(period) > 0:
        return int(quota) / int(period)
    return None


def cgroup_cpu_time_us(root: Path) -> int | None:
    """Total CPU time of the cgroup in microseconds (v2 ``cpu.stat`` or v1 ``cpuacct.usage`` in ns)."""
    stat = _read(root / "cpu.stat")
    if stat is not None:
        for line in stat.splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value)
    ns = _read(root / "cpuacct" / "cpuacct.usage") or _read(root / "cpuacct.usage")
    return None if ns is None else int(ns) // 1000


def physical_nics(names: list[str]) -> list[str]:
    return [n for n in names if not n.startswith(VIRTUAL_NIC_PREFIXES)]


@dataclass
class HostUsage:
    """Samples host usage; each ``sample()`` reports rates since the previous one.

    The readers are injectable so tests can fake ``/sys/fs/cgroup`` and NIC counters.
    """

    nic_speed_override_gbps: float | None = None
    cgroup_root: Path = Path("/sys/fs/cgroup")
    clock: Callable[[], float] = time.monotonic
    net_counters: Callable[[], dict[str, Any]] = field(default=lambda: psutil.net_io_counters(pernic=True))
    nic_speeds_mbps: Callable[[], dict[str, int]] = field(
        default=lambda: {n: s.speed for n, s in psutil.net_if_stats().items()}
    )
    host_cpu_percent: Callable[[], float] = field(default=lambda: psutil.cpu_percent(interval=None))
    host_cpus: Callable[[], int] = field(default=lambda: psutil.cpu_count() or 1)
    _last_time: float | None = None
    _last_cpu_us: int | None = None
    _last_rx: int = 0
    _last_tx: int = 0

    def cores(self) -> float:
        limit = cgroup_cpu_limit(self.cgroup_root)
        if limit is not None:
            return limit
        affinity = getattr(os, "sched_getaffinity", None)
        return float(len(affinity(0))) if affinity is not None else float(self.host_cpus())

    def nic_limit_kbps(self) -> float:
        speeds = self.nic_speeds_mbps()
        if self.nic_speed_override_gbps is not None:
            # Pulsar's LinuxBrokerHostUsageImpl: the override is per NIC, times the physical NICs.
            return self.nic_speed_override_gbps * 1_000_000 * len(physical_nics(list(speeds)))
        return float(sum(max(s, 0) for n, s in speeds.items() if n in physical_nics(list(speeds)))) * 1000

    def _nic_bytes(self) -> tuple[int, int]:
        counters = self.net_counters()
        nics = physical_nics(list(counters))
        return sum(counters[n].bytes_recv for n in nics), sum(counters[n].bytes_sent for n in nics)

    def sample(self) -> SystemResourceUsage:
        now = self.clock()
        cores = self.cores()
        rx, tx = self._nic_bytes()
        cpu_us = cgroup_cpu_time_us(self.cgroup_root) if cgroup_cpu_limit(self.cgroup_root) else None
        if self._last_time is None or now <= self._last_time:
            cpu_used = 0.0 if cpu_us is not None else self.host_cpu_percent() * self.host_cpus()
            rx_kbps = tx_kbps = 0.0
        else:
            dt = now - self._last_time
            if cpu_us is not None and self._last_cpu_us is not None:
                cpu_used = (cpu_us - self._last_cpu_us) / (dt * 1_000_000) * 100
            else:
                cpu_used = self.host_cpu_percent() * self.host_cpus()
            rx_kbps = max(rx - self._last_rx, 0) * 8 / 1000 / dt
            tx_kbps = max(tx - self._last_tx, 0) * 8 / 1000 / dt
        self._last_time, self._last_cpu_us, self._last_rx, self._last_tx = now, cpu_us, rx, tx
        vm = psutil.virtual_memory()
        nic_limit = self.nic_limit_kbps()
        mb = 1024 * 1024
        return SystemResourceUsage(
            cpu=ResourceUsage(usage=min(cpu_used, cores * 100), limit=cores * 100),
            memory=ResourceUsage(usage=(vm.total - vm.available) / mb, limit=vm.total / mb),
            direct_memory=ResourceUsage(usage=0.0, limit=0.0),
            bandwidth_in=ResourceUsage(usage=rx_kbps, limit=nic_limit),
            bandwidth_out=ResourceUsage(usage=tx_kbps, limit=nic_limit),
        )
