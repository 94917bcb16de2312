"""Host usage: CPU against the cgroup quota (v2 and v1) or the affinity mask, NIC rates in Kbit/s
against the link speed or the configured override, virtual NICs ignored."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from service.broker.host_usage import HostUsage, cgroup_cpu_limit, cgroup_cpu_time_us, physical_nics


def test_cgroup_v2_quota_and_usage(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    (tmp_path / "cpu.stat").write_text("usage_usec 5000000\nuser_usec 1\n")
    assert cgroup_cpu_limit(tmp_path) == 1.5
    assert cgroup_cpu_time_us(tmp_path) == 5_000_000
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cgroup_cpu_limit(tmp_path) is None


def test_cgroup_v1_quota(tmp_path: Path) -> None:
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("200000")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000")
    assert cgroup_cpu_limit(tmp_path) == 2.0
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1")
    assert cgroup_cpu_limit(tmp_path) is None


def test_virtual_nics_are_ignored() -> None:
    assert physical_nics(["lo", "eth0", "docker0", "veth12", "ens5"]) == ["eth0", "ens5"]


def make(tmp_path: Path, counters: dict[str, tuple[int, int]], clock: list[float], **kw: object) -> HostUsage:
    return HostUsage(
        cgroup_root=tmp_path,
        clock=lambda: clock[0],
        net_counters=lambda: {
            n: SimpleNamespace(bytes_recv=r, bytes_sent=s) for n, (r, s) in counters.items()
        },
        nic_speeds_mbps=lambda: {"eth0": 1000, "lo": 0, "docker0": 10000},
        host_cpu_percent=lambda: 25.0,
        host_cpus=lambda: 4,
        **kw,  # type: ignore[arg-type]
    )


def test_rates_and_limits_under_a_cgroup(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("200000 100000")
    (tmp_path / "cpu.stat").write_text("usage_usec 1000000")
    counters = {"eth0": (0, 0), "lo": (0, 0)}
    clock = [100.0]
    h = make(tmp_path, counters, clock)
    first = h.sample()
    assert first.cpu.limit == 200 and first.bandwidth_in.usage == 0
    (tmp_path / "cpu.stat").write_text("usage_usec 2500000")  # 1.5 s of CPU in 2 s
    counters["eth0"] = (250_000, 125_000)
    counters["lo"] = (10**9, 10**9)  # loopback traffic does not count
    clock[0] = 102.0
    u = h.sample()
    assert u.cpu.usage == pytest.approx(75.0)
    assert u.bandwidth_in.usage == pytest.approx(1000.0)  # 250 kB in 2 s = 1000 Kbit/s
    assert u.bandwidth_out.usage == pytest.approx(500.0)
    assert u.bandwidth_in.limit == pytest.approx(1_000_000.0)  # eth0 at 1 Gbit/s; docker0 ignored
    assert u.memory.limit > 0


def test_nic_override_and_host_cpu_without_cgroup(tmp_path: Path) -> None:
    h = make(tmp_path, {"eth0": (0, 0)}, [1.0], nic_speed_override_gbps=10.0)
    u = h.sample()
    assert u.bandwidth_out.limit == pytest.approx(10_000_000.0)  # one physical NIC (eth0)
    assert u.cpu.usage == pytest.approx(min(25.0 * 4, u.cpu.limit))  # host percent times host CPUs
    assert u.cpu.limit == h.cores() * 100


def test_nic_override_is_per_physical_nic(tmp_path: Path) -> None:
    h = make(tmp_path, {"eth0": (0, 0)}, [1.0], nic_speed_override_gbps=10.0)
    h.nic_speeds_mbps = lambda: {"eth0": 1000, "eth1": 1000, "lo": 0, "veth9": 10000}
    assert h.nic_limit_kbps() == pytest.approx(20_000_000.0)  # 2 x 10 Gbit/s; lo and veth ignored
